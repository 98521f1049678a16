"""Hardware provenance read from /proc and /sys: CPU, NUMA, memory, kernel, cgroup limits, NICs, RDMA devices.

No MPI and no dependency beyond the standard library: ``provenance.collect`` gathers the
per-node and per-rank parts over MPI.  Every reader takes `root`, the directory standing for
``/`` (a fake tree in the tests), and tolerates missing or unreadable files, as containers
have them: what cannot be read is None or left out, never an error.
"""

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ccbench.core.units import format_size

__all__ = ["TRANSPORT_VARS", "binding_summary", "cgroup_limits", "cpu_info", "cpu_list", "differences",
           "kernel_release",
           "memory_available", "memory_info", "network_interfaces", "node_hardware", "numa_nodes", "parse_cpu_list",
           "rdma_devices", "summary", "transport"]

ROOT = Path("/")
#: cgroup v1 writes "no limit" as a page-rounded 2**63 - 1; anything this large is no limit
NO_LIMIT = 1 << 60
#: environment variables that choose the MPI library's network transport
TRANSPORT_VARS = ("UCX_TLS", "UCX_NET_DEVICES", "FI_PROVIDER", "OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_mtl",
                  "OMPI_MCA_osc", "MPIR_CVAR_CH4_NETMOD", "MPIR_CVAR_CH4_OFI_PROVIDER", "I_MPI_FABRICS",
                  "I_MPI_OFI_PROVIDER")


# -- small readers ------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _key_values(text: str | None) -> dict[str, str]:
    """``key: value`` lines (``/proc/meminfo``, a ``/proc/cpuinfo`` block) as a dict, first key wins."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in out:
            out[key.strip()] = value.strip()
    return out


def _kib(value: str | None) -> int | None:
    """Bytes of a meminfo value such as ``16303452 kB``."""
    n = _int((value or "").split()[0]) if value and value.split() else None
    return n * 1024 if n is not None and value.endswith("kB") else n


def parse_cpu_list(text: str | None) -> list[int]:
    """The CPUs of a kernel CPU list such as ``0-3,8,10-11`` (empty for None or garbage)."""
    cpus: list[int] = []
    for part in (text or "").strip().split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpu_list(cpus: Iterable[int]) -> str:
    """A compact CPU list, the kernel's way: ``0-3,8``."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


# -- the node -----------------------------------------------------------------------------


def cpu_info(root: Path = ROOT) -> dict:
    """CPU model, sockets, physical cores and hardware threads of the node (None where unknown)."""
    root = Path(root)
    blocks = [_key_values(b) for b in (_read(root / "proc/cpuinfo") or "").split("\n\n") if b.strip()]
    procs = [b for b in blocks if "processor" in b]
    model = next((b[k] for b in procs + blocks for k in ("model name", "cpu model", "Model", "cpu") if b.get(k)),
                 None)
    online = parse_cpu_list(_read(root / "sys/devices/system/cpu/online"))
    ids = [int(b["processor"]) for b in procs if b["processor"].isdigit()]
    cpus = online or ids
    topo = []
    for c in cpus:
        d = root / f"sys/devices/system/cpu/cpu{c}/topology"
        topo.append((_int(_read(d / "physical_package_id")), _int(_read(d / "core_id"))))
    if not cpus or any(p is None or k is None for p, k in topo):
        topo = [(_int(b.get("physical id")), _int(b.get("core id"))) for b in procs]
    known = bool(topo) and all(p is not None and k is not None for p, k in topo)
    return {
        "model": model,
        "sockets": len({p for p, _ in topo}) if known else None,
        "cores": len(set(topo)) if known else None,
        "threads": len(cpus) or None,
        "online": cpu_list(cpus) if cpus else None,
    }


def numa_nodes(root: Path = ROOT) -> list[dict]:
    """The NUMA nodes: number, CPU list and memory (an empty list where /sys does not say)."""
    base = Path(root) / "sys/devices/system/node"
    try:
        dirs = [d for d in base.iterdir() if d.name.startswith("node") and d.name[4:].isdigit()]
    except OSError:
        return []
    out = []
    for d in sorted(dirs, key=lambda d: int(d.name[4:])):
        mem = {k.split()[-1]: v for k, v in _key_values(_read(d / "meminfo")).items()}
        out.append({"node": int(d.name[4:]), "cpus": _read(d / "cpulist"), "memory_bytes": _kib(mem.get("MemTotal"))})
    return out


def memory_info(root: Path = ROOT) -> dict:
    """Total and available memory, huge pages and the transparent huge page mode."""
    root = Path(root)
    mem = _key_values(_read(root / "proc/meminfo"))
    thp = _read(root / "sys/kernel/mm/transparent_hugepage/enabled")
    if thp and "[" in thp:
        thp = thp.split("[", 1)[1].split("]", 1)[0]
    return {
        "total_bytes": _kib(mem.get("MemTotal")),
        "available_bytes": _kib(mem.get("MemAvailable")),
        "hugepages": {"total": _int(mem.get("HugePages_Total")), "free": _int(mem.get("HugePages_Free")),
                      "size_bytes": _kib(mem.get("Hugepagesize"))},
        "transparent_hugepages": thp,
    }


def kernel_release(root: Path = ROOT) -> str | None:
    """The running kernel's release (``uname -r``)."""
    return _read(Path(root) / "proc/sys/kernel/osrelease")


# -- cgroups ------------------------------------------------------------------------------


def _own_cgroups(root: Path) -> dict[str, str]:
    """{controller: path} of this process from /proc/self/cgroup; "" is the v2 (unified) hierarchy."""
    out: dict[str, str] = {}
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for name in parts[1].split(",") if parts[1] else [""]:
            out[name] = parts[2]
    return out


def _chain(mount: Path, path: str) -> list[Path]:
    """The cgroup directories from this process's own up to the mount's root (only the root in a namespace)."""
    own = mount / path.lstrip("/")
    if not path or not own.is_dir():
        return [mount]
    chain = [own]
    while chain[-1] != mount and mount in chain[-1].parents:
        chain.append(chain[-1].parent)
    return chain


def _working_set(usage: int | None, stat_text: str | None, key: str) -> int | None:
    """Usage less the inactive file cache the kernel reclaims first (as container runtimes count it)."""
    if usage is None:
        return None
    stat = dict(ln.split(None, 1) for ln in (stat_text or "").splitlines() if len(ln.split()) == 2)
    inactive = _int(stat.get(key))
    return max(0, usage - inactive) if inactive is not None and inactive <= usage else usage


def cgroup_limits(root: Path = ROOT) -> dict:
    """This process's cgroup (v2 or v1): CPU quota in cores and memory limit and usage, the tightest level's.

    A Slurm job's limit sits on the job's cgroup above the task's own, so every level up to
    the root is read. Nothing found: version None and every value None.
    """
    root = Path(root)
    base = root / "sys/fs/cgroup"
    own = _own_cgroups(root)
    out: dict = {"version": None, "path": None, "cpu_quota": None, "memory_limit_bytes": None,
                 "memory_usage_bytes": None}
    levels: list[tuple[int | None, int | None, float | None]] = []  # memory limit, usage; CPU quota
    if (base / "cgroup.controllers").is_file():
        out.update(version=2, path=own.get("", "/"))
        for d in _chain(base, own.get("", "")):
            cpu = (_read(d / "cpu.max") or "max").split()
            quota = int(cpu[0]) / int(cpu[1]) if len(cpu) == 2 and cpu[0].isdigit() and cpu[1].isdigit() \
                and int(cpu[1]) else None
            limit = _int(_read(d / "memory.max"))
            levels.append((limit, _working_set(_int(_read(d / "memory.current")), _read(d / "memory.stat"),
                                               "inactive_file"), quota))
    elif (base / "memory").is_dir() or any(k for k in own):
        out.update(version=1, path=own.get("memory"))
        mem = base / "memory"
        for d in _chain(mem, own.get("memory", "")):
            limit = _int(_read(d / "memory.limit_in_bytes"))
            limit = limit if limit is not None and limit < NO_LIMIT else None
            levels.append((limit, _working_set(_int(_read(d / "memory.usage_in_bytes")), _read(d / "memory.stat"),
                                               "total_inactive_file"), None))
        cpu_mount = next((m for m in (base / "cpu,cpuacct", base / "cpu") if m.is_dir()), base / "cpu")
        for d in _chain(cpu_mount, own.get("cpu", "")):
            q, p = _int(_read(d / "cpu.cfs_quota_us")), _int(_read(d / "cpu.cfs_period_us"))
            levels.append((None, None, q / p if q is not None and q > 0 and p else None))
    else:
        return out
    limited = [(lim, use) for lim, use, _ in levels if lim is not None]
    if limited:
        lim, use = min(limited, key=lambda lu: lu[0] - (lu[1] or 0))
        out.update(memory_limit_bytes=lim, memory_usage_bytes=use)
    quotas = [q for *_, q in levels if q is not None]
    out["cpu_quota"] = min(quotas) if quotas else None
    return out


def memory_available(root: Path = ROOT) -> tuple[int | None, str]:
    """(bytes this node may still allocate, where the figure comes from): min(MemAvailable, cgroup headroom)."""
    avail = memory_info(root)["available_bytes"]
    cg = cgroup_limits(root)
    limit, usage = cg["memory_limit_bytes"], cg["memory_usage_bytes"]
    if limit is not None:
        headroom = max(0, limit - (usage or 0))
        if avail is None or headroom < avail:
            return headroom, f"the cgroup memory limit ({format_size(limit)}, {format_size(usage or 0)} in use)"
    return avail, "MemAvailable"


# -- the network --------------------------------------------------------------------------


def _link_name(path: Path) -> str | None:
    return os.path.basename(os.path.realpath(path)) if os.path.lexists(path) else None


def network_interfaces(root: Path = ROOT) -> list[dict]:
    """The network interfaces but loopback: name, speed (Mb/s), driver, MTU, state, virtual (no device)."""
    base = Path(root) / "sys/class/net"
    try:
        dirs = sorted(d for d in base.iterdir() if d.name != "lo")
    except OSError:
        return []
    out = []
    for d in dirs:
        speed = _int(_read(d / "speed"))
        out.append({"name": d.name, "speed_mbps": speed if speed is not None and speed > 0 else None,
                    "driver": _link_name(d / "device" / "driver"), "mtu": _int(_read(d / "mtu")),
                    "state": _read(d / "operstate"), "virtual": not os.path.lexists(d / "device")})
    return out


def rdma_devices(root: Path = ROOT) -> list[dict]:
    """The RDMA devices (InfiniBand, RoCE, iWARP): name, type, firmware, network interfaces, ports."""
    base = Path(root) / "sys/class/infiniband"
    try:
        dirs = sorted(base.iterdir())
    except OSError:
        return []
    out = []
    for d in dirs:
        ports = []
        try:
            port_dirs = sorted((p for p in (d / "ports").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        except OSError:
            port_dirs = []
        for p in port_dirs:
            ports.append({"port": int(p.name), "rate": _read(p / "rate"), "link_layer": _read(p / "link_layer"),
                          "state": _read(p / "state")})
        try:
            netdevs = sorted(n.name for n in (d / "device" / "net").iterdir())
        except OSError:
            netdevs = []
        out.append({"device": d.name, "hca_type": _read(d / "hca_type"), "fw_ver": _read(d / "fw_ver"),
                    "netdevs": netdevs, "ports": ports})
    return out


def transport(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The MPI transport settings the environment makes (UCX_TLS, FI_PROVIDER, OMPI_MCA_pml, ...)."""
    env = os.environ if env is None else env
    return {k: env[k] for k in TRANSPORT_VARS if k in env}


def node_hardware(root: Path = ROOT) -> dict:
    """Everything this module reads about one node."""
    return {"cpu": cpu_info(root), "numa": numa_nodes(root), "memory": memory_info(root),
            "kernel": kernel_release(root), "cgroup": cgroup_limits(root), "net": network_interfaces(root),
            "rdma": rdma_devices(root)}


# -- one line, and what differs -----------------------------------------------------------


def _first_node(hw: Mapping) -> Mapping:
    nodes = hw.get("nodes") or {}
    ranks = hw.get("ranks") or []
    host = ranks[0].get("host") if ranks and isinstance(ranks[0], Mapping) else None
    return nodes.get(host) or next(iter(nodes.values()), None) or {}


def _nics(node: Mapping) -> list[str]:
    nets = node.get("net") or []
    shown = [n for n in nets if not n.get("virtual")] or nets
    out = []
    for n in shown:
        extra = ", ".join(x for x in (f"{n['speed_mbps'] / 1000:g} Gb/s" if n.get("speed_mbps") else "",
                                      n.get("driver") or "") if x)
        out.append(f"{n.get('name')}" + (f" ({extra})" if extra else ""))
    for r in node.get("rdma") or []:
        port = next(iter(r.get("ports") or []), {})
        extra = ", ".join(x for x in (port.get("rate") or "", port.get("link_layer") or "") if x)
        out.append(f"{r.get('device')}" + (f" ({extra})" if extra else ""))
    return out


def _node_line(node: Mapping) -> str:
    cpu, mem, cg = node.get("cpu") or {}, node.get("memory") or {}, node.get("cgroup") or {}
    parts = [cpu.get("model") or "CPU ?"]
    if cpu.get("cores") or cpu.get("threads"):
        sockets = f"{cpu['sockets']} socket(s), " if cpu.get("sockets") else ""
        parts.append(f"{sockets}{cpu.get('cores') or '?'} cores / {cpu.get('threads') or '?'} threads")
    if cg.get("cpu_quota"):
        parts.append(f"cgroup quota {cg['cpu_quota']:g} CPUs")
    parts.append(f"{len(node.get('numa') or [])} NUMA node(s)" if node.get("numa") else "NUMA ?")
    memory = format_size(mem["total_bytes"]) if mem.get("total_bytes") else "?"
    if cg.get("memory_limit_bytes"):
        memory += f" (cgroup limit {format_size(cg['memory_limit_bytes'])})"
    parts.append(f"memory {memory}")
    parts.append("NICs " + (", ".join(_nics(node)) or "none"))
    return " | ".join(parts)


#: Up to this many ranks the binding summary lists every rank's CPUs.
LIST_RANKS = 8


def _affinity(ranks: list) -> str:
    """The CPUs the ranks could run on, compactly: every rank's up to LIST_RANKS ranks, else how they share them."""
    sets = [(r.get("host"), r.get("cpus")) for r in ranks if isinstance(r, Mapping)]
    if not sets or any(c is None for _, c in sets):
        return "rank CPUs unknown"
    hosts = list(dict.fromkeys(h for h, _ in sets))
    if len({c for _, c in sets}) == 1 and len(hosts) == 1:
        out = f"all {len(sets)} ranks on CPUs {sets[0][1]}"
    elif len(sets) <= LIST_RANKS:
        out = "rank CPUs " + ", ".join(c if len(hosts) == 1 else f"{h}:{c}" for h, c in sets)
    else:
        counts = sorted({len(parse_cpu_list(c)) for _, c in sets})
        distinct = len(set(sets)) == len(sets)
        each = f"{counts[0]} CPU(s) each" if len(counts) == 1 else f"{counts[0]}-{counts[-1]} CPUs each"
        out = f"{len(sets)} ranks, {each}, " + ("none shared" if distinct else f"{len(set(sets))} distinct sets")
    return out


def binding_summary(hw: Mapping | None) -> str | None:
    """How the ranks were bound and the CPUs each could run on (None for a run made before binding was recorded).

    ``bound to core (auto: 2 ranks on 2 cores), rank CPUs 0, 1``; a binding to core whose ranks
    can run on more CPUs than one core has is marked ``(not applied?)``.
    """
    if not hw or "binding" not in hw:
        return None
    b = hw.get("binding")
    node = (_first_node(hw).get("cpu") or {}) if hw.get("nodes") else {}
    per_core = node["threads"] // node["cores"] if node.get("threads") and node.get("cores") else 1
    ranks = hw.get("ranks") or []
    if not isinstance(b, Mapping):
        head = "binding not set by ccbench (its own launcher)"
    elif b.get("error"):
        head = f"binding {b['error']}"
    elif b.get("chosen") is None:
        head = f"binding {b.get('why')}"
    else:
        req, why = b.get("requested"), b.get("why") or ""
        why = f"auto: {why}" if req == "auto" else f"bind {req}" + why.removeprefix("requested")
        head = (f"bound to {b['chosen']}" if b["chosen"] != "none" else "unbound") + f" ({why})"
        sizes = [len(parse_cpu_list(r.get("cpus"))) for r in ranks if isinstance(r, Mapping) and r.get("cpus")]
        if b["chosen"] == "core" and sizes and max(sizes) > per_core:
            head += " (not applied?)"
    return f"{head}, {_affinity(ranks)}"


def summary(hw: Mapping | None) -> str | None:
    """One line: CPU model, cores, NUMA nodes, memory and NICs of the first node, and how the ranks were bound
    (`binding_summary`, where recorded); None without a record."""
    if not hw or not hw.get("nodes"):
        return None
    line = _node_line(_first_node(hw))
    kinds = {_node_line(n) for n in (hw.get("nodes") or {}).values()}
    bound = binding_summary(hw)
    return (line + (f" | nodes differ ({len(kinds)} kinds)" if len(kinds) > 1 else "")
            + (f" | {bound}" if bound else ""))


def _bound(hw: Mapping) -> str:
    """The binding of a run's ranks in a word or two (`differences`)."""
    b = hw.get("binding")
    if not isinstance(b, Mapping):
        return "not set by ccbench"
    return b.get("chosen") or "left to the launcher"


def differences(a: Mapping | None, b: Mapping | None) -> list[tuple[str, object, object]]:
    """(what, in a, in b) where the CPU model, core count or NICs of two runs' first nodes, or the binding of their
    ranks, differ.

    Only when both runs recorded their hardware (and their binding): a run made before the record says nothing.
    """
    if not (a and a.get("nodes") and b and b.get("nodes")):
        return []
    na, nb = _first_node(a), _first_node(b)
    out = []
    for label, get in (("CPU model", lambda n: (n.get("cpu") or {}).get("model")),
                       ("core count", lambda n: (n.get("cpu") or {}).get("cores")),
                       ("NICs", lambda n: ", ".join(_nics(n)) or "none")):
        va, vb = get(na), get(nb)
        if va != vb:
            out.append((label, va, vb))
    if "binding" in a and "binding" in b and _bound(a) != _bound(b):
        out.append(("rank binding", _bound(a), _bound(b)))
    return out
