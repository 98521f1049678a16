#!/usr/bin/env bash
# CI: the emulated-cluster lab, end to end (namespaces, NFQUEUE, the link emulator, MPI over
# the emulated links, fitted vs injected delay and rate, Slurm across the lab's hosts).  Needs root;
# installs iptables and Debian's Slurm and munge.
# Not root, no apt to install iptables, or no network namespaces: it cannot run; in CI
# (CI=true) that fails the build, elsewhere it is a SKIP with the reason, exit 0
# (tests/ci_tier.sh).  In CI a lab test that pytest skips fails the build too.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/ci_tier.sh
source tests/ci_tier.sh
# shellcheck source=tests/slurm/packages.sh
source tests/slurm/packages.sh
tier_init lab
[[ $(id -u) -eq 0 ]] || skip_or_fail "not root: the lab needs network namespaces, iptables and NFQUEUE"
if ! command -v iptables >/dev/null || ! command -v ip >/dev/null; then
  command -v apt-get >/dev/null || skip_or_fail "no iptables or ip, and no apt-get to install them"
  export DEBIAN_FRONTEND=noninteractive
  out=$(apt-get update -qq 2>&1) || skip_or_fail "apt-get update failed: ${out##*$'\n'}"
  out=$(apt-get install -y -qq iptables iproute2 2>&1) \
    || skip_or_fail "apt-get install iptables iproute2 failed: ${out##*$'\n'}"
fi
slurm_packages
# the lab fixtures' own reasons to skip, asked before pytest so they are not a silent skip
why=$(python -c '
from ccbench.lab import core, slurm
why = core.preflight() or slurm.preflight()
if not why and (core.load_state() is not None or core.lab_namespaces()):
    why = "a lab is already up on this machine; not touching it"
print(why or "")')
[[ -z $why ]] || skip_or_fail "$why"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
CCBENCH_LAB_TESTS=1 python -m pytest -q -s -rs tests/lab | tee "$log"
if grep -q '^SKIPPED' "$log"; then
  skip_or_fail "pytest skipped lab tests: $(grep -m1 '^SKIPPED' "$log")"
fi
