#!/usr/bin/env bash
# The whole test suite: the layer contracts (import-linter, pyproject.toml), the plain tier once,
# then the MPI tier at 1, 2, 3, 4 and 5 ranks.
# Every MPI test runs as `python -m mpi4py -m pytest` so a failing rank aborts the job
# instead of leaving the others waiting.
set -euo pipefail
cd "$(dirname "$0")/.."
lint-imports
python -m pytest -q tests
for n in 1 2 3 4 5; do
  echo "== MPI tier at $n ranks"
  mpiexec -n "$n" python -m mpi4py -m pytest -q --only-mpi tests
done
