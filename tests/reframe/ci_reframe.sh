#!/usr/bin/env bash
# CI: the ReFrame check in contrib/reframe/ run by ReFrame itself (reframe-hpc, in a virtual
# environment of its own) on this machine's local partition with the mpiexec launcher: ccbench
# sweeps at 2 ranks under ReFrame, ReFrame's sanity (every element checked) and its
# performance variables (latency and bus bandwidth per size, read from ccbench's OSU and
# nccl-tests exports) must pass.  Needs the environment that holds ccbench and its MPI
# activated (.ci/run does it) and PyPI for reframe-hpc; about half a minute.  When it cannot
# run: in CI (CI=true) the build fails, elsewhere a SKIP with the reason (tests/ci_tier.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/ci_tier.sh
source tests/ci_tier.sh
tier_init reframe
command -v python3 >/dev/null || skip_or_fail "no python3"
python3 -c 'import ccbench, mpi4py' 2>/dev/null || skip_or_fail "ccbench and mpi4py are not in the active environment"
command -v mpiexec >/dev/null || skip_or_fail "no mpiexec on PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$(python3 -m venv "$work/rfm" 2>&1) || skip_or_fail "python3 -m venv failed: ${out##*$'\n'}"
out=$("$work/rfm/bin/pip" install -q reframe-hpc 2>&1) || skip_or_fail "pip install reframe-hpc failed: ${out##*$'\n'}"
repo=$(pwd)
cd "$work"
log=$("$work/rfm/bin/reframe" -C "$repo/contrib/reframe/settings.py" -c "$repo/contrib/reframe/ccbench_check.py" \
      -r --prefix "$work/run" 2>&1) || { echo "$log" >&2; echo "reframe: FAIL: the check did not pass" >&2; exit 1; }
for want in "PASSED" "Ran 1/1 test case" "P: latency_8:" "P: busbw_1M:"; do
  [[ $log == *"$want"* ]] || { echo "$log" >&2; echo "reframe: FAIL: expected '$want'" >&2; exit 1; }
done
echo "reframe: $(grep -c '^P: ' <<<"$log") performance variables, sanity passed"
