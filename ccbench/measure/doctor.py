"""Measure a diagnosis (``ccbench doctor``): every rank pair, each node alone, groups of nodes, all ranks.

The plan of the ``doctor`` run kind (``ccbench.store.kinds``, ``ccbench.measure.kind_run``).  Each
rank's node is the MPI library's own (``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``, the
``topology`` record of run.json: ``ccbench.measure.provenance.gather_topology``).  Items:

- one per round of ``ccbench.core.pairs.pair_rounds`` and size: the round's disjoint pairs
  ping-pong at once (the lower rank sends first); a pair's sample is half the round trip of
  its slower end.  Between nodes one rank per node, inside nodes every pair;
- each node alone: an allreduce (bitwise OR of bytes) inside every node at once;
- groups: the ranks split into ``--groups`` equal groups of consecutive nodes, each group's
  allreduce at once (a slow node slows its own group);
- all ranks: the allreduce over every rank, and each rank's own time in it (its share: a
  rank the others wait for spends the least time inside the call, a slow one the most).

Every sample is taken by the one timing loop (``ccbench.measure.timing.measure``) on the
communicator of the ranks taking part, at least ``MIN_SAMPLES`` of them within the budget; its
per-rank times make the rows.  Ranks on hosts
given to ``--exclude`` take no part.  ``CCBENCH_FAULT=slow:RANK:doctor:DELAY`` slows every
exchange of a rank, ``slow:RANK:doctor/PEER:DELAY`` its exchanges with one rank (tests).
"""

import numpy as np

from ccbench.core.errors import UsageError
from ccbench.core.pairs import pair_rounds, rank_groups
from ccbench.core.units import parse_sizes
from ccbench.measure.driver import common_stop
from ccbench.measure.session import SLOWED, read_fault
from ccbench.store.doctor_rows import LINK, DoctorRow

__all__ = ["DEFAULT_SIZES", "MIN_SAMPLES", "check", "plan"]

#: Latency and bandwidth: the smallest size's pair time is the latency, the largest's gives the bandwidth.
DEFAULT_SIZES = "8,1M"
_TAG = 29
#: Fewest samples of a visit (``--min-reps`` raised to it; the budget still caps them): the decision takes a
#: launch's lower quartile, and of 10 samples that is one phase of the scheduler on shared cores (a healthy 4-host
#: lab named a link in 2 of 10 diagnoses with one visit of 10 samples; the kind visits every item 3 times).
MIN_SAMPLES = 50
_NAP_S = 2e-4  # how long a rank with nothing to measure sleeps between two looks (oversubscribed cores)


def check(params: dict) -> dict:
    """The options as stored: sizes in bytes, the group count (0: automatic), the excluded hosts, the load allowed
    (when given); bad values refused."""
    try:
        sizes = parse_sizes(params.get("sizes") or DEFAULT_SIZES)
    except UsageError as exc:
        raise UsageError(f"--sizes: {exc}") from None
    if not sizes or min(sizes) < 1:
        raise UsageError("--sizes: every size must be at least 1 byte")
    groups = params.get("groups") or 0
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 0:
        raise UsageError(f"--groups: expected a number of groups >= 1, got {groups!r}")
    exclude = params.get("exclude") or ""
    hosts = [h.strip() for h in exclude.split(",")] if exclude else []
    if any(not h or " " in h for h in hosts):
        raise UsageError(f"--exclude: expected host names separated by commas, got {exclude!r}")
    allow = params.get("allow_load")
    if allow is not None and (isinstance(allow, bool) or not isinstance(allow, (int, float)) or not 0 <= allow <= 1):
        raise UsageError(f"--allow-load: expected a share of the CPU from 0 to 1, got {allow!r}")
    return {"sizes": ",".join(str(n) for n in sorted(set(sizes))), "groups": groups, "exclude": ",".join(hosts),
            **({"allow_load": float(allow)} if allow is not None else {})}


def _node_names(topo: dict) -> list[str]:
    """The nodes' names, made unique (two nodes with one hostname get #2, #3 ...)."""
    seen: dict[str, int] = {}
    out = []
    for name in topo["node_names"]:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def plan(ctx) -> list:
    """The items of a diagnosis (module docstring); bad input (an excluded host not in the run, a group count that
    does not divide the ranks, a fault aimed at a rank the job lacks) refused before anything is written."""
    from mpi4py import MPI

    from ccbench.measure.provenance import gather_topology, usable_cores

    comm, params = ctx.comm, ctx.params
    rank, size = comm.Get_rank(), comm.Get_size()
    topo = gather_topology(comm, comm.allgather(MPI.Get_processor_name()))
    names = _node_names(topo)
    node_of, local = topo["node_of_rank"], topo["local_rank"]
    machines = topo["machine_of_rank"]
    # ranks that oversubscribe their machine's cores: pairs measured a few at a time (as many as leave every active
    # rank a core), the others asleep meanwhile; else concurrent pairs would measure the scheduler
    polite = comm.allreduce(machines.count(machines[rank]) > usable_cores(), MPI.LOR)
    most = max(1, comm.allreduce(usable_cores(), MPI.MIN) // 2) if polite else size
    excluded = [h for h in params["exclude"].split(",") if h]
    unknown = [h for h in excluded if h not in names]
    if unknown:
        raise UsageError(f"--exclude {','.join(unknown)}: not a host of this run (its hosts: {', '.join(names)})")
    active = [r for r in range(size) if names[node_of[r]] not in excluded]
    if len(active) < 2:
        raise UsageError(f"--exclude leaves {len(active)} rank(s): a diagnosis needs at least 2")
    fault = read_fault(size)
    if fault is not None and fault.kind == "slow" and "/" in fault.item and int(fault.item.split("/")[1]) >= size:
        raise UsageError(f"CCBENCH_FAULT={fault.spec!r}: rank {fault.item.split('/')[1]} does not exist with "
                         f"{size} ranks")
    kept_nodes = sorted({node_of[r] for r in active})
    act_node = [kept_nodes.index(node_of[r]) for r in active]
    groups = params["groups"] or (2 if len(active) >= 4 and len(active) % 2 == 0 else 1)
    group_ranks = [[active[i] for i in g] for g in rank_groups(act_node, groups)]
    label = [f"{names[node_of[r]]}:{local[r]}" for r in range(size)]
    mine = rank in active
    my_group = next((i for i, g in enumerate(group_ranks) if rank in g), MPI.UNDEFINED)
    comms = {test: None if c == MPI.COMM_NULL else c for test, c in (
        ("all", comm.Split(0 if mine else MPI.UNDEFINED, rank)),
        ("node", comm.Split(node_of[rank] if mine else MPI.UNDEFINED, rank)),
        ("group", comm.Split(my_group, rank)))}
    node_members = [[r for r in active if node_of[r] == n] for n in kept_nodes]
    sets = {"node": [(names[kept_nodes[i]], m) for i, m in enumerate(node_members) if len(m) > 1],
            "group": [(_group_name(g, names, node_of, local), g) for g in group_ranks if 1 < len(g) < len(active)],
            "all": [("all", active)]}
    sizes = [int(x) for x in params["sizes"].split(",")]
    items = []
    for i, rnd in enumerate(pair_rounds(act_node), 1):
        where = "between nodes" if rnd.between else "inside nodes"
        whole = [(active[a], active[b]) for a, b in rnd.pairs.tolist()]
        for j in range(0, len(whole), most):
            pairs = whole[j:j + most]
            part = f" part {j // most + 1}" if len(whole) > most else ""
            for n in sizes:
                first = ("pair", label[pairs[0][0]] + LINK + label[pairs[0][1]], n)
                items.append(ctx.item(first, f"pairs {where}, round {i}{part}, {n} B",
                                      lambda p=pairs, n=n: _pair_visit(ctx, comms["all"], p, n, fault, polite),
                                      lambda v, p=pairs, n=n: _pair_rows(ctx, v, p, n, label)))
    for test, members in sets.items():
        if not members:
            continue
        for n in sizes:
            items.append(ctx.item((test, members[0][0], n), f"{test} allreduce, {n} B",
                                  lambda t=test, n=n: _coll_visit(ctx, comms[t], n, fault, polite),
                                  lambda v, t=test, m=members, n=n: _coll_rows(ctx, v, t, m, n, label)))
    return items


def _group_name(ranks: list[int], names: list[str], node_of: list[int], local: list[int]) -> str:
    """A group by its hosts ("a+b"), a host only partly in it with its node-local ranks ("a:0,1")."""
    parts = []
    for node in dict.fromkeys(node_of[r] for r in ranks):
        inside = [local[r] for r in ranks if node_of[r] == node]
        whole = sum(1 for n in node_of if n == node) == len(inside)
        parts.append(names[node] if whole else f"{names[node]}:{','.join(map(str, inside))}")
    return "+".join(parts)


def _delayed(call, fault):
    """`call` made late by a slow fault: a fixed delay slept before it (its messages leave late), a share of its
    duration slept after it.  Sleeping, not spinning, leaves the core to the others, as a slow network would on
    ranks that oversubscribe their cores."""
    import time

    if fault.fraction:
        def late():
            t0 = time.perf_counter()
            call()
            time.sleep(fault.fraction * (time.perf_counter() - t0))
    else:
        def late():
            time.sleep(fault.delay_s)
            call()
    return late


def _timed(ctx, sub, call, fault, slow: bool):
    """(this rank's own times, the stop reason) of `call` timed on the communicator `sub` (`slow`: `_delayed`)."""
    import dataclasses

    from ccbench.measure.timing import measure

    own: list = []
    s = ctx.settings
    settings = dataclasses.replace(s, min_reps=max(s.min_reps, min(MIN_SAMPLES, s.max_reps)))
    _, stop = measure(sub, _delayed(call, fault) if slow else call, settings, local_out=own)
    return own[0], stop


def _pair_visit(ctx, act, pairs: list, nbytes: int, fault, polite: bool) -> list:
    """Every rank's (own times, stop, wrong bytes, slowed) for one round of concurrent ping-pongs (None: not taking
    part), each pair timed on its own communicator; the same list on every rank."""
    from mpi4py import MPI

    comm, rank = ctx.comm, ctx.comm.Get_rank()
    out = None
    if act is not None:
        which = next((i for i, p in enumerate(pairs) if rank in p), MPI.UNDEFINED)
        sub = act.Split(which, rank)
        if sub != MPI.COMM_NULL:
            peer = sum(pairs[which]) - rank
            other, first = 1 - sub.Get_rank(), rank < peer
            buf = np.zeros(nbytes, dtype=np.uint8)

            there, back = (sub.Send, sub.Recv) if first else (sub.Recv, sub.Send)

            def call():  # the lower rank sends first, the upper answers
                there(buf, other, _TAG)
                back(buf, other, _TAG)

            slow = fault is not None and fault.slows_exchange(rank, peer)
            own, stop = _timed(ctx, sub, call, fault, slow)
            pattern = (min(rank, peer) + 1) % 251  # one checked exchange: the lower rank's pattern there and back
            buf[:] = pattern if first else 0
            call()
            out = (own, stop, int(np.count_nonzero(buf != pattern)), slow)
            sub.Free()
    return _gather(comm, out, polite)


def _gather(comm, out, polite: bool) -> list:
    """Every rank's `out`; `polite`: the ranks that arrive first sleep until the last one has (MPI would spin, and
    take the core from a rank still measuring where ranks oversubscribe the cores)."""
    if polite:
        import time

        req = comm.Ibarrier()
        while not req.Test():
            time.sleep(_NAP_S)
    return comm.allgather(out)


def _pair_rows(ctx, visits: list, pairs: list, nbytes: int, label: list[str]) -> list:
    """One row per pair of the round: half the round trip of its slower end, every visit's samples."""
    rows = []
    for a, b in pairs:
        samples = np.concatenate([np.maximum(v[a][0], v[b][0]) / 2 for v in visits])
        rows.append(_row(ctx, "pair", label[a] + LINK + label[b], nbytes, [a, b], samples,
                         [v[a][1] for v in visits], sum(v[a][2] + v[b][2] for v in visits),
                         any(v[a][3] or v[b][3] for v in visits)))
    return rows


def _coll_visit(ctx, sub, nbytes: int, fault, polite: bool) -> list:
    """Every rank's (own times, stop, wrong bytes, slowed) of an allreduce on its communicator `sub` (None: in none)."""
    comm, rank = ctx.comm, ctx.comm.Get_rank()
    out = None
    if sub is not None and sub.Get_size() > 1:
        from mpi4py import MPI

        send = np.full(nbytes, 1 << (sub.Get_rank() % 8), dtype=np.uint8)
        recv = np.zeros(nbytes, dtype=np.uint8)

        def call():
            sub.Allreduce([send, MPI.BYTE], [recv, MPI.BYTE], op=MPI.BOR)

        slow = fault is not None and fault.slows_exchange(rank, None)
        own, stop = _timed(ctx, sub, call, fault, slow)
        recv[:] = 0
        call()
        expected = np.bitwise_or.reduce([1 << (i % 8) for i in range(sub.Get_size())])
        out = (own, stop, int(np.count_nonzero(recv != expected)), slow)
    return _gather(comm, out, polite)


def _coll_rows(ctx, visits: list, test: str, members: list, nbytes: int, label: list[str]) -> list:
    """One row per node or group (each sample the maximum over its ranks); for all ranks also one row per rank
    (its own times)."""
    rows = []
    for name, ranks in members:
        samples = np.concatenate([np.max([v[r][0] for r in ranks], axis=0) for v in visits])
        rows.append(_row(ctx, test, name, nbytes, ranks, samples, [v[ranks[0]][1] for v in visits],
                         sum(v[r][2] for v in visits for r in ranks), any(v[r][3] for v in visits for r in ranks)))
        if test == "all":
            rows += [_row(ctx, "rank", label[r], nbytes, [r], np.concatenate([v[r][0] for v in visits]),
                          [v[r][1] for v in visits], sum(v[r][2] for v in visits), any(v[r][3] for v in visits))
                     for r in ranks]
    return rows


def _row(ctx, test: str, subject: str, nbytes: int, ranks: list[int], samples, stops: list[str], wrong: int,
         slow: bool) -> DoctorRow:
    stats = ctx.stats(samples)
    stats["flags"] = stats["flags"] + ((SLOWED,) if slow else ())
    return DoctorRow(test=test, subject=subject, nbytes=nbytes, ranks=",".join(map(str, ranks)), nranks=len(ranks),
                     nwrong=wrong, stop_reason=common_stop(stops), **stats)
