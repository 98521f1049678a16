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
python3 -m venv "$work/build" && "$work/build/bin/pip" install -q build
"$work/build/bin/python" -m build --sdist --wheel --outdir "$work/dist" "$repo" >/dev/null
ls "$work/dist"/ccbench-*.tar.gz "$work/dist"/ccbench-*.whl >/dev/null
wheel=$(ls "$work/dist"/ccbench-*.whl)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel[mpich,report]"
cd "$work"  # outside the checkout: nothing of it is on the path
. "$work/venv/bin/activate"
python -c 'import ccbench, sys; assert not ccbench.__file__.startswith(sys.argv[1]), ccbench.__file__' "$repo"
version=$(python -c 'import ccbench; print(ccbench.__version__)')
ccbench --version | grep -q "$version"
ccbench configs | grep -q '^quick'
ccbench launch -n 2 -c quick -C allreduce,pingpong -s 8:64K:8 --min-reps 10 --max-reps 30 --budget 0.05 --results-dir runs --no-show
run=$(ls -d runs/*_np2 | head -1)
ccbench show "$run" | grep -q 'all correct'
ccbench fit "$run" | grep -q 'wrote'
ccbench report "$run" | grep -q 'report.md'
test -s "$run/report/report.md" && test -s "$run/report/report.html"
echo "wheel: $(basename "$wheel") installed outside the checkout; version, configs, launch -c quick, show, fit, report passed"
