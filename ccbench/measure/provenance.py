"""Where and how a run was made: versions, MPI library, ranks and nodes, Slurm, git, hardware.

Also the launcher facts readable before MPI starts (this rank, ranks on this node), which
decide the thread level -- it must be chosen before MPI is initialised -- and the binding
the process that started the launcher chose (``CCBENCH_BIND``, `ccbench.measure.launcher`).
"""

import json
import os
import platform
import socket
import subprocess
import time
from pathlib import Path

import numpy as np

from ccbench.core.hardware import cpu_list, parse_cpu_list
from ccbench.core.version import __version__
from ccbench.measure import hardware

__all__ = ["BIND_ENV", "choose_thread_level", "collect", "env_rank", "env_local_ranks", "gather_hardware",
           "launch_binding", "oversubscribed", "own_cores", "usable_cores"]

#: The variable through which `ccbench.measure.launcher.prepare_launcher` tells the ranks how it bound them.
BIND_ENV = "CCBENCH_BIND"

# rank and node-local size as set by hydra (MPICH), Open MPI, Slurm and PMI(x)
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_NUM_TASKS_PER_NODE")
# settings of the MPI library worth recording: they change what is measured
_MPI_ENV_PREFIXES = ("MPIR_CVAR_", "MPICH_", "OMPI_MCA_", "UCX_", "FI_", "I_MPI_", "HYDRA_")


def env_rank() -> int | None:
    """This process's rank as the launcher announced it, or None outside a launcher."""
    for var in _RANK_VARS:
        v = os.environ.get(var, "")
        if v.isdigit():
            return int(v)
    return None


def env_local_ranks() -> int | None:
    """Ranks on this node as the launcher announced them, or None when unknown."""
    for var in _LOCAL_SIZE_VARS:
        v = os.environ.get(var, "").split("(")[0].split(",")[0]
        if v.isdigit():
            return int(v)
    return None


def own_cores() -> int:
    """Cores this process may run on (its affinity)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def usable_cores() -> int:
    """Cores the ranks of this job may run on: the launcher's when ccbench started it, else this process's.

    A rank the launcher bound to a core sees that one core only; the launcher's count (``cores``
    of `launch_binding`, which ccbench's launcher records) is what the ranks share.
    """
    cores = (launch_binding() or {}).get("cores")
    return cores if isinstance(cores, int) and cores > 0 else own_cores()


def choose_thread_level(requested: str) -> tuple[str, str]:
    """(thread level, why) -- `auto` picks by whether ranks oversubscribe the cores.

    MPICH busy-polls: with more ranks than cores, MPI_THREAD_SINGLE makes every rank
    spin for its time slice and a small allreduce at 4 ranks on 2 cores takes ~8 ms;
    MPI_THREAD_MULTIPLE yields inside the progress loop and brings it to ~30 us.  When
    ranks fit the cores, single is the honest choice: multiple adds ~2 us of locking to
    every small message (2 ranks, 8 B allreduce: 0.44 us single vs 2.4 us multiple).
    """
    if requested != "auto":
        return requested, "requested"
    local, cores = env_local_ranks(), usable_cores()
    if local is None:
        return "multiple", "ranks per node unknown before MPI starts: multiple is safe when oversubscribed"
    if local > cores:
        return "multiple", f"{local} ranks on {cores} cores (oversubscribed: single busy-polls)"
    return "single", f"{local} ranks on {cores} cores (no oversubscription)"


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def _lab() -> dict | None:
    """The emulated lab's injected delay and rate, set by `ccbench lab run` (None outside a lab)."""
    raw = os.environ.get("CCBENCH_LAB")
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"error": f"unreadable CCBENCH_LAB: {raw[:80]!r}"}


def launch_binding() -> dict | None:
    """The binding the launcher was given by ccbench (``Binding.to_dict``); None when ccbench did not start it."""
    raw = os.environ.get(BIND_ENV)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"error": f"unreadable {BIND_ENV}: {raw[:80]!r}"}


def _node_hardware() -> dict:
    """This node's hardware; an unexpected failure is recorded, never raised (the other ranks wait in a gather)."""
    try:
        return hardware.node_hardware()
    except Exception as exc:  # provenance must not end a run, nor leave ranks waiting in a collective
        return {"error": f"{type(exc).__name__}: {exc}"}


def _affinity() -> str | None:
    try:
        return cpu_list(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def gather_hardware(comm, hosts: list[str]) -> dict:
    """The ``hardware`` record (collective): each node's hardware read by its first rank, each rank's host and the
    CPUs it may run on (``os.sched_getaffinity``: what the launcher's binding made of it), and the binding asked of
    the launcher (`launch_binding`; None when ccbench did not start it)."""
    rank = comm.Get_rank()
    mine = _node_hardware() if hosts.index(hosts[rank]) == rank else None
    nodes = {hosts[r]: hw for r, hw in enumerate(comm.allgather(mine)) if hw is not None}
    affinity = comm.allgather(_affinity())
    return {"nodes": nodes,
            "ranks": [{"rank": r, "host": h, "cpus": a} for r, (h, a) in enumerate(zip(hosts, affinity, strict=True))],
            "transport": hardware.transport(), "binding": launch_binding()}


def oversubscribed(hosts: list[str], cpus: list[str | None], node_cores: dict[str, int]) -> bool:
    """True when the ranks of some node share CPUs: more ranks there than CPUs in the union of their affinities.

    `cpus` is each rank's CPU list (``hardware.cpu_list``; None where unknown: then the node's
    usable core count `node_cores` is the measure).  Exact for bound and unbound ranks alike:
    ranks pinned one per core share none, ranks bound to the same core share it.
    """
    per_node: dict[str, list] = {}
    for h, c in zip(hosts, cpus, strict=True):
        per_node.setdefault(h, []).append(c)
    for h, lists in per_node.items():
        if any(c is None for c in lists):
            if len(lists) > node_cores[h]:
                return True
        elif len(lists) > len({x for c in lists for x in parse_cpu_list(c)}):
            return True
    return False


def collect(comm, cfg_dict: dict, thread: tuple[str, str], argv: list[str]) -> dict:
    """Provenance of this run (collective: every rank must call it)."""
    import mpi4py
    from mpi4py import MPI

    names = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
             MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    hosts = comm.allgather(MPI.Get_processor_name())
    cores = comm.allgather(usable_cores())
    hw = gather_hardware(comm, hosts)
    per_node: dict[str, int] = {}
    for h in hosts:
        per_node[h] = per_node.get(h, 0) + 1
    node_cores = dict(zip(hosts, cores, strict=True))
    over = oversubscribed(hosts, [r["cpus"] for r in hw["ranks"]], node_cores)
    lib = MPI.Get_library_version().strip()
    vendor, vversion = MPI.get_vendor()
    return {
        "ccbench": __version__,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "mpi4py": mpi4py.__version__,
        "mpi_library": lib.splitlines()[0] if lib else "",
        "mpi_library_full": lib,
        "mpi_vendor": f"{vendor} {'.'.join(map(str, vversion))}",
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "thread_level_requested": thread[0],
        "thread_level_reason": thread[1],
        "thread_level": names.get(MPI.Query_thread(), str(MPI.Query_thread())),
        "nranks": comm.Get_size(),
        "nodes": len(per_node),
        "ranks_per_node": max(per_node.values()),
        "hosts": per_node,
        "cores_per_node": node_cores,
        "oversubscribed": over,
        "launcher_host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "slurm": {k: v for k, v in sorted(os.environ.items()) if k.startswith("SLURM_")},
        "mpi_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(_MPI_ENV_PREFIXES)},
        "argv": argv,
        "config": cfg_dict,
        "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **({"lab": _lab()} if _lab() else {}),
        "hardware": hw,
    }
