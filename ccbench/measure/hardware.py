"""Hardware provenance read from /proc and /sys: CPU, NUMA, memory, kernel, cgroup limits, NICs, RDMA devices.

No MPI and no dependency beyond the standard library: ``provenance.collect`` gathers the
per-node and per-rank parts over MPI.  Every reader takes `root`, the directory standing for
``/`` (a fake tree in the tests), and tolerates missing or unreadable files, as containers
have them: what cannot be read is None or left out, never an error.
"""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ccbench.core.hardware import cpu_list, parse_cpu_list
from ccbench.core.units import format_size

__all__ = ["TRANSPORT_VARS", "CpuTimes", "cgroup_limits", "cpu_info", "cpu_times", "kernel_release", "load_record",
           "memory_available", "memory_info", "network_interfaces", "node_hardware", "numa_nodes", "rdma_devices",
           "transport"]

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


# -- the machine's load while a run measured ------------------------------------------------------


#: /proc/stat's clock ticks per second (USER_HZ): 100 on every Linux architecture ccbench runs on (proc(5)).
USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class CpuTimes(NamedTuple):
    """The machine's busy, stolen and total CPU seconds since boot, its CPU count, this process's own CPU seconds
    and a monotonic wall clock, read together (`cpu_times`); `helper`: the CPU seconds of the emulated lab's link
    emulator (part of the run's network there, not other load)."""

    busy: float
    steal: float
    total: float
    cpus: int
    own: float
    wall: float
    helper: float = 0.0


def process_cpu_s(pid: int, root: Path = ROOT) -> float:
    """CPU seconds (user + system) process `pid` has used: /proc/PID/stat's fields 14 and 15 (proc(5)); 0 if gone."""
    text = _read(root / "proc" / str(pid) / "stat")
    try:
        fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / USER_HZ
    except (AttributeError, IndexError, ValueError):
        return 0.0


def _lab_emulator_pid() -> int | None:
    """The pid of the emulated lab's link emulator, from the ``lab`` block ``ccbench lab run`` hands its ranks."""
    import json

    try:
        pid = json.loads(os.environ.get("CCBENCH_LAB") or "{}").get("emulator_pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def cpu_times(root: Path = ROOT) -> CpuTimes | None:
    """The machine's CPU time from /proc/stat's ``cpu`` line (proc(5): user nice system idle iowait irq softirq
    steal ...), in seconds: busy = user + nice + system + irq + softirq, steal apart, total = all eight; with the
    CPU count, this process's CPU seconds, a monotonic wall clock and the lab emulator's CPU seconds (in the lab).
    None where /proc/stat cannot be read."""
    import time

    text = _read(root / "proc" / "stat")
    if text is None:
        return None
    fields, cpus = None, 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = line.split()[1:9]
        elif line.startswith("cpu") and line[3:4].isdigit():
            cpus += 1
    if fields is None or len(fields) < 8:
        return None
    try:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) / USER_HZ for v in fields)
    except ValueError:
        return None
    busy = user + nice + system + irq + softirq
    pid = _lab_emulator_pid()
    return CpuTimes(busy, steal, busy + idle + iowait + steal, max(cpus, 1), time.process_time(), time.monotonic(),
                    process_cpu_s(pid, root) if pid else 0.0)


def load_record(start: CpuTimes | None, end: CpuTimes | None, own_cpu_s: float) -> dict | None:
    """What the machine did while a run measured: fractions of its CPU time (between `start` and `end`, taken on
    one rank) that were busy, spent by this run's ranks on this node (`own_cpu_s`: their CPU seconds over that
    span, summed, with the lab's link emulator's), by anything else (``other``: busy less own, never below 0),
    and stolen by the hypervisor.  None without both readings or without time between them."""
    if start is None or end is None:
        return None
    span = end.total - start.total
    wall = end.wall - start.wall
    if span <= 0 or wall <= 0:
        return None
    busy = (end.busy - start.busy) / span
    own = min(max(own_cpu_s / (wall * end.cpus), 0.0), 1.0)
    return {"wall_s": round(wall, 3), "cpus": end.cpus, "busy_fraction": round(busy, 4),
            "own_fraction": round(own, 4), "other_fraction": round(max(busy - own, 0.0), 4),
            "steal_fraction": round((end.steal - start.steal) / span, 4)}
