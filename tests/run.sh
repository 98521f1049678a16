#!/usr/bin/env bash
# The whole test suite: the layer contracts (import-linter, pyproject.toml), the plain tier once,
# then the MPI tier at 1, 2, 3, 4 and 5 ranks.
# Every MPI test runs as `python -m mpi4py -m pytest` so a failing rank aborts the job
# instead of leaving the others waiting; a test that hangs fails with its stack after
# TEST_TIMEOUT seconds (MPI_TEST_TIMEOUT in the MPI tier, whose tests take seconds; pytest-timeout:
# there a watcher thread, since a rank blocked inside MPI never returns to Python for a signal),
# and each MPI tier ends after TIER_TIMEOUT seconds whatever happens (timeout around mpiexec).
# The MPI tier collects only the files that hold an MPI test (a mark.mpi): every rank collects what it is
# given, and collecting the whole suite costs each rank about 15 s of CPU, 15 ranks over the tiers.
set -euo pipefail
cd "$(dirname "$0")/.."
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
MPI_TEST_TIMEOUT=${MPI_TEST_TIMEOUT:-120}
TIER_TIMEOUT=${TIER_TIMEOUT:-900}
lint-imports
python -m pytest -q --timeout "$TEST_TIMEOUT" tests
MPI_FILES=$(grep -rl --include='test_*.py' 'mark\.mpi' tests | sort)
for n in 1 2 3 4 5; do
  echo "== MPI tier at $n ranks"
  timeout --kill-after=30 "$TIER_TIMEOUT" \
    mpiexec -n "$n" python -m mpi4py -m pytest -q --only-mpi --timeout "$MPI_TEST_TIMEOUT" --timeout-method thread $MPI_FILES
done
