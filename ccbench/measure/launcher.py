"""Starting ranks: find the MPI launcher, bind its ranks, prepare its environment, run one job and watch how it ends.

Used by `ccbench launch`, `ccbench workload --launch`, `ccbench lab run` and the verify launches of
`ccbench tune`.  A job's rank 0 writes the path of the run directory it opened to the file named by
``CCBENCH_RUN_RECORD`` (`ccbench.store.results.RunWriter` does), so that when the job ends badly --
a rank crashed, was killed or aborted, and no rank could say so -- the run is marked failed here.

Binding: where a rank may run changes what it measures (a rank that migrates between cores
loses its caches; two ranks on one core take turns), and the launchers differ in what they do
unasked (MPICH's hydra binds nothing, Open MPI binds to core for 2 ranks or fewer and to
package/socket above, srun follows the site's TaskPlugin).  So ccbench always says what it
wants, in each launcher's own syntax (`bind_flags`): hydra ``-bind-to core|socket|none``
(``mpiexec -bind-to -h``), Open MPI ``--bind-to core|socket|none`` (``package`` for socket from
Open MPI 5, whose PRRTE has no socket), srun ``--cpu-bind=cores|sockets|none``.  The default
(``auto``) binds each rank to a core when the ranks fit the cores, and binds nothing when they
oversubscribe them: ranks pinned to a shared core cannot move to one that is idle.  The choice
travels to the ranks in ``CCBENCH_BIND`` and is stored with the CPUs each rank could actually
use (`ccbench.measure.provenance.gather_hardware`).
"""

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.measure.config import BINDINGS
from ccbench.measure.provenance import BIND_ENV, launch_binding, own_cores

__all__ = ["BINDINGS", "Binding", "Job", "bind_flags", "choose_binding", "find_launcher", "launcher_kind",
           "prepare_launcher", "require_launched", "run_job"]

#: Tells the ranks whether a person watches the job's output: "1" a terminal, "0" plain lines (a log).
TERMINAL_ENV = "CCBENCH_TERMINAL"


def find_launcher(explicit: str | None) -> str:
    """The launcher to use: the one named, else mpiexec/mpirun beside this Python, else on PATH."""
    if explicit:
        found = shutil.which(explicit)
        if not found:
            raise UsageError(f"MPI launcher {explicit!r} not found")
        return found
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpirun"):
        cand = here / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name)
        if found:
            return found
    raise CCBenchError("no MPI launcher (mpiexec or mpirun) found; install one with "
                       "pip install 'ccbench[mpich]' or load your site's MPI module")


def launcher_kind(exe: str, version: str) -> str:
    """Which launcher `exe` is, from its name and ``--version`` text: hydra, openmpi, srun or other."""
    if Path(exe).name == "srun" or version.lstrip().lower().startswith("slurm"):
        return "srun"
    if "HYDRA" in version:
        return "hydra"
    if "Open MPI" in version or "OpenRTE" in version:
        return "openmpi"
    return "other"


def _openmpi_major(version: str) -> int | None:
    m = re.search(r"\((?:Open MPI|OpenRTE)\)\s+(\d+)", version)
    return int(m.group(1)) if m else None


_SRUN = {"core": "cores", "socket": "sockets", "none": "none"}  # srun --cpu-bind's names


def bind_flags(kind: str, bind: str, version: str = "", oversubscribed: bool = False) -> list[str]:
    """The launcher options that bind each rank to a core or a socket, or to nothing (`bind` in core, socket, none).

    Open MPI refuses to bind more ranks than there are cores unless told that overload is
    allowed (``core:overload-allowed``); Open MPI 5 calls a socket a package.
    """
    if bind not in ("core", "socket", "none"):
        raise ValueError(f"no binding {bind!r}")
    if kind == "hydra":
        return ["-bind-to", bind]
    if kind == "openmpi":
        target = "package" if bind == "socket" and (_openmpi_major(version) or 0) >= 5 else bind
        return ["--bind-to", target + (":overload-allowed" if oversubscribed and bind != "none" else "")]
    if kind == "srun":
        return [f"--cpu-bind={_SRUN[bind]}"]
    raise ValueError(f"no binding options known for launcher kind {kind!r}")


#: Launcher options that bind ranks themselves (hydra, Open MPI, Slurm, Intel MPI), given after ``--``.
_OWN_BINDING = re.compile(r"^--?(bind-to|cpu[-_]bind|binding)\b")


@dataclass(frozen=True)
class Binding:
    """How the ranks of a launch are bound: what was asked, what was chosen and why, the launcher options that do it."""

    requested: str               # auto | core | socket | none
    chosen: str | None           # core | socket | none; None: left to the launcher
    why: str
    flags: tuple[str, ...]
    launcher: str                # hydra | openmpi | srun | other
    ranks_per_node: int | None = None
    cores: int | None = None     # the launcher's usable cores: what the ranks of a node share

    def to_dict(self) -> dict:
        """As stored in run.json (``hardware.binding``)."""
        return dict(asdict(self), flags=list(self.flags))


def _nodes_of_allocation(env) -> int:
    """Nodes of the Slurm allocation the launcher runs in (1 outside one)."""
    for var in ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"):
        v = env.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return 1


def choose_binding(requested: str, nranks: int, kind: str, version: str = "", *, cores: int | None = None,
                   nodes: int | None = None, launcher_args: Sequence[str] = ()) -> Binding:
    """The binding of `nranks` ranks started by a launcher of `kind` (`launcher_kind`).

    ``auto``: core when the ranks of a node fit its usable cores (`own_cores`; ranks per
    node = ranks over the nodes of the Slurm allocation, 1 node outside one), else none.  A
    binding option among `launcher_args` (what the user passed after ``--``) is left alone;
    asking for another one as well is refused, as is a binding for a launcher whose options
    ccbench does not know.
    """
    if requested not in BINDINGS:
        raise UsageError(f"--bind {requested!r}: choose from {', '.join(BINDINGS)}")
    cores = own_cores() if cores is None else cores
    nodes = _nodes_of_allocation(os.environ) if nodes is None else nodes
    per_node = math.ceil(nranks / max(1, nodes))
    fits = per_node <= cores
    args = list(launcher_args)
    own = [a if "=" in a or i + 1 == len(args) else f"{a} {args[i + 1]}"
           for i, a in enumerate(args) if _OWN_BINDING.match(a)]
    if own:
        if requested != "auto":
            raise UsageError(f"--bind {requested} and the launcher option {own[0].split()[0]} both bind the ranks: "
                             "give one")
        return Binding(requested, None, f"left to the launcher options given: {' '.join(own)}", (), kind,
                       per_node, cores)
    where = f"{per_node} ranks on {cores} cores" + ("" if nodes == 1 else f" per node, {nodes} nodes")
    if requested == "auto":
        chosen, why = ("core", where) if fits else ("none", f"{where}: oversubscribed, so no rank is pinned "
                                                             "to a core it shares")
    else:
        chosen, why = requested, "requested" + ("" if fits or requested == "none" else f"; {where}: ranks share cores")
    if kind == "other":
        if requested != "auto":
            raise UsageError(f"--bind {requested}: ccbench knows the binding options of MPICH's hydra, Open MPI's "
                             "mpirun and srun, not this launcher's; pass its own after --, or leave --bind out")
        return Binding(requested, None, "a launcher whose binding options ccbench does not know: left to it", (),
                       kind, per_node, cores)
    return Binding(requested, chosen, why, tuple(bind_flags(kind, chosen, version, oversubscribed=not fits)), kind,
                   per_node, cores)


#: What MPI launchers put in each rank's environment (MPICH's hydra and Intel MPI, Open MPI, PMIx, Slurm's srun,
#: MVAPICH, Cray PALS and ALPS); CCBENCH_LAUNCHED=1 vouches for a launcher that sets none of them.
LAUNCHER_VARS = ("PMI_RANK", "PMI_FD", "PMI_PORT", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "SLURM_PROCID",
                 "MV2_COMM_WORLD_RANK", "PALS_RANKID", "ALPS_APP_PE", "CCBENCH_LAUNCHED")


def require_launcher(how: str, env=None) -> None:
    """Refuse, before MPI starts and anything is written, a measuring command that no launcher started.

    Run alone, MPI starts a singleton: one rank that measures nothing worth keeping.  `how`
    says how to start it instead.
    """
    env = os.environ if env is None else env
    if not any(env.get(v) for v in LAUNCHER_VARS):
        raise UsageError(f"no MPI launcher started this: {how} (under your own launcher: mpiexec -n N python -m "
                         "mpi4py -m ccbench ...; a launcher that sets none of PMI_RANK, OMPI_COMM_WORLD_SIZE, "
                         "PMIX_RANK, SLURM_PROCID: set CCBENCH_LAUNCHED=1)")


#: Launcher options that place ranks on other hosts: with one of them ccbench cannot count the cores the ranks get.
_HOST_OPTION = re.compile(r"^--?(f|hostfile|machinefile|hosts?|host-?list|ppn|npernode|map-by|rankfile|H)(=|$)")


def rank_count(requested: int | None, *, stored: int | None = None, oversubscribe: bool = False,
               launcher_args: Sequence[str] = (), env=None, cores: int | None = None,
               option: str = "-n") -> tuple[int, str]:
    """(ranks to start, how that number was chosen) for a job ccbench starts.

    No number asked: a resumed run's own (`stored`), else one rank per usable core of this
    node (its CPU affinity and cgroup quota, `own_cores`), or every task of the Slurm
    allocation it runs in.  More ranks on one node than its usable cores measure the
    scheduler, not the network (each rank waits for a time slice; identical runs differ by
    up to 28x here), so that needs `oversubscribe`; a Slurm allocation of several nodes,
    or launcher options that place the ranks on hosts, are left to the user, as is a job
    inside a Slurm allocation (its tasks are what the scheduler granted).
    """
    env = os.environ if env is None else env
    cores = own_cores() if cores is None else cores
    nodes = _nodes_of_allocation(env)
    if requested is None:
        tasks = env.get("SLURM_NTASKS", "")
        if stored is not None:
            n, why = stored, "the run's own rank count"
        elif tasks.isdigit() and int(tasks) > 0:
            n, why = int(tasks), "the Slurm allocation's tasks"
        else:
            n, why = cores, f"one rank per usable core here ({cores})"
    else:
        n, why = requested, option
        if stored is not None and stored != requested:
            raise UsageError(f"the run has {stored} ranks, {option} asks for {requested}: give {option} {stored} "
                             "to resume it")
    elsewhere = nodes > 1 or bool(env.get("SLURM_JOB_ID")) or any(_HOST_OPTION.match(a) for a in launcher_args)
    if n > cores and not elsewhere and not oversubscribe:
        raise UsageError(f"{n} ranks on the {cores} usable cores of this node would measure the scheduler, not the "
                         f"network: use {option} {cores} or fewer" + (" (or leave -n out)" if option == "-n" else "")
                         + ", or add --oversubscribe to measure that anyway")
    return n, why


def require_launched(bind: str, how: str) -> None:
    """Refuse a binding other than auto in a job ccbench did not start: the launcher binds, before ccbench runs.

    `how` says how to start the run so that ccbench starts the launcher.
    """
    if bind != "auto" and launch_binding() is None:
        raise UsageError(f"bind = {bind} is applied by the launcher, so ccbench must start it: {how} "
                         "(under your own launcher give it its binding option and leave bind out)")


def prepare_launcher(launcher: str | None, nranks: int | None = None, bind: str = "auto",
                     launcher_args: Sequence[str] = ()) -> tuple[str, str, dict, list[str]]:
    """(executable, its --version text, environment, extra flags) for starting ranks.

    Open MPI's mpirun refuses root without two variables and more ranks than cores
    without --oversubscribe; both are given (the choice is the user's machine's, not a
    benchmark parameter).  The ranks are told whether stdout is a terminal (``CCBENCH_TERMINAL``
    1: progress bar and colours; 0: plain lines).
    With `nranks`, the extra flags bind the ranks (`choose_binding` of `bind`; `launcher_args`
    are the user's own launcher options) and the environment tells the ranks how (``CCBENCH_BIND``).
    """
    exe = find_launcher(launcher)
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    env = dict(os.environ)
    # say whether a person is watching, 1 or 0, never leave it to the ranks: Open MPI gives them a
    # pseudo-terminal even when the job writes to a file (`ccbench.commands.common.new_console`)
    if env.get(TERMINAL_ENV) not in ("0", "1"):  # a value the user set on purpose stands
        env[TERMINAL_ENV] = "1" if sys.stdout.isatty() else "0"
    if env[TERMINAL_ENV] == "1" and sys.stdout.isatty():
        env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    extra: list[str] = []
    if "Open MPI" in version or "OpenRTE" in version:
        if os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        extra.append("--oversubscribe")
    env.pop(BIND_ENV, None)
    if nranks is not None:
        binding = choose_binding(bind, nranks, launcher_kind(exe, version), version, launcher_args=launcher_args)
        extra += binding.flags
        env[BIND_ENV] = json.dumps(binding.to_dict())
    return exe, version, env, extra


@dataclass(frozen=True)
class Job:
    """How a job ended: its exit code, the run directory it wrote (if any), and whether it was marked failed."""

    code: int
    run_dir: Path | None
    marked_failed: bool
    why: str  # "exit code N" or "killed by signal NAME"
    signal: int | None = None  # the first stop signal (SIGTERM, SIGINT) this process got during the job


#: The signals `run_job` passes on to the launcher, each as SIGTERM: a batch system's stop (SIGTERM), the user's
#: Ctrl-C (SIGINT) and a closed terminal (SIGHUP).  The launchers pass SIGTERM on to the ranks, which stop between
#: items and keep what they measured; hydra answers SIGINT itself instead ("Ctrl-C caught... cleaning up
#: processes"), killing the ranks before they can close their run, which then ended `failed`.
FORWARDED = {signal.SIGTERM: signal.SIGTERM, signal.SIGINT: signal.SIGTERM, signal.SIGHUP: signal.SIGTERM}

RECORD_PREFIX = "ccbench-run-"


def _die_with(parent: int):
    """For Popen's preexec_fn: the launcher gets SIGTERM when `parent` (this ccbench) dies, even by SIGKILL, so that
    no job outlives the command that started it (Linux's PR_SET_PDEATHSIG; elsewhere nothing is done)."""

    def arm() -> None:
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # the parent died before the request took hold
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def _remove_stale_records(folder: str | None = None) -> None:
    """Remove run records (``RECORD_PREFIX``PID-...) left by a ccbench that was killed before it could."""
    from ccbench.measure.session import process_gone

    for p in Path(folder or tempfile.gettempdir()).glob(f"{RECORD_PREFIX}*-*"):
        pid = p.name[len(RECORD_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and process_gone(int(pid)):
            with contextlib.suppress(OSError):
                p.unlink()


def run_job(cmd: list[str], env: dict, *, stdout=None) -> Job:
    """Run one launcher command, passing on SIGTERM/SIGINT/SIGHUP to it (``FORWARDED``: a batch system signals us,
    not the ranks); the job records the first such signal, whatever exit code the launcher then uses (hydra's is
    15, not 143).  Should this process die anyway (SIGKILL), the launcher is sent SIGTERM (`_die_with`).

    A run the job left ``running`` after a non-zero exit is marked ``failed`` with the
    reason (`ccbench.store.run.mark_failed`); a run its ranks closed themselves (complete,
    interrupted, failed by the watchdog) is left as it is.
    """
    from ccbench.store.run import mark_failed

    _remove_stale_records()
    fd, record = tempfile.mkstemp(prefix=f"{RECORD_PREFIX}{os.getpid()}-")
    os.close(fd)
    # its own process group: a terminal's Ctrl-C reaches this process alone, which passes it on once (FORWARDED);
    # in the terminal's group the launcher and every rank got it too, and hydra killed the ranks mid-case.  No
    # stdin: a background group that reads the terminal is stopped (SIGTTIN), and the ranks read nothing
    proc = subprocess.Popen(cmd, env=dict(env, CCBENCH_RUN_RECORD=record), stdout=stdout, process_group=0,
                            stdin=subprocess.DEVNULL,
                            preexec_fn=_die_with(os.getpid()))  # noqa: PLW1509 -- this process runs no threads here

    received: list[int] = []

    def forward(signum, frame):  # noqa: ARG001
        received.append(signum)
        proc.send_signal(FORWARDED[signum])

    old = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        code = proc.wait()
        text = Path(record).read_text().strip()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        os.unlink(record)
    run_dir = Path(text) if text else None
    why = (f"killed by signal {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
           else f"exit code {code}")
    marked = bool(code and run_dir is not None and mark_failed(
        run_dir, f"the job ended before the run did ({why}): a rank crashed, was killed or aborted"))
    return Job(code, run_dir, marked, why, received[0] if received else None)
