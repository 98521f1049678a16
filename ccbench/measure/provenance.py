"""Where and how a run was made: versions, MPI library, ranks and nodes, Slurm, git, hardware.

The ranks' nodes are the MPI library's own: ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``
(the ranks that can share memory with each other) gives each rank its node and its rank
inside the node; `node_map` turns them into the ``topology`` record (each rank's node and
node-local rank, the nodes' ranks and names, the rank order) and the ``nodes`` and
``ranks_per_node`` keys follow from it.  ``hosts`` counts the ranks per hostname, as before;
``topology.hostnames_agree`` says whether hostnames and the library's nodes tell the same
story.  A sweep with ``--placement`` runs on the launch's communicator re-ranked (`placed`); its
topology is the re-ranked one's, and ``topology.placement`` records each rank's rank in the launch.
Ranks are grouped by the kernel they run on (its boot id) to decide whether they
oversubscribe the cores: hosts of the emulated lab are nodes to MPI but share one machine.

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
           "gather_topology", "launch_binding", "machine_id", "node_map", "oversubscribed", "own_cores",
           "placed", "rank_order", "usable_cores"]

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
    shared = (_lab() or {}).get("machine_ranks")  # the emulated lab: every host's ranks share this machine's cores
    where = ""
    if isinstance(shared, int) and shared > (local or 0):
        local, where = shared, " (every lab host's, all on this machine)"
    if local is None:
        return "multiple", "ranks per node unknown before MPI starts: multiple is safe when oversubscribed"
    if local > cores:
        return "multiple", f"{local} ranks{where} on {cores} cores (oversubscribed: single busy-polls)"
    return "single", f"{local} ranks{where} on {cores} cores (no oversubscription)"


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


def machine_id() -> str:
    """Which kernel this process runs on: its boot id (random(4), the same in every namespace), else the hostname."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()


def rank_order(node_of_rank: list[int]) -> str:
    """How ranks are laid on nodes: ``block`` (each node's ranks consecutive; also one node, or one rank per node),
    ``cyclic`` (rank r on node r mod N, N > 1 nodes of more than one rank), else ``irregular``."""
    n = len(node_of_rank)
    if all(a <= b for a, b in zip(node_of_rank, node_of_rank[1:], strict=False)):
        return "block"
    nodes = len(set(node_of_rank))
    if nodes > 1 and all(node_of_rank[r] == r % nodes for r in range(n)):
        return "cyclic"
    return "irregular"


def node_map(leaders: list[int], local_ranks: list[int], hostnames: list[str],
             machines: list[str] | None = None) -> dict:
    """The ``topology`` record (pure) from what every rank reported, in rank order.

    `leaders`: the lowest world rank of each rank's shared-memory communicator (its node);
    `local_ranks`: its rank there; `hostnames`: its processor name; `machines`: its kernel
    (`machine_id`).  Nodes are numbered in the order of their first rank.  Raises ValueError
    when the lists disagree (different lengths, a leader outside its own node, node-local
    ranks that are not 0..k-1 in rank order, as ``MPI_Comm_split_type`` with the world rank as key makes them).
    """
    n = len(leaders)
    if not (len(local_ranks) == len(hostnames) == n) or (machines is not None and len(machines) != n):
        raise ValueError("node map: one leader, node-local rank and hostname per rank")
    index: dict[int, int] = {}
    for r, lead in enumerate(leaders):
        if not 0 <= lead <= r or leaders[lead] != lead:
            raise ValueError(f"node map: rank {r}'s node leader {lead} is not the first rank of its node")
        index.setdefault(lead, len(index))
    node_of_rank = [index[lead] for lead in leaders]
    ranks_of_node: list[list[int]] = [[] for _ in index]
    for r, node in enumerate(node_of_rank):
        if local_ranks[r] != len(ranks_of_node[node]):
            raise ValueError(f"node map: rank {r} has node-local rank {local_ranks[r]}, expected "
                             f"{len(ranks_of_node[node])}")
        ranks_of_node[node].append(r)
    names = []
    for ranks in ranks_of_node:
        mine = list(dict.fromkeys(hostnames[r] for r in ranks))
        names.append(mine[0] if len(mine) == 1 else "+".join(mine))
    by_host = {h: sorted(r for r in range(n) if hostnames[r] == h) for h in dict.fromkeys(hostnames)}
    agree = sorted(by_host.values()) == sorted(ranks_of_node)
    out = {"source": "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", "nodes": len(ranks_of_node),
           "ranks_per_node": [len(r) for r in ranks_of_node], "node_names": names,
           "node_of_rank": node_of_rank, "local_rank": list(local_ranks), "ranks_of_node": ranks_of_node,
           "order": rank_order(node_of_rank), "hostnames_agree": agree}
    if machines is not None:
        ids = {m: i for i, m in enumerate(dict.fromkeys(machines))}
        out["machines"] = len(ids)
        out["machine_of_rank"] = [ids[m] for m in machines]
    return out


def gather_topology(comm, hostnames: list[str]) -> dict:
    """`node_map` of `comm` (collective): each rank's node from the MPI library's shared-memory split."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    try:
        mine = (local.allreduce(rank, op=MPI.MIN), local.Get_rank())
    finally:
        local.Free()
    got = comm.allgather((*mine, machine_id()))
    return node_map([g[0] for g in got], [g[1] for g in got], hostnames, [g[2] for g in got])


def placed(comm, placement) -> tuple[object, dict]:
    """(`comm` re-ranked as `placement` says, the placement record) -- collective.

    `placement` is a config's (`ccbench.core.placement.parse_placement`); None keeps `comm`.  The
    new communicator is ``comm.Split(0, key)`` with each rank's position in the order as its key
    (MPI-4.0 sec. 7.4.2: ranks in the order of their keys); the order comes from `comm`'s own
    node map.  A bad order (not a permutation of this run's ranks) is refused on every rank alike.
    """
    from ccbench.core.placement import placement_order

    P = comm.Get_size()
    if placement is None:
        return comm, {"placement": "launch", "original_rank": list(range(P))}
    from mpi4py import MPI

    launch = gather_topology(comm, comm.allgather(MPI.Get_processor_name()))
    order = placement_order(placement, launch["node_of_rank"])  # the same on every rank, errors included
    kind = "given" if isinstance(placement, tuple) else str(placement).split(":")[0]
    seed = int(str(placement).split(":")[1]) if kind == "random" else None
    new = comm.Split(0, order.index(comm.Get_rank()))
    return new, {"placement": kind, "seed": seed, "original_rank": order, "launch_order": launch["order"]}


def collect(comm, cfg_dict: dict, thread: tuple[str, str], argv: list[str]) -> dict:
    """Provenance of this run (collective: every rank must call it)."""
    import mpi4py
    from mpi4py import MPI

    names = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
             MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    hosts = comm.allgather(MPI.Get_processor_name())
    cores = comm.allgather(usable_cores())
    hw = gather_hardware(comm, hosts)
    topology = gather_topology(comm, hosts)
    per_node: dict[str, int] = {}
    for h in hosts:
        per_node[h] = per_node.get(h, 0) + 1
    node_cores = dict(zip(hosts, cores, strict=True))
    # the cores a rank competes for are its kernel's: lab hosts are nodes to MPI but share one machine
    machines = [str(m) for m in topology["machine_of_rank"]]
    over = oversubscribed(machines, [r["cpus"] for r in hw["ranks"]], dict(zip(machines, cores, strict=True)))
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
        "nodes": topology["nodes"],
        "ranks_per_node": max(topology["ranks_per_node"]),
        "hosts": per_node,
        "topology": topology,
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
