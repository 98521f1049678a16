"""Which host, link or rank is out of line in a diagnosis (``ccbench doctor``): the decision, pure.

Each measurement is compared with its peers at the same level -- a host's links with the other
hosts' links, a rank's pairs inside its node with the other ranks' there, a node's own
collective with the other nodes' -- on the log scale, where a slow component multiplies times.

- **Hosts and links from one pair matrix.**  Times of pairs between nodes fit the additive
  model log t(a,b) = m + h(a) + h(b) + e(a,b) (a two-way table, as in Tukey's median polish,
  *Exploratory Data Analysis*, 1977, ch. 11, here symmetric): `split_effects` takes each end's
  effect from its fastest link -- a slow end slows every one of its links, a slow link or a
  noisy pair only one, so one slow peer cannot make a healthy end look slow, even with 3 ends --
  and a link's residual as what its two ends leave unexplained.  A slow host makes all its
  links slow and its residuals zero; a slow link raises its own residual only, so it is named
  as that link, not as either host.  With 2 hosts there is one link and nothing to tell a slow
  host from a slow link: the diagnosis says so.  Between nodes the matrix is measured once per
  node-local rank l; a host is named when most of its l-matrices name it, else the ranks that
  were.  Inside a node the same split names its slow ranks.
- **Out of line** (`out_of_line`): a value is named when it is at least ``MIN_EFFECT`` (1.3x)
  the median of its peers at its level and its modified z-score 0.6745 (x - median) / MAD is at
  least ``Z_CUT`` (3.5; Iglewicz & Hoaglin, *How to Detect and Handle Outliers*, ASQC 1993), the
  MAD of the log times (Hampel 1974; Rousseeuw & Croux, JASA 88, 1993) floored at
  ``SCALE_FLOOR`` (5%) so that peers closer than timer noise do not make a small difference look
  large.  Only slower counts.  Fewer than 3 peers: no decision.
- **Replicated.**  The decision is taken in each launch on its own samples (the launch is the
  unit, as ``compare``'s verdicts); a suspect is named when most launches name it on the same
  evidence (the same test and size), with the median of those launches' effects.  A launch's
  time of a measurement is the lower quartile of its samples: interference (another process on
  the core, a descheduled rank) only ever adds time, so a low quantile is robust to it, while a
  slow component slows every sample (Chen & Revels, "Robust benchmarking in noisy
  environments", 2016, for the minimum; the quartile keeps a margin against a lucky sample).
- **Not under load.**  A launch during which other processes took more than ``MAX_OTHER_LOAD``
  (20%) of the machine's CPU time (run.json's ``load``) takes no part in the decision, as
  ``compare`` withholds its verdicts on such runs: on shared cores the ranks that load lands on
  look slow (a healthy 4-rank diagnosis on 2 busy cores named someone in 4 of 10).  When every
  launch was loaded the decision is withheld (``WITHHELD``), with the reason and the rerun.
  ``--allow-load`` sets another share (1: always decide).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ccbench.analysis.compare import MAX_OTHER_LOAD
from ccbench.core.units import format_size
from ccbench.store.doctor_rows import LINK

__all__ = ["MIN_EFFECT", "SCALE_FLOOR", "SUSPECTS_FOUND", "WITHHELD", "Z_CUT", "Diagnosis", "Suspect", "diagnose",
           "exit_code", "out_of_line", "split_effects"]

MIN_EFFECT = 1.3
Z_CUT = 3.5
SCALE_FLOOR = 0.05
#: The exit code of ``ccbench doctor`` when it names suspects (0: nobody; 1: wrong results; 2: bad input).
SUSPECTS_FOUND = 4
#: Its exit code when every launch measured under load (``MAX_OTHER_LOAD``): no decision either way.
WITHHELD = 5


def out_of_line(values: Mapping, min_effect: float = MIN_EFFECT, z_cut: float = Z_CUT,
                floor: float = SCALE_FLOOR) -> dict:
    """{key: effect} of the `values` (times > 0) out of line above the rest (module docstring); {} below 3 values.

    The median and MAD are those of all the values, the candidate's own included (Iglewicz & Hoaglin's modified
    z-score): judged against the others alone, one noisy peer among 4 was named beside the slow one."""
    keys = [k for k, v in values.items() if v > 0 and math.isfinite(v)]
    if len(keys) < 3:
        return {}
    x = np.log([values[k] for k in keys])
    med = float(np.median(x))
    mad = max(float(np.median(np.abs(x - med))), floor)
    return {k: math.exp(v - med) for k, v in zip(keys, x, strict=True)
            if math.exp(v - med) >= min_effect and 0.6745 * (v - med) / mad >= z_cut}


def split_effects(links: Mapping[tuple, float]) -> tuple[dict, dict]:
    """(each end's time: its fastest link's; each link's time / what its ends explain), as times (the ends') and
    ratios (the links'): the symmetric additive model of the module docstring."""
    y = {k: math.log(v) for k, v in links.items() if v > 0 and math.isfinite(v)}
    ends: dict = {}
    for a, b in y:
        ends.setdefault(a, []).append(y[(a, b)])
        ends.setdefault(b, []).append(y[(a, b)])
    score = {e: min(v) for e, v in ends.items()}
    base = float(np.median(list(score.values()))) if score else 0.0
    return ({e: math.exp(s) for e, s in score.items()},
            {(a, b): math.exp(v - score[a] - score[b] + base) for (a, b), v in y.items()})


@dataclass(frozen=True)
class Suspect:
    """A host, link (host pair) or rank named, with how much slower, where it showed and how to confirm."""

    kind: str                   # host | link | rank
    name: str                   # "h2", "h0 <> h1", "h0:1"
    effect: float               # times its peers' median (the median over the launches that named it)
    launches: int               # how many launches named it (on its most replicated evidence)
    of: int                     # of how many
    evidence: tuple[str, ...]   # which measurements, with their effects
    confirm: str = ""

    def to_dict(self) -> dict:
        """As suspects.json holds it."""
        return {"kind": self.kind, "name": self.name, "effect": round(self.effect, 4), "launches": self.launches,
                "of_launches": self.of, "evidence": list(self.evidence), "confirm": self.confirm}


@dataclass(frozen=True)
class Diagnosis:
    """What a diagnosis found: suspects (slowest first), notes, and the matrices and per-host numbers drawn."""

    suspects: list[Suspect]
    notes: list[str]
    hosts: list[str]
    launches: int
    pair_matrix: dict = field(default_factory=dict)  # size -> (labels "host:l", matrix of median one-way times, NaN)
    per_host: dict = field(default_factory=dict)     # measurement -> {host (one host: rank): median time}
    withheld: str = ""                               # why no decision was taken (every launch under load), else ""

    @property
    def exclude(self) -> list[str]:
        """The hosts named, for a scheduler's exclude option (``sbatch --exclude``)."""
        return [s.name for s in self.suspects if s.kind == "host"]

    def to_dict(self) -> dict:
        """As suspects.json holds it."""
        return {"suspects": [s.to_dict() for s in self.suspects], "exclude": ",".join(self.exclude),
                "hosts": self.hosts, "launches": self.launches, "withheld": self.withheld, "notes": self.notes,
                "rule": {"min_effect": MIN_EFFECT, "z_cut": Z_CUT, "scale_floor": SCALE_FLOOR}}


def _end(label: str) -> tuple[str, str]:
    host, _, local = label.rpartition(":")
    return host, local


def _launch_times(row) -> dict[int, float]:
    """{launch: the lower quartile of its samples} (module docstring)."""
    return {launch: float(np.percentile(s, 25)) for launch, s in row.launch_blocks() if len(s)}


def _flag(found: dict, kind: str, name: str, what: str, effect: float) -> None:
    found.setdefault((kind, name), {})[what] = max(effect, found.get((kind, name), {}).get(what, 0.0))


def _one_launch(rows: Sequence, launch: int, sizes: Sequence[int]) -> dict:
    """{(kind, name): {evidence: effect}} named by one launch's times (`_launch_times`)."""
    found: dict = {}
    at = {(r.test, r.subject, r.nbytes): m[launch] for r in rows for m in (_launch_times(r),) if launch in m}
    for n in sizes:
        size = format_size(n)
        pairs = {tuple(s.split(LINK)): t for (test, s, nb), t in at.items() if test == "pair" and nb == n}
        by_local: dict = {}
        inside: dict = {}
        for (a, b), t in pairs.items():
            (ha, la), (hb, _) = _end(a), _end(b)
            (by_local.setdefault(la, {}) if ha != hb else inside.setdefault(ha, {}))[(a, b)] = t
        # between nodes: one matrix per node-local rank; a host named by most of its matrices, else its ranks
        seen: dict = {}
        named: dict = {}
        for sub in by_local.values():
            score, resid = split_effects(sub)
            for e in score:
                seen[_end(e)[0]] = seen.get(_end(e)[0], 0) + 1
            for e, eff in out_of_line(score).items():
                named.setdefault(("host", _end(e)[0]), []).append((e, eff))
            for (a, b), eff in out_of_line(resid).items():
                named.setdefault(("link", LINK.join(sorted((_end(a)[0], _end(b)[0])))), []).append((a + LINK + b, eff))
        for (kind, name), got in named.items():
            total = seen[name] if kind == "host" else min(seen[h] for h in name.split(LINK))
            what = f"pairs between nodes, {size}"
            if 2 * len(got) > total:
                _flag(found, kind, name, what, float(np.median([e for _, e in got])))
            elif kind == "host":  # named by a minority of its ranks' matrices: those ranks
                for who, eff in got:
                    _flag(found, "rank", who, what, eff)
        # inside each node: its ranks against each other; each node's typical pair against the other nodes'
        typical = {}
        for host, sub in inside.items():  # a pair alone is not judged here: too easily a placement of the moment
            slow = out_of_line(split_effects(sub)[0])
            for e, eff in slow.items():
                _flag(found, "rank", e, f"pairs inside its node, {size}", eff)
            rest = [t for p, t in sub.items() if not slow.keys() & set(p)] or list(sub.values())
            typical[host] = float(np.median(rest))  # its pairs without its slow ranks: the node's own speed
        for host, eff in out_of_line(typical).items():
            _flag(found, "host", host, f"pairs inside each node, {size}", eff)
        alone = {s: t for (test, s, nb), t in at.items() if test == "node" and nb == n}
        for host, eff in out_of_line(alone).items():
            _flag(found, "host", host, f"each node alone, allreduce {size}", eff)
    return found


def _context(rows: Sequence, suspect_kind: str, name: str) -> list[str]:
    """Evidence no decision rests on: the group a host is in, or a rank's own share of the all-ranks allreduce, against
    the others (medians of the pooled samples)."""
    out = []
    for n in sorted({r.nbytes for r in rows}):
        if suspect_kind == "host":
            groups = {r.subject: r.median_s for r in rows if r.test == "group" and r.nbytes == n}
            mine = [g for g in groups if name in [_end(p)[0] if ":" in p else p for p in g.split("+")]]
            others = [t for g, t in groups.items() if g not in mine]
            if len(mine) == 1 and others:
                out.append(f"its group {mine[0]}, allreduce {format_size(n)}: "
                           f"{groups[mine[0]] / float(np.median(others)):.2f}x the other groups")
        elif suspect_kind == "rank":
            shares = {r.subject: r.median_s for r in rows if r.test == "rank" and r.nbytes == n}
            if name in shares and len(shares) > 1 and shares[name] > 0:
                rest = float(np.median([t for s, t in shares.items() if s != name]))
                out.append(f"its own time in the allreduce of all ranks, {format_size(n)}: "
                           f"{shares[name] / rest:.2f}x the others' (less: the others waited for it)")
    return out


def _confirm(kind: str, name: str, meta: Mapping, sizes: str) -> str:
    ranks = meta.get("nranks", "P")
    if kind == "host":
        return f"ccbench doctor --launch {ranks} --exclude {name} (the same tests without it)"
    if kind == "link":
        a, b = name.split(LINK)
        how = (f"srun -w {a},{b} -N 2 -n 2" if meta.get("slurm") else f"mpiexec -hosts {a},{b} -n 2")
        return f"{how} python -m mpi4py -m ccbench run -C pingpong -s {sizes} (a ping-pong of that pair)"
    return f"ccbench doctor --launch {ranks} --launches 3 (a rank that stays slow: its core or its process)"


def diagnose(rows: Sequence, meta: Mapping | None = None) -> Diagnosis:
    """The suspects of a diagnosis run's rows (`meta`: its run.json, for the notes and the commands that confirm)."""
    meta = meta or {}
    sizes = sorted({r.nbytes for r in rows})
    every = sorted({launch for r in rows for launch, _ in r.launch_blocks()})
    loaded = _loaded(meta, every)
    launches = [launch for launch in every if launch not in loaded]
    per_launch = [_one_launch(rows, launch, sizes) for launch in launches]
    hosts = list(dict.fromkeys(_end(e)[0] for r in rows if r.test in ("pair", "rank") for e in r.subject.split(LINK)))
    found = []
    for key in dict.fromkeys(k for f in per_launch for k in f):
        named = [f[key] for f in per_launch if key in f]
        whats = list(dict.fromkeys(w for got in named for w in got))
        seen = {w: [g[w] for g in named if w in g] for w in whats}
        replicated = [w for w in whats if 2 * len(seen[w]) > len(launches)]  # the same finding in most launches
        if not replicated:
            continue
        kind, name = key
        evidence = [f"{w}: {float(np.median(seen[w])):.2f}x its peers' median ({len(seen[w])} of {len(launches)} "
                    "launches)" for w in whats]
        found.append(Suspect(kind, name, max(float(np.median(seen[w])) for w in replicated),
                             max(len(seen[w]) for w in replicated), len(launches),
                             tuple(evidence + _context(rows, kind, name)),
                             _confirm(kind, name, meta, ",".join(str(n) for n in sizes))))
    slow_hosts = {s.name for s in found if s.kind == "host"}
    found = [s for s in found if s.kind != "rank" or _end(s.name)[0] not in slow_hosts]  # a slow host's ranks
    found.sort(key=lambda s: (-s.effect, s.kind, s.name))
    share = max(loaded.values(), default=0.0)
    withheld = (f"other processes used up to {share:.0%} of the machine's CPU time while it measured (more than "
                f"{_allowed(meta):.0%}): the ranks that load ran beside would look slow; rerun on a quiet machine: "
                f"{_rerun(meta)}" if loaded and not launches else "")
    notes = _notes(rows, meta, hosts, len(every))
    if loaded and launches:
        notes.append(f"launch(es) {', '.join(map(str, loaded))} left out of the decision: other processes used up to "
                     f"{share:.0%} of the machine's CPU time while they measured")
    return Diagnosis(found, notes, hosts, len(launches), _matrices(rows, sizes), _per_host(rows, sizes), withheld)


def _rerun(meta: Mapping) -> str:
    """The command that made the run (run.json's ``argv``: the ranks' own), as a user types it: on the lab through
    ``lab run``, under Slurm through ``srun``, else with ``--launch N`` (and ``--oversubscribe``) where the ranks
    were started by ``--launch`` or ``mpiexec``, which their own arguments do not show."""
    import shlex

    args = [str(a) for a in (meta.get("argv") or [])[1:]] or ["doctor"]
    if meta.get("lab"):
        return "ccbench lab run -- " + shlex.join(args)
    if meta.get("slurm"):
        return "srun python -m mpi4py -m ccbench " + shlex.join(args)
    n = meta.get("nranks")
    if isinstance(n, int) and n > 1 and "--launch" not in args:
        args[1:1] = ["--launch", str(n)] + (["--oversubscribe"] if meta.get("oversubscribed") else [])
    return "ccbench " + shlex.join(args)


def _allowed(meta: Mapping) -> float:
    """The share of the CPU other processes may take while a launch measures (``--allow-load``, else
    ``MAX_OTHER_LOAD``)."""
    allow = ((meta.get("config") or {}).get("params") or {}).get("allow_load")
    return float(allow) if isinstance(allow, (int, float)) else MAX_OTHER_LOAD


def _loaded(meta: Mapping, launches: Sequence[int]) -> dict[int, float]:
    """{launch: other processes' share of the machine's CPU time} of the launches measured under load (run.json's
    ``load``: each launch's record, or the run's for all of them; more than ``_allowed``)."""
    load = meta.get("load") or {}
    allowed = _allowed(meta)
    out = {}
    for launch in launches:
        other = ((load.get("launches") or {}).get(str(launch), load) or {}).get("other_fraction")
        if isinstance(other, (int, float)) and other > allowed:
            out[launch] = float(other)
    return out


def _notes(rows: Sequence, meta: Mapping, hosts: list[str], launches: int) -> list[str]:
    notes = []
    if len(hosts) == 2:
        notes.append("2 hosts: one link between them and no other to compare it with, so a slow host and a slow link "
                     "cannot be told apart (3 hosts or more can; or compare with an earlier diagnosis: ccbench "
                     "compare OLD NEW)")
    elif len(hosts) == 1:
        notes.append("one host: its ranks are compared with each other, not hosts or links")
    per_host = {h: len({r.subject for r in rows if r.test == "rank" and _end(r.subject)[0] == h}) for h in hosts}
    if per_host and max(per_host.values()) == 2:
        notes.append("2 ranks per host: the one pair inside a host has no peer there, ranks are judged between hosts"
                     + (" -- and with 2 hosts no rank has peers there either: nobody can be named (3 hosts, or 3 "
                        "ranks per host, can)" if len(hosts) == 2 else ""))
    if launches == 1:
        notes.append("one launch: the decision rests on it alone; --launches 3 makes it launch-level")
    if meta.get("oversubscribed"):
        notes.append("the ranks oversubscribe the cores: pairs were measured a few at a time, the other ranks "
                     "asleep; times still include waiting for a core")
    if any("injected_slow" in r.flags for r in rows):
        notes.append("measured under an injected slowdown (CCBENCH_FAULT)")
    return notes


def _matrices(rows: Sequence, sizes: Sequence[int]) -> dict:
    """size -> (rank labels, symmetric matrix of pair medians, NaN where a pair was not measured)."""
    out = {}
    for n in sizes:
        pairs = {tuple(r.subject.split(LINK)): r.median_s for r in rows if r.test == "pair" and r.nbytes == n}
        labels = sorted({e for p in pairs for e in p}, key=lambda e: (_end(e)[0], int(_end(e)[1] or 0)))
        idx = {e: i for i, e in enumerate(labels)}
        m = np.full((len(labels), len(labels)), np.nan)
        for (a, b), t in pairs.items():
            m[idx[a], idx[b]] = m[idx[b], idx[a]] = t
        out[n] = (labels, m)
    return out


def _per_host(rows: Sequence, sizes: Sequence[int]) -> dict:
    """{measurement: {host: median}} (the smallest and largest size): each host's pairs between nodes and inside its
    node, and its node alone; on one host the same per rank (its pairs, its own time in the all-ranks allreduce)."""
    out: dict = {}
    hosts = {_end(e)[0] for r in rows if r.test == "rank" for e in [r.subject]}
    for n in dict.fromkeys([sizes[0], sizes[-1]] if sizes else []):
        size = format_size(n)
        between: dict = {}
        inside: dict = {}
        for r in rows:
            if r.test == "pair" and r.nbytes == n:
                ends = r.subject.split(LINK)
                (ha, _), (hb, _) = (_end(e) for e in ends)
                for who in (set(ends) if len(hosts) == 1 else {ha, hb}):
                    (between if ha != hb else inside).setdefault(who, []).append(r.median_s)
        own = "its pairs" if len(hosts) == 1 else "pairs inside the node"
        for what, got in ((f"pairs between nodes, {size}", between), (f"{own}, {size}", inside)):
            if got:
                out[what] = {h: float(np.median(v)) for h, v in got.items()}
        alone = {r.subject: r.median_s for r in rows if r.test == ("rank" if len(hosts) == 1 else "node")
                 and r.nbytes == n}
        if alone:
            out[f"{'own time in the allreduce' if len(hosts) == 1 else 'node alone, allreduce'} {size}"] = alone
    return out


def exit_code(run) -> int:
    """``SUSPECTS_FOUND`` when the diagnosis `run` names anyone, ``WITHHELD`` when it decided nothing (every launch
    under load), else 0 (the ``doctor`` kind's ``exit_code``)."""
    d = diagnose(run.rows, run.meta)
    return WITHHELD if d.withheld else SUSPECTS_FOUND if d.suspects else 0
