"""What a stored hardware record says: one line per run, what differs between two runs, CPU lists.

Pure functions of the record that ``ccbench.measure.hardware`` reads from /proc and /sys and
``ccbench.measure.provenance`` stores in run.json (its ``hardware`` block); the views, the
report and the comparison describe a run with them, without the measuring stage.
"""

from collections.abc import Iterable, Mapping

from ccbench.core.units import format_size

__all__ = ["binding_summary", "cpu_list", "differences", "parse_cpu_list", "summary"]


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
