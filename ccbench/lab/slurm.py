"""Slurm across the lab: a controller on host 0 and one slurmd per host, each inside its host's namespaces.

``ccbench lab up --slurm`` makes the lab a Slurm cluster (Debian's slurm-wlm and munge, started
by hand, no systemd, no cgroups, no accounting):

- ``munged`` with a key of its own, as the ``munge`` user, in host 0's namespaces; its socket is
  a file (`core.daemon_dir`), which every host reaches (a path socket is not tied to a network
  namespace; unix(7));
- ``slurmctld`` in host 0's namespaces: ``SlurmctldHost=ccb-h0(10.251.77.1)``, so every slurmd
  reaches it over the lab's network and client commands run on host 0 (`client`);
- one ``slurmd -N ccb-hI`` per host, inside host I's network and UTS namespaces: the node is
  named after the host and addressed at its lab address (``NodeAddr``), so srun's, the PMI's
  and the ranks' traffic between nodes crosses the emulated links;
- ``CPUs`` per node = the lab's ranks per host (``SlurmdParameters=config_overrides``: every node
  shares this machine's cores); ``MpiDefault=pmi2``: srun's PMI-2 gives MPICH (the PyPI wheel)
  its node map, one node per slurmd (Debian's PMIx plugins do not load: no libpmix);
- a ``TaskProlog`` prints the environment every task gets (`write_task_env`: the lab's MPI
  transport, its provenance block), so a job on the lab uses the emulated links however it was
  submitted (slurm.conf(5), TaskProlog: ``export NAME=value`` lines);
- ``FirstJobId`` differs from one lab to the next: MPICH names its shared-memory segments after
  the PMI job id, and a killed job's segment would stall a later job with the same id.

Every daemon's pid is recorded in the lab's state as it starts (``state["daemons"]``); ``lab
down`` stops them (`core.stop_daemons`), and after a crash ending the namespaces' processes ends
them.  Needs root and the packages slurmctld, slurmd, slurm-client and munge.
"""

import grp
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from ccbench.core.errors import CCBenchError
from ccbench.lab import core
from ccbench.lab.hostexec import enter

__all__ = ["CONTROLLER", "INSTALL", "MPI", "client", "conf_text", "node_states", "preflight", "up",
           "write_task_env"]

#: The host the controller, munged and the client commands run on.
CONTROLLER = 0
#: srun's PMI plugin for the lab's jobs (what the MPICH wheel speaks; Debian's build lacks a loadable PMIx).
MPI = "pmi2"
INSTALL = "apt-get install slurmctld slurmd slurm-client munge"
_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "squeue", "scontrol")
_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _program(name: str) -> str | None:
    return shutil.which(name, path=_PATH)


def preflight() -> str | None:
    """Why Slurm cannot run on the lab here, or None when it can (the programs, the munge user)."""
    missing = [p for p in _PROGRAMS if not _program(p)]
    if missing:
        return f"Slurm on the lab needs {', '.join(missing)} (Debian: {INSTALL})"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return f"no munge user (Debian's munge package makes it: {INSTALL})"
    return None


def conf_text(state: Mapping, files: Path, first_job_id: int) -> str:
    """slurm.conf(5) of the lab `state`: a node per host (its name, its lab address, the lab's ppn as CPUs)."""
    ppn = int(state.get("ppn") or 1)
    ctl = state["namespaces"][CONTROLLER]
    nodes = [f"NodeName={ns} NodeAddr={addr} CPUs={ppn} State=UNKNOWN"
             for ns, addr in zip(state["namespaces"], state["addresses"], strict=True)]
    return "\n".join([
        "# the ccbench lab as a Slurm cluster: written by `ccbench lab up --slurm`, removed by `ccbench lab down`",
        "ClusterName=ccblab", f"SlurmctldHost={ctl}({state['addresses'][CONTROLLER]})", f"FirstJobId={first_job_id}",
        "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", f"AuthInfo=socket={files}/munge/socket",
        "CredType=cred/munge", f"MpiDefault={MPI}", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/builtin", "ReturnToService=2", "SlurmdParameters=config_overrides",
        "MailProg=/bin/true", "MinJobAge=600", "KillWait=10", f"TaskProlog={files}/task-prolog",
        f"StateSaveLocation={files}/slurmctld", f"SlurmdSpoolDir={files}/slurmd-%n",
        f"SlurmctldPidFile={files}/slurmctld.pid", f"SlurmdPidFile={files}/slurmd-%n.pid",
        f"SlurmctldLogFile={files}/slurmctld.log", f"SlurmdLogFile={files}/slurmd-%n.log",
        *nodes, "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""])


def write_task_env(env: Mapping[str, str]) -> Path:
    """Replace the environment the TaskProlog gives every task of the lab's jobs; one line per variable."""
    lines = []
    for k, v in env.items():
        if not k.isidentifier() or "\n" in str(v):
            raise CCBenchError(f"a task's environment variable must be a name and a one-line value: {k!r}")
        lines.append(f"export {k}={v}\n")
    path = core.daemon_dir() / "task-env"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines))
    os.replace(tmp, path)
    return path


def client(args: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a Slurm client command (sbatch, squeue, ...) on the controller's host with the lab's slurm.conf."""
    env = dict(kw.pop("env", None) or os.environ, SLURM_CONF=str(core.daemon_dir() / "slurm.conf"))
    host = core.host_ns(CONTROLLER)
    return subprocess.run(args, env=env, preexec_fn=lambda: enter(host), **kw)


def node_states() -> dict[str, str]:
    """Each node's state as sinfo(1) gives it (``idle``, ``alloc``, ``down*``, ...); empty when it cannot say."""
    try:
        r = client(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return {}
    if r.returncode != 0:
        return {}
    return dict(line.split()[:2] for line in r.stdout.splitlines() if len(line.split()) >= 2)


def _start(state: dict, name: str, host: str, args: list[str], user: str | None = None) -> dict:
    """Start daemon `name` in the foreground inside `host`'s namespaces (as `user`), record its pid in the state."""
    files = core.daemon_dir()
    ids = (pwd.getpwnam(user).pw_uid, grp.getgrnam(user).gr_gid) if user else None

    def inside():
        enter(host)
        if ids:
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])

    with open(files / f"{name}-{host}.out", "ab") as out:
        proc = subprocess.Popen([_program(name), *args], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                preexec_fn=inside, start_new_session=True)
    record = {"name": name, "pid": proc.pid, "host": host}
    state.setdefault("daemons", []).append(record)
    core.save_state(state)
    return record


def _tail(files: Path, lines: int = 4) -> str:
    out = []
    for f in sorted(files.glob("*.log")) + sorted(files.glob("*.out")) + sorted((files / "munge").glob("*.log")):
        text = f.read_text(errors="replace").strip().splitlines()
        errors = [t for t in text if ("error" in t.lower() or "fatal" in t.lower())
                  and "pmix" not in t.lower()][-lines:]  # Debian's PMIx plugins fail to load in every daemon
        if errors:
            out.append(f"{f.name}: " + " | ".join(errors))
    return "; ".join(out) or "nothing in the daemons' logs"


def _wait(what: str, ready, records: list[dict], files: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        dead = [r for r in records if not core.daemon_alive(r)]
        if dead or time.monotonic() > deadline:
            why = (f"{dead[0]['name']} on {dead[0]['host']} exited" if dead else f"not {what} after {timeout_s:.0f} s")
            raise CCBenchError(f"Slurm on the lab did not start: {why} ({_tail(files)})")
        time.sleep(0.2)


def up(state: dict, task_env: Mapping[str, str], timeout_s: float = 60.0) -> dict:
    """Start munged, slurmctld and one slurmd per host of the lab `state`; wait until every node is idle.

    `task_env` is what every task of the lab's jobs gets (`write_task_env`).  Each daemon's pid is
    saved in the state as it starts, so on a failure (CCBenchError, with the daemons' errors)
    `core.down` stops what did start.  Returns ``state["slurm"]``.
    """
    why = preflight()
    if why:
        raise CCBenchError(why)
    files = core.daemon_dir()
    if state.get("daemons") or files.exists():
        raise CCBenchError(f"this lab already runs daemons ({files}): `ccbench lab down` first")
    munge = files / "munge"
    for d in (munge, files / "slurmctld", *[files / f"slurmd-{ns}" for ns in state["namespaces"]]):
        d.mkdir(parents=True)
    files.chmod(0o755)
    ids = pwd.getpwnam("munge").pw_uid, grp.getgrnam("munge").gr_gid
    os.chown(munge, *ids)
    munge.chmod(0o755)  # munged wants its socket's folder open to all, its key readable by itself alone
    fd = os.open(munge / "key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    try:
        os.write(fd, os.urandom(1024))
    finally:
        os.close(fd)
    os.chown(munge / "key", *ids)
    conf = files / "slurm.conf"
    first_job_id = int(time.time()) % 50_000_000 + 1000
    conf.write_text(conf_text(state, files, first_job_id))
    prolog = files / "task-prolog"
    prolog.write_text(f"#!/bin/sh\n# every task's environment on the ccbench lab (slurm.conf TaskProlog)\n"
                      f"exec cat '{files / 'task-env'}'\n")
    prolog.chmod(0o755)
    write_task_env(task_env)
    ctl = state["namespaces"][CONTROLLER]
    state["slurm"] = {"conf": str(conf), "controller": ctl, "mpi": MPI, "cpus_per_node": int(state.get("ppn") or 1),
                      "nodes": list(state["namespaces"]), "first_job_id": first_job_id}
    state["daemons"] = []
    records = [_start(state, "munged", ctl, ["-F", f"--socket={munge}/socket", f"--key-file={munge}/key",
                                             f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
                                             f"--seed-file={munge}/seed"], user="munge")]
    _wait("listening", (munge / "socket").exists, records, files, timeout_s)
    records.append(_start(state, "slurmctld", ctl, ["-D", "-i", "-f", str(conf)]))
    records += [_start(state, "slurmd", ns, ["-D", "-N", ns, "-f", str(conf)]) for ns in state["namespaces"]]

    def idle() -> bool:
        got = node_states()
        return all(got.get(ns, "").startswith("idle") for ns in state["namespaces"])

    _wait("idle", idle, records, files, timeout_s)
    return state["slurm"]
