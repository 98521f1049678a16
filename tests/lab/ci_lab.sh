#!/usr/bin/env bash
# CI: the emulated-cluster lab, end to end (namespaces, NFQUEUE, the link emulator, MPI over
# the emulated links, fitted vs injected delay and rate).  Needs root; installs iptables.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
  echo "lab tests skipped: they need root (network namespaces, iptables, NFQUEUE)"
  exit 0
fi
if ! command -v iptables >/dev/null || ! command -v ip >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables iproute2) >/dev/null
fi
CCBENCH_LAB_TESTS=1 python -m pytest -q -s -rs tests/lab
