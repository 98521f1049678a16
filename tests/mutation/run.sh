#!/usr/bin/env bash
# Mutation testing of ccbench's core modules with mutmut 3 (docs/mutation.md has the scores).
#
#   tests/mutation/run.sh                      # every module in MODULES below
#   tests/mutation/run.sh ccbench/core/stats.py ccbench/analysis/tune.py
#   JOBS=1 tests/mutation/run.sh ...           # parallel mutant workers (default 2)
#   KEEP=1 tests/mutation/run.sh ...           # keep the scratch copy (to `mutmut show` a survivor)
#   EXTRA_TESTS="tests/test_x.py" tests/mutation/run.sh MODULE   # more test files for this run
#   UNDECORATE=1 tests/mutation/run.sh ccbench/algorithms/gather.py  # mutate the decorated algorithms too
#   MUTANTS='*Watchdog*' tests/mutation/run.sh ccbench/measure/session.py  # only the mutants whose names match
#                                              (mutmut's names: module.x_function__mutmut_N, module.xǁClassǁmethod__...)
#
# It never touches the checkout: the working tree (uncommitted edits included, .git and
# virtual environments left out) is copied to a directory from mktemp, and mutmut runs
# there, one module at a time, with only that module's fast test files (-m "not mpi").
# The mutmut config is written into the copy's setup.cfg (the checkout has none).
# Needs mutmut >= 3.8 in the active Python environment (pip install mutmut).
#
# Output: per module "killed/total score" (killed counts the mutants that made a test fail,
# time out or crash), then every other mutant by name: "survived", or "no tests" when no
# selected test calls the mutated function; `KEEP=1` and `cd <copy> && mutmut show NAME` print a survivor's diff.
# Exit status: 0, whatever the score (it is a report, not a gate).
#
# Time on a 2-core machine with JOBS=2 (wall time, measured 2026-11-26):
#   ccbench/core/stats.py          371 mutants, 1 to 1.5 min
#   ccbench/measure/timing.py      275 mutants, 6 min (its hanging mutants end as timeouts)
#   ccbench/analysis/compare.py    556 mutants, about 15 min
# with JOBS=1 beside another test run on the same 2 cores:
#   ccbench/store/launches.py      164 mutants, 69 s
#   ccbench/core/replication.py    1403 mutants, over 33 min (stopped at 1227: mutants of the incomplete
#                                  beta function's continued fraction stop converging and run into timeouts)
#   ccbench/analysis/predict.py    1590 mutants, 11.5 min
#   ccbench/store/run.py           215 mutants, 25 min (its mutants also run tests/test_compare.py: 30 s of tests)
#   ccbench/analysis/tune.py       1732 mutants, 31 min with the tests as they were before 2026-11-26's (594 mutants
#                                  had no test then; a full run with today's tests was not timed)
# with JOBS=1 beside four other mutation runs (2026-11-27):
#   ccbench/measure/sweep.py       782 mutants, 25 min;  ccbench/measure/session.py  863 mutants, 21 min
#   ccbench/analysis/predict.py    1590 mutants, 26 min; ccbench/store/launches.py   295 mutants, 9 min
#   ccbench/analysis/fit.py        2268 mutants, about 2 h in parts (30 a minute at best on this machine)
#   ccbench/algorithms/registry.py 63 mutants, 33 min (each survivor runs the slow predict and at-scale tests)
#   UNDECORATE=1 ccbench/algorithms/gather.py  168 mutants, 12 min
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${JOBS:-2}

# module -> the test files that exercise it (space-separated, relative to the repository root)
declare -A TESTS=(
  [ccbench/core/stats.py]="tests/test_stats.py"
  [ccbench/measure/timing.py]="tests/test_measure_contract.py"
  [ccbench/analysis/compare.py]="tests/test_compare.py"
  [ccbench/analysis/tune.py]="tests/test_tune.py"
  [ccbench/store/run.py]="tests/test_results.py tests/test_compare.py"
  [ccbench/analysis/predict.py]="tests/test_predict.py tests/test_predict_parts.py"
  [ccbench/core/replication.py]="tests/test_replication.py"
  [ccbench/store/launches.py]="tests/test_launches.py tests/test_launch_records.py"
  [ccbench/algorithms/allreduce.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/bcast.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/allgather.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/reduce_scatter.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/reduce.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/alltoall.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/gather.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/scatter.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/barrier.py]="tests/test_costs_at_scale.py tests/test_algorithms_sim.py tests/test_send_buffers.py tests/test_algorithm_parts.py"
  [ccbench/algorithms/registry.py]="tests/test_predict.py tests/test_costs_at_scale.py tests/test_algorithm_parts.py"
  [ccbench/analysis/fit.py]="tests/test_fit.py tests/test_gamma_paths.py tests/test_fit_parts.py"
  [ccbench/core/estimators.py]="tests/test_estimators.py tests/test_fit.py tests/test_fit_parts.py"
  [ccbench/measure/session.py]="tests/test_session.py tests/test_measure_contract.py tests/test_slow_fault.py tests/test_launches.py tests/test_session_parts.py tests/test_doctor.py"
  [ccbench/measure/sweep.py]="tests/test_measure_contract.py tests/test_session.py tests/test_slow_fault.py tests/test_sweep_inprocess.py"
  [ccbench/store/results.py]="tests/test_results.py tests/test_launches.py tests/test_run_names.py"
)
MODULES=(
  ccbench/core/stats.py
  ccbench/measure/timing.py
  ccbench/analysis/compare.py
  ccbench/analysis/tune.py
  ccbench/store/run.py
  ccbench/analysis/predict.py
  ccbench/core/replication.py
  ccbench/store/launches.py
  ccbench/algorithms/allreduce.py
  ccbench/algorithms/bcast.py
  ccbench/algorithms/allgather.py
  ccbench/algorithms/reduce_scatter.py
  ccbench/algorithms/reduce.py
  ccbench/algorithms/alltoall.py
  ccbench/algorithms/gather.py
  ccbench/algorithms/scatter.py
  ccbench/algorithms/barrier.py
  ccbench/algorithms/registry.py
  ccbench/analysis/fit.py
  ccbench/core/estimators.py
  ccbench/measure/session.py
  ccbench/measure/sweep.py
  ccbench/store/results.py
)

if [ $# -gt 0 ]; then MODULES=("$@"); fi
command -v mutmut >/dev/null || { echo "mutmut not found: pip install mutmut" >&2; exit 2; }

work=$(mktemp -d -t ccbench-mutation.XXXXXX)
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$work"' EXIT; else echo "scratch copy: $work"; fi

tar -C "$root" --exclude=./.git --exclude=./.venv --exclude=./venv --exclude=./mutants \
    --exclude='*/__pycache__' --exclude='*.egg-info' -cf - . | tar -C "$work" -xf -

summary=()
for module in "${MODULES[@]}"; do
  tests="${TESTS[$module]:-} ${EXTRA_TESTS:-}"
  tests=$(echo $tests)
  if [ -z "$tests" ]; then echo "no test files listed for $module" >&2; exit 2; fi
  cd "$work"
  rm -rf mutants
  # mutmut makes no mutants of decorated functions: every algorithm is registered by one
  if [ -n "${UNDECORATE:-}" ]; then python3 tests/mutation/undecorate.py "$module"; fi
  {
    echo "[mutmut]"
    echo "source_paths = ccbench"
    echo "only_mutate = $module"
    echo "pytest_add_cli_args ="
    echo "    -m"
    echo "    not mpi"
    echo "    -q"
    echo "    -x"
    echo "pytest_add_cli_args_test_selection ="
    for t in $tests; do echo "    $t"; done
    echo "use_git_change_detection = false"
    # fork each mutant's tests from a clean server: the default forks them from the process that
    # ran the clean tests, whose warm lru_caches hide mutants of the functions behind them
    echo "process_isolation = forkserver"
  } > setup.cfg
  echo "=== $module  (tests: $tests)"
  start=$(date +%s)
  # shellcheck disable=SC2086  # the patterns are words on purpose (quoted: the shell leaves their * alone)
  set -f
  mutmut run --max-children "$jobs" ${MUTANTS:-} > "$work/mutmut-run.log" 2>&1 || {
    tail -40 "$work/mutmut-run.log"; echo "mutmut run failed on $module" >&2; exit 1; }
  set +f
  secs=$(( $(date +%s) - start ))
  # the mutants this run checked (with MUTANTS, the others stay "not checked" and are left out)
  mutmut results --all true | grep -v ': not checked$' > "$work/results.txt" || true
  # one "name: status" line per mutant
  total=$(grep -c ': ' "$work/results.txt" || true)
  # a mutant that makes the tests hang (timeout) or crash (segfault) is caught too
  killed=$(grep -c -E ': (killed|timeout|segfault)$' "$work/results.txt" || true)
  score=$(awk -v k="$killed" -v t="$total" 'BEGIN { printf (t ? "%.1f%%" : "n/a"), (t ? 100 * k / t : 0) }')
  line="$module: $killed/$total killed ($score) in ${secs}s"
  echo "$line"
  grep -v -E ': (killed|timeout|segfault)$' "$work/results.txt" | sed 's/^ */    /' || true
  summary+=("$line")
done

echo
echo "=== summary"
printf '%s\n' "${summary[@]}"
