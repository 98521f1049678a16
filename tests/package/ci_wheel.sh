#!/usr/bin/env bash
# CI: ccbench as a user installs it -- the sdist and the wheel built from the checkout, the
# wheel installed (not editable) into a fresh venv in a directory outside the checkout, and
# the commands run there with shipped configs: --version, configs, a quick sweep at 2 ranks
# (-c quick, by name), show, fit, report. Fails on the first error.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
work=$(mktemp -d -t ccbench-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'echo "wheel: FAIL: line $LINENO: $BASH_COMMAND" >&2' ERR
python3 -m venv "$work/build" && "$work/build/bin/pip" install -q build
"$work/build/bin/python" -m build --sdist --wheel --outdir "$work/dist" "$repo" >/dev/null
ls "$work/dist"/ccbench-*.tar.gz "$work/dist"/ccbench-*.whl >/dev/null
wheel=$(ls "$work/dist"/ccbench-*.whl)
# the Spack recipe and the easyconfig take this sdist's version and checksum, and stay valid Python
python3 contrib/release_checksums.py --dest "$work/recipes" "$(ls "$work/dist"/ccbench-*.tar.gz)" >/dev/null
python3 -c 'import ast, pathlib, sys; [ast.parse(p.read_text()) for p in pathlib.Path(sys.argv[1]).rglob("*") if p.is_file()]' \
  "$work/recipes"
sdist_sha=$(sha256sum "$work/dist"/ccbench-*.tar.gz | cut -d' ' -f1)
[[ $(cat "$work/recipes/spack/package.py") == *"$sdist_sha"* ]] || { echo "wheel: FAIL: recipe checksum" >&2; exit 1; }
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel[mpich,report]"
cd "$work"  # outside the checkout: nothing of it is on the path
. "$work/venv/bin/activate"
python -c 'import ccbench, sys; assert not ccbench.__file__.startswith(sys.argv[1]), ccbench.__file__' "$repo"
expect() {  # expect WHAT TEXT: TEXT holds WHAT (no pipe into grep -q: its early exit is a SIGPIPE under pipefail)
  [[ $2 == *"$1"* ]] || { echo "wheel: FAIL: expected '$1' in: $2" >&2; exit 1; }
}
version=$(python -c 'import ccbench; print(ccbench.__version__)')
expect "$version" "$(ccbench --version)"
expect "quick" "$(ccbench configs)"
ccbench launch -n 2 -c quick -C allreduce,pingpong -s 8:64K:8 --min-reps 10 --max-reps 30 --budget 0.05 \
  --results-dir runs --no-show
run=$(ls -d runs/*_np2)
expect "all correct" "$(ccbench show "$run")"
expect "wrote" "$(ccbench fit "$run")"
expect "report.md" "$(ccbench report "$run")"
# reading a run writes beside the results tree, never into the run
test -s "runs-derived/${run#runs/}/report/report.md" && test -s "runs-derived/${run#runs/}/report/report.html"
test ! -e "$run/report" && test ! -e "$run/fits.json"
echo "wheel: $(basename "$wheel") installed outside the checkout; version, configs, launch -c quick, show, fit, report passed; recipes take the sdist's checksum"
