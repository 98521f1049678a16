#!/usr/bin/env bash
# CI: run every slurm/ script on a real single-node Slurm and check its results.
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge, starts munged, slurmctld
# and slurmd by hand (no systemd here), submits the scripts with a tiny sweep, polls
# squeue until they finish, checks the run directories, signals a long sweep mid-run
# (it must keep its finished rows and say "interrupted"), checks a script with --check
# here and inside a job (it runs nothing), and stops every daemon it started -- also on
# failure. Not root, no apt, or the install fails: it cannot run; in CI
# (CI=true) that fails the build, elsewhere it is a SKIP with the reason, exit 0
# (tests/ci_tier.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

# shellcheck source=tests/ci_tier.sh
source tests/ci_tier.sh
# shellcheck source=tests/slurm/packages.sh
source tests/slurm/packages.sh
tier_init slurm
[[ $(id -u) -eq 0 ]] || skip_or_fail "not root: cannot install and start Slurm daemons"
t0=$SECONDS
slurm_packages
echo "slurm: packages ready ($((SECONDS - t0)) s)"

if [[ -z "${VIRTUAL_ENV:-}" && -f .venv/bin/activate ]]; then
  # shellcheck disable=SC1091
  source .venv/bin/activate
fi
python -c 'import ccbench, mpi4py' 2>/dev/null || { echo "slurm: FAIL: ccbench/mpi4py not importable by $(command -v python)"; exit 1; }
venv=${VIRTUAL_ENV:-}

work=$(mktemp -d /tmp/ccbench-slurm.XXXXXX)
chmod 755 "$work"
results=$work/results
node=$(hostname -s)
export SLURM_CONF=$work/slurm.conf
started_pids=()

stop_daemons() {
  local f pid
  for f in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munge/munged.pid"; do
    [[ -s $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}
on_exit() {
  local rc=$?
  if (( rc != 0 )); then
    echo "slurm: exiting with $rc; logs:"
    for f in "$work"/*.log "$work"/munge/*.log "$work"/out/*; do [[ -f $f ]] && { echo "--- $f"; tail -n 30 "$f"; }; done
  fi
  stop_daemons
  [[ -n "${CCBENCH_SLURM_KEEP:-}" ]] || rm -rf "$work"
}
trap on_exit EXIT

# --- munge -------------------------------------------------------------------------
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 755 /run/munge
if [[ ! -s /etc/munge/munge.key ]]; then
  (command -v mungekey >/dev/null && mungekey --create --keyfile=/etc/munge/munge.key) \
    || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
# its own socket, so a munged already running on this machine is left alone
md=$work/munge
mkdir -p "$md"; chown munge:munge "$md"; chmod 755 "$md"
sock=$md/munge.socket
su -s /bin/sh munge -c "munged --socket=$sock --pid-file=$md/munged.pid --log-file=$md/munged.log"
for _ in $(seq 50); do [[ -S $sock ]] && break; sleep 0.1; done

# --- slurm.conf: one node, no cgroups, no accounting --------------------------------
# Job ids differ from one CI run to the next: MPICH names its shared-memory segments after
# the PMI job id, and a job whose ranks were killed (the crash check) leaves its segment
# behind, on which a later job with the same id would wait forever in MPI_Init.
first_job_id=$(( $(date +%s) % 50000000 + 1000 ))
mkdir -p "$work/state" "$work/spool" "$work/out"
cat > "$SLURM_CONF" <<CONF
ClusterName=ccbenchci
FirstJobId=$first_job_id
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
MinJobAge=600
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
NodeName=$node NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

slurmctld -i -f "$SLURM_CONF"     # -i: ignore any state left from an earlier run
slurmd -f "$SLURM_CONF"

# wait for the node to be idle (resume it if an earlier run left it drained)
state=""
for i in $(seq 100); do
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
  case $state in
    idle*) break ;;
    drain*|down*) scontrol update nodename="$node" state=resume 2>/dev/null || true ;;
  esac
  sleep 0.2
done
[[ $state == idle* ]] || { echo "slurm: FAIL: node $node is '${state:-unknown}', not idle"; exit 1; }
echo "slurm: cluster up, node $node idle ($((SECONDS - t0)) s)"

# --- submit -----------------------------------------------------------------------
export CCBENCH_VENV=$venv CCBENCH_RESULTS=$results
export CCBENCH_EXTRA_ARGS="-C allreduce,bcast -s 8:1K --budget 0.05"
submit() {  # submit NAME [sbatch options...] SCRIPT (a later --time wins over the default 10 min)
  local name=$1; shift
  sbatch --parsable -J "ci-$name" --output="$work/out/$name-%j.out" --time=10 "$@" | cut -d';' -f1
}
declare -A jobs
jobs[sweep]=$(submit sweep --overcommit slurm/sweep.sbatch)
jobs[multinode]=$(submit multinode -N 1 --ntasks-per-node 4 --overcommit slurm/multinode.sbatch)
jobs[scaling]=$(submit scaling -n 4 --overcommit slurm/scaling.sbatch)
jobs[mpinone]=$(CCBENCH_SRUN_MPI=none submit mpinone -n 2 slurm/sweep.sbatch)
jobs[signal]=$(CCBENCH_EXTRA_ARGS="-C allreduce,bcast -s 8:64K --budget 0.5 --min-reps 1000000 --max-reps 1000000" submit signal -n 2 slurm/sweep.sbatch)
# the ccbench guard itself: srun --mpi=none (every task rank 0 of 1) must be refused
jobs[refuse]=$(submit refuse -n 2 --wrap "srun --mpi=none $(command -v python) -m mpi4py -m ccbench run \
  --config configs/quick.toml --results-dir $results --tag job\${SLURM_JOB_ID} $CCBENCH_EXTRA_ARGS")
# a real time limit: SIGTERM from Slurm (--signal, or at the limit) while a long sweep runs.  Slurm
# may send --signal up to 60 s before the time asked for (its event resolution, sbatch(1)), so
# --time=2 with TERM@40 comes 20-80 s into the job: with --time=1 it could come at the start,
# before the first case had finished (0 rows kept, as a loaded machine showed)
jobs[timelimit]=$(CCBENCH_EXTRA_ARGS="-C all -s 8:64K --budget 1 --min-reps 1000000 --max-reps 1000000" \
  submit timelimit -n 2 --overcommit --time=2 --signal=TERM@40 slurm/sweep.sbatch)
# a rank that dies mid-sweep: srun ends the step at once, `ccbench launch` marks the run failed
jobs[crash]=$(CCBENCH_FAULT="exit:1:allreduce/native:64" CCBENCH_EXTRA_ARGS="-C allreduce -s 8:1K --budget 0.05 --order planned" \
  submit crash -n 3 --overcommit slurm/sweep.sbatch)
# --check inside a job: the script checks its environment, prints what it would run and ends
jobs[checkflag]=$(submit checkflag -n 2 slurm/sweep.sbatch --check)
echo "slurm: submitted $(for k in "${!jobs[@]}"; do printf '%s=%s ' "$k" "${jobs[$k]}"; done)"

wait_jobs() {  # wait_jobs TIMEOUT_S ID... (polls squeue; sbatch --wait is slower)
  local limit=$1; shift
  local ids; ids=$(IFS=,; echo "$*")
  local end=$((SECONDS + limit))
  while [[ -n $(squeue -h -j "$ids" -o %i 2>/dev/null) ]]; do
    (( SECONDS < end )) || { echo "slurm: FAIL: jobs $ids still queued after $limit s"; squeue; return 1; }
    sleep 0.5
  done
}

# signal the long sweep once it has finished at least one case
sig_id=${jobs[signal]}
end=$((SECONDS + 240))
while :; do
  f=$(ls "$results"/*_job"$sig_id"/cases.jsonl 2>/dev/null | head -n1 || true)
  [[ -n $f && $(wc -l < "$f") -ge 2 ]] && break
  (( SECONDS < end )) || { echo "slurm: FAIL: job $sig_id wrote no rows"; exit 1; }
  sleep 0.5
done
scancel --signal=TERM "$sig_id"
echo "slurm: sent SIGTERM to job $sig_id after $(wc -l < "$f") rows"

wait_jobs 600 "${jobs[@]}"
echo "slurm: all jobs finished ($((SECONDS - t0)) s)"

# --- check ------------------------------------------------------------------------
passed=0 failed=0
check() {  # check NAME EXPECT_JOB_STATE PYTHON_CHECK_ARGS...
  local name=$1 want=$2; shift 2
  local id=${jobs[$name]} info
  info=$(scontrol show job "$id" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobState|ExitCode)=' | tr '\n' ' ')
  if [[ ! $info =~ JobState=($want)\  ]]; then
    echo "FAIL $name (job $id): $info, want JobState=$want"; failed=$((failed + 1))
    sed 's/^/    /' "$work"/out/"$name"-"$id".out 2>/dev/null | tail -n 20; return
  fi
  if python tests/slurm/check_runs.py "$results" "$id" "$@"; then
    echo "ok   $name (job $id): $info"; passed=$((passed + 1))
  else
    echo "FAIL $name (job $id)"; failed=$((failed + 1))
    sed 's/^/    /' "$work"/out/"$name"-"$id".out 2>/dev/null | tail -n 20
  fi
}
check sweep COMPLETED --runs 1 --nranks 4
check multinode COMPLETED --runs 1 --nranks 4
check scaling COMPLETED --runs 2 --nranks 2,4 --per-p
check mpinone FAILED --runs 0 --log "$work/out/mpinone-${jobs[mpinone]}.out" --expect-log "mpi=none"
check signal FAILED --runs 1 --nranks 2 --interrupted
check refuse FAILED --runs 0 --log "$work/out/refuse-${jobs[refuse]}.out" --expect-log "did not wire up MPI"
check timelimit 'FAILED|TIMEOUT' --runs 1 --nranks 2 --interrupted
check crash FAILED --runs 1 --nranks 3 --failed
check checkflag COMPLETED --runs 0 --log "$work/out/checkflag-${jobs[checkflag]}.out" \
  --expect-log "ccbench launch -n 2 --launcher srun --config configs/quick.toml --results-dir $results --tag job${jobs[checkflag]} $CCBENCH_EXTRA_ARGS -- --mpi=pmi2"
# --check on the submit host, against this Slurm's own srun --mpi=list
if out=$(bash slurm/scaling.sbatch --check 2>&1) && [[ $out == *"check passed"* ]]; then
  echo "ok   bash slurm/scaling.sbatch --check"; passed=$((passed + 1))
else
  echo "FAIL bash slurm/scaling.sbatch --check:"; printf '%s\n' "$out" | sed 's/^/    /'; failed=$((failed + 1))
fi
runtime=$(scontrol show job "${jobs[crash]}" | tr ' ' '\n' | sed -n 's/^RunTime=//p')
if [[ $runtime =~ ^00:00:([0-5][0-9])$ ]]; then
  echo "ok   crash ended promptly (RunTime=$runtime)"; passed=$((passed + 1))
else
  echo "FAIL crash job ran $runtime: the step was not ended when a rank died"; failed=$((failed + 1))
fi
echo "slurm: checks took $((SECONDS - t0)) s"
echo "slurm: $passed passed, $failed failed"
(( failed == 0 ))
