#!/usr/bin/env bash
# Shared by tests/slurm/ci_slurm.sh and tests/lab/ci_lab.sh; sourced after tests/ci_tier.sh, never run.
#
# slurm_packages -- Debian's slurmctld, slurmd, slurm-client and munge: installed with apt unless their
#   programs are all here already.  Cannot (no apt-get, the install fails): skip_or_fail with the reason.

slurm_packages() {
  local cmd out missing=0
  for cmd in slurmctld slurmd sbatch srun squeue sinfo scontrol scancel munged; do
    command -v "$cmd" >/dev/null || missing=1
  done
  (( missing )) || return 0
  command -v apt-get >/dev/null || skip_or_fail "no apt-get: cannot install Slurm"
  export DEBIAN_FRONTEND=noninteractive
  out=$(apt-get update -qq 2>&1) || skip_or_fail "apt-get update failed: ${out##*$'\n'}"
  out=$(apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge 2>&1) \
    || skip_or_fail "apt-get install slurmctld slurmd slurm-client munge failed: ${out##*$'\n'}"
  for cmd in slurmctld slurmd sbatch srun squeue sinfo scontrol scancel munged; do
    command -v "$cmd" >/dev/null || skip_or_fail "$cmd not found after installing the Slurm packages"
  done
}
