#!/usr/bin/env bash
# Shared by the CI tier scripts (tests/slurm/ci_slurm.sh, tests/openmpi/ci_openmpi.sh,
# tests/lab/ci_lab.sh); sourced, never run.  Usage, first thing in a tier script:
#
#   source tests/ci_tier.sh
#   tier_init slurm                # the tier's name, used in every message
#   [[ $(id -u) -eq 0 ]] || skip_or_fail "not root: cannot start the daemons"
#
# skip_or_fail REASON -- this tier cannot run here.  In CI (the environment variable CI is
#   exactly "true"; .ci/run exports it) that is a failure: one line "<tier>: FAIL: cannot
#   run in CI: REASON" on stderr, exit 1, so a green build means the tier really ran.
#   Anywhere else: "<tier>: SKIP: REASON" on stdout, exit 0.  Call it from the script's top
#   level (not inside $(...) or a subshell, where exit would only leave the subshell).
#
# CCBENCH_TIER_FORCE_SKIP=REASON -- for tests only (tests/test_ci_tiers.py): tier_init takes
#   the cannot-run path at once with that reason, before the tier checks, installs or starts
#   anything.  Never set it in CI.
set -euo pipefail

CCBENCH_TIER_NAME=${CCBENCH_TIER_NAME:-tier}

skip_or_fail() {
  local reason=${1:-no reason given}
  if [[ ${CI:-} == true ]]; then
    echo "$CCBENCH_TIER_NAME: FAIL: cannot run in CI: $reason" >&2
    exit 1
  fi
  echo "$CCBENCH_TIER_NAME: SKIP: $reason"
  exit 0
}

tier_init() {
  CCBENCH_TIER_NAME=$1
  if [[ -n ${CCBENCH_TIER_FORCE_SKIP:-} ]]; then
    skip_or_fail "$CCBENCH_TIER_FORCE_SKIP (forced by CCBENCH_TIER_FORCE_SKIP)"
  fi
}
