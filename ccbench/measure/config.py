"""Sweep configuration: TOML files plus command-line flags, validated, turned into cases.

Pure: no MPI.  Sizes are bytes and accept human units everywhere: ``8``, ``4K``,
``1M``, ``2G`` (binary multiples, as MPI benchmarks use), as a list (``8,64,4K``) or as a
range swept by a factor of two (``8:1M``; ``8:1M:4`` for another factor).
"""

import dataclasses
import difflib
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ccbench.core.choices import BINDINGS, BUFFERS, LOOPS, ORDERS, SYNC_METHODS, THREAD_LEVELS
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import check_ranks, parse_counts, symmetric
from ccbench.core.dtypes import DTYPES, OPS, half_available, require
from ccbench.core.errors import UsageError
from ccbench.core.placement import node_aware, parse_placement
from ccbench.core.replication import MAX_LAUNCHES
from ccbench.core.units import format_size, parse_sizes

__all__ = ["BINDINGS", "Case", "Config", "LOOPS", "MAX_LAUNCHES", "ORDERS", "THREAD_LEVELS", "SYNC_METHODS",
           "all_algorithms", "config_description", "copy_shipped", "load_config", "plan", "read_toml",
           "resolve_config_path", "shipped_configs", "shipped_dir"]

MAX_ROUNDS = 100
#: what ``all`` names among the collectives: every one but the v-collectives, which are named on their own
EVEN = tuple(c for c, x in COLLECTIVES.items() if not x.uneven)
WORKLOAD_PREFIX = "workload-"  # shipped workload configs are named workload-<kind>.toml


@dataclass(frozen=True)
class Config:
    """A validated sweep configuration; a field left out of a file or the flags keeps this default."""

    collectives: tuple[str, ...] = EVEN
    algorithms: tuple[str, ...] = ("native",)  # or ("all",)
    sizes: tuple[int, ...] = tuple(parse_sizes("8:1M"))
    dtypes: tuple[str, ...] = ("float32",)
    ops: tuple[str, ...] = ("sum",)
    in_place: str = "no"  # no | yes | both
    root: str = "0"       # an integer, or "rotate" (every root in turn)
    warmup: int = 5
    min_reps: int = 20
    max_reps: int = 1000
    target_rse: float = 0.05
    budget_s: float = 1.0
    sync: str = "barrier"
    thread_level: str = "auto"
    watchdog_s: float = 300.0  # a case may run this long past its budget before the job is ended
    results_dir: str = "results"
    # replication: launches of the whole plan (the launch is the unit of replication), the
    # order of the cases within each launch, and the seed of that order (None: drawn per run)
    launches: int = 1
    # rounds within each launch: every case is visited this many times, each visit in a freshly
    # shuffled order taking 1/rounds of its samples and budget (``per_round``)
    rounds: int = 1
    order: str = "shuffled"
    seed: int | None = None
    bind: str = "auto"  # how the launcher binds the ranks (ccbench launch applies it)
    # OSU/IMB-comparable timing: "per-call" (one synchronised call per sample), "batched:K"
    # (K back-to-back calls per sample, the time / K); a fixed sample count (OSU's -i) or None
    timing: str = "per-call"
    iterations: int | None = None
    # LOOPS: what times the native cases (hand-written ones are always Python).  auto: the compiled loop where it
    # builds, unless the run times hand-written algorithms too (then every case in Python, so they compare alike)
    loop: str = "auto"
    buffers: str = "warm"  # BUFFERS: warm, or cold (every call on buffers not in cache: IMB's -off_cache)
    counts: str = "uniform"  # the count distribution of the v-collectives' blocks (`ccbench.core.counts`)
    # re-rank the communicator before the sweep (`ccbench.core.placement`): None (the launch's order), block,
    # cyclic, random, random:SEED (a drawn seed is stored here), or a permutation of the ranks
    placement: str | tuple[int, ...] | None = None
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict:
        """The resolved configuration, as stored in run.json."""
        d = dataclasses.asdict(self)
        d.pop("extra")
        return d

    def per_launch(self) -> "Config":
        """The configuration one of `launches` launches runs: the time budget and the sample cap split between them.

        Each launch gets budget_s / K and ceil(max_reps / K) samples (never fewer than
        min_reps; a fixed ``iterations`` count is split the same way), so K launches cost about
        what one did: the same number of samples,
        spread over K independent launches.  Why: the variance of a K-launch mean is
        sigma_b^2 / K + sigma_w^2 / (K n) (Cochran, Sampling Techniques, 1977, sec. 10.2); when
        launches differ more than calls (sigma_b^2 of 15-75% against a few percent of
        sigma_w^2 / n here), more launches with fewer samples each is the better use of a
        fixed time (Kalibera & Jones, ISMM 2013; ``ccbench.core.replication.optimal_split``).
        """
        return split_launches(self)

    def per_round(self) -> "Config":
        """What one visit of a case runs when a launch visits every case `rounds` times.

        Each visit gets budget_s / R, ceil(min_reps / R) and ceil(max_reps / R) samples (a
        fixed ``iterations`` count split the same way) and its own warm-up, so R rounds cost
        about what one did.  Why: the time of a call drifts within a launch on scales of tens
        of milliseconds (measured here: the log ratio of two algorithms' medians, each over 20
        consecutive calls, varied by an SD of 0.06-0.27 from one visit to the next within one
        launch, while its mean over 12 visits varied by 0.02-0.04 between launches), so one
        block of consecutive samples per case is one draw of that drift, whatever its length.
        Visiting the cases in several randomly ordered rounds averages it out: randomized
        multiple interleaved trials (Abedi & Brecht, "Conducting repeatable experiments in
        highly variable cloud computing environments", ICPE 2017).
        """
        return split_rounds(self)


def _ceil_div(n: int | None, k: int) -> int | None:
    return None if n is None else -(-n // k)


def split_launches(cfg):
    """`cfg` (any run's configuration: budget_s, min_reps, max_reps, launches, maybe iterations) as one of its
    `launches` K launches runs it: budget_s / K, ceil(max_reps / K) samples but never below min_reps, a fixed
    ``iterations`` count split the same way (``Config.per_launch`` gives the reasons)."""
    k = cfg.launches
    if k == 1:
        return cfg
    extra = {"iterations": _ceil_div(cfg.iterations, k)} if hasattr(cfg, "iterations") else {}
    return dataclasses.replace(cfg, budget_s=cfg.budget_s / k, max_reps=max(cfg.min_reps, _ceil_div(cfg.max_reps, k)),
                               **extra)


def split_rounds(cfg):
    """`cfg` as one visit of an item runs it when a launch visits every item `rounds` R times: budget_s / R,
    ceil(min_reps / R) and ceil(max_reps / R) samples, ``iterations`` likewise (``Config.per_round`` gives the
    reasons)."""
    r = cfg.rounds
    if r == 1:
        return cfg
    lo = _ceil_div(cfg.min_reps, r)
    extra = {"iterations": _ceil_div(cfg.iterations, r)} if hasattr(cfg, "iterations") else {}
    return dataclasses.replace(cfg, budget_s=cfg.budget_s / r, min_reps=lo,
                               max_reps=max(lo, _ceil_div(cfg.max_reps, r)), **extra)


_LIST_KEYS = ("collectives", "algorithms", "dtypes", "ops")


def _as_list(key, value) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise UsageError(f"config key {key!r}: expected a list of names, got {value!r}")
    if not items:
        raise UsageError(f"config key {key!r}: empty list")
    return tuple(dict.fromkeys(items))


def _check_choices(key, items, choices, allow_all=True):
    if allow_all and items == ("all",):
        return tuple(choices)
    bad = [v for v in items if v not in choices]
    if bad:
        close = difflib.get_close_matches(bad[0], list(choices), n=1)
        raise UsageError(f"{key}: unknown {bad[0]!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                         + f"; choose from {', '.join(choices)}" + (" or all" if allow_all else ""))
    return items


def _collectives(items) -> tuple[str, ...]:
    """Collective names, ``all`` standing for every one but the v-collectives (`EVEN`): each known, else one line
    naming the closest."""
    named = tuple(dict.fromkeys(x for c in items for x in (EVEN if c == "all" else (c,))))
    return _check_choices("collective", named, tuple(COLLECTIVES), allow_all=False)


def collectives_named(text: str) -> tuple[str, ...]:
    """Collectives given as "allreduce,bcast" (or "all", or "all,alltoallv"): each known, else one line naming the
    closest."""
    return _collectives(tuple(c.strip() for c in text.split(",") if c.strip()) or ("",))


def _counts(value) -> str:
    """A count distribution's spec, checked (`ccbench.core.counts.parse_counts`) and made canonical."""
    if not isinstance(value, str):
        raise UsageError(f"config key 'counts': expected a distribution such as moe:8,2,1.25, got {value!r}")
    return parse_counts(value).text


def _one_of(key, value, choices) -> str:
    """A config value that must be one of `choices` (shared by sweep and workload configs)."""
    if value not in choices:
        raise UsageError(f"config key {key!r}: {value!r}; choose from {', '.join(choices)}")
    return value


def _path(key, value) -> str:
    """A config value that must be a non-empty path."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"config key {key!r}: expected a path, got {value!r}")
    return value


def _timing(value) -> str:
    """A timing mode: per-call, batched (DEFAULT_BATCH calls a sample) or batched:K."""
    from ccbench.measure.timing import batch_of

    try:
        k = batch_of(value) if isinstance(value, str) else None
    except ValueError:
        k = None
    if k is None or k > 100_000:
        raise UsageError(f"config key 'timing': {value!r}; choose per-call, batched or batched:K (K 1..100000)")
    return value


def _number(key, value, kind, lo, hi):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int and isinstance(value, float):
        ok = False
    if not ok:
        raise UsageError(f"config key {key!r}: expected {'an integer' if kind is int else 'a number'}, "
                         f"got {value!r}")
    if not lo <= value <= hi:
        raise UsageError(f"config key {key!r}: {value} is outside {lo}..{hi}")
    return kind(value)


#: The keys every kind of run has (sweeps, workloads, plug-in kinds), each with its check: repetitions, the
#: watchdog, the thread level, the results directory, replication (launches, rounds, seed), binding, loop.
RUN_KEYS = {
    "warmup": lambda v: _number("warmup", v, int, 0, 10_000_000),
    "min_reps": lambda v: _number("min_reps", v, int, 1, 10_000_000),
    "max_reps": lambda v: _number("max_reps", v, int, 1, 10_000_000),
    "target_rse": lambda v: _number("target_rse", v, float, 1e-6, 1.0),
    "budget_s": lambda v: _number("budget_s", v, float, 1e-4, 86400.0),
    "watchdog_s": lambda v: _number("watchdog_s", v, float, 0.0, 604800.0),
    "thread_level": lambda v: _one_of("thread_level", v, THREAD_LEVELS),
    "results_dir": lambda v: _path("results_dir", v),
    "launches": lambda v: _number("launches", v, int, 1, MAX_LAUNCHES),
    "rounds": lambda v: _number("rounds", v, int, 1, MAX_ROUNDS),
    "seed": lambda v: None if v is None else _number("seed", v, int, 0, 2**32 - 1),
    "bind": lambda v: _one_of("bind", v, BINDINGS),
    "loop": lambda v: _one_of("loop", v, LOOPS),
}


def resolve(values: dict) -> Config:
    """Validate raw key/values (from TOML and flags) into a Config; unknown keys are refused."""
    from ccbench.algorithms import REGISTRY

    fields = {f.name for f in dataclasses.fields(Config)} - {"extra"}
    out: dict = {}
    for key, value in values.items():
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown config key {key!r}{hint}; valid keys: {', '.join(sorted(fields))}")
        if key in RUN_KEYS:
            out[key] = RUN_KEYS[key](value)
        elif key in _LIST_KEYS:
            out[key] = _as_list(key, value)
        elif key == "sizes":
            try:
                out[key] = tuple(parse_sizes(value))
            except UsageError as exc:
                raise UsageError(f"sizes: {exc}") from None
        elif key == "in_place":
            v = {True: "yes", False: "no"}.get(value, value) if isinstance(value, bool) else value
            if v not in ("no", "yes", "both"):
                raise UsageError(f"config key 'in_place': {value!r}; choose from no, yes, both")
            out[key] = v
        elif key == "root":
            v = str(value) if not isinstance(value, bool) else "?"
            if v != "rotate" and not v.isdigit():
                raise UsageError(f"config key 'root': {value!r}; expected a rank >= 0 or rotate")
            out[key] = v
        elif key == "sync":
            out[key] = _one_of(key, value, SYNC_METHODS)
        elif key == "buffers":
            out[key] = _one_of(key, value, BUFFERS)
        elif key == "counts":
            out[key] = _counts(value)
        elif key == "order":
            out[key] = _one_of(key, value, ORDERS)
        elif key == "timing":
            out[key] = _timing(value)
        elif key == "iterations":
            out[key] = None if value is None else _number(key, value, int, 1, 10_000_000)
        elif key == "placement":
            out[key] = parse_placement(value)
    cfg = Config(**out)
    colls = _collectives(cfg.collectives)
    names = sorted({a for c in colls for a in REGISTRY[c]})
    if "native:all" in cfg.algorithms:  # every forced variant of the library's own algorithms
        variants = [a for c in colls for a, alg in REGISTRY[c].items() if alg.settings]
        cfg = dataclasses.replace(cfg, algorithms=tuple(dict.fromkeys(
            v for a in cfg.algorithms for v in (variants if a == "native:all" else [a]))))
    if "all" in cfg.algorithms:  # every algorithm but the forced variants, and any named beside it (native:all)
        rest = tuple(a for a in cfg.algorithms if a != "all")
        algs = ("all",) + (_check_choices("algorithm", rest, names, allow_all=False) if rest else ())
    else:
        algs = _check_choices("algorithm", cfg.algorithms, names)
    unused = [a for a in algs if a != "all" and not any(a in REGISTRY[c] for c in colls)]
    if unused:
        raise UsageError(f"algorithm {unused[0]!r} exists for none of {', '.join(colls)}")
    if cfg.dtypes == ("all",):  # every type this installation can time with this loop (bfloat16: ml_dtypes, Python)
        dtypes = tuple(d for d in DTYPES if d != "bfloat16" or (cfg.loop != "compiled" and half_available()))
    else:
        dtypes = _check_choices("dtype", cfg.dtypes, list(DTYPES), allow_all=True)
    _check_half(dtypes, cfg.loop)
    ops = _check_choices("op", cfg.ops, list(OPS), allow_all=True)
    if cfg.max_reps < cfg.min_reps:
        raise UsageError(f"max_reps ({cfg.max_reps}) is below min_reps ({cfg.min_reps})")
    return dataclasses.replace(cfg, collectives=colls, algorithms=algs, dtypes=dtypes, ops=ops)


def _check_half(dtypes: tuple[str, ...], loop: str) -> None:
    """One line before anything runs: bfloat16 without ml_dtypes (naming the install), or bfloat16 with the
    compiled loop, which passes the library's predefined datatypes only (MPI has no bfloat16; under auto its cases
    go to the Python loop)."""
    require(dtypes)
    if "bfloat16" in dtypes and loop == "compiled":
        raise UsageError(f"dtype bfloat16 cannot be timed by the compiled loop (loop {loop!r}: MPI has no bfloat16 "
                         "datatype to pass it); use --loop python")


def read_toml(path: str | Path) -> dict:
    """The top-level keys of a TOML config file; one clear error for a missing, unreadable or nested file."""
    p = Path(path)
    try:
        values = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise UsageError(f"config file {str(p)!r} not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise UsageError(f"config file {str(p)!r} cannot be read: {exc.strerror}") from None
    nested = [k for k, v in values.items() if isinstance(v, dict)]
    if nested:
        raise UsageError(f"config file {str(p)!r}: unexpected table [{nested[0]}]; keys go at the top level")
    return values


def shipped_dir(what: str = "configs") -> Path:
    """The directory of the files shipped inside the package: ``configs`` or ``slurm``."""
    return Path(str(resources.files("ccbench").joinpath("data", what)))


def shipped_configs(kind: str | None = None) -> dict[str, Path]:
    """{name: path} of the shipped configs, sorted; `kind` "sweep" or "workload" keeps only those."""
    paths = sorted(shipped_dir().glob("*.toml")) if shipped_dir().is_dir() else []
    out = {p.stem: p for p in paths}
    if kind == "sweep":
        return {n: p for n, p in out.items() if not n.startswith(WORKLOAD_PREFIX)}
    if kind == "workload":
        return {n: p for n, p in out.items() if n.startswith(WORKLOAD_PREFIX)}
    return out


def config_description(path: str | Path) -> str:
    """The first sentence of a config file's opening comment, without the ``#`` (it may run over several
    lines; "" when the file opens without a comment)."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    words: list[str] = []
    for ln in lines:
        if not ln.startswith("#"):
            break
        words += ln.lstrip("#").split()
    text = " ".join(words)
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


def copy_shipped(dest: str | Path) -> list[Path]:
    """Copy the shipped ``configs/`` and ``slurm/`` into `dest` (made if missing); refuse to overwrite any file."""
    root = Path(dest)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{str(root)!r} exists and is not a directory")
    pairs = [(src, root / what / src.name) for what in ("configs", "slurm")
             for src in sorted(shipped_dir(what).iterdir()) if src.is_file()]
    if not pairs:
        raise UsageError("this installation ships no configs or batch scripts")
    there = [str(d) for _, d in pairs if d.exists() or d.is_symlink()]
    if there:
        more = f" (and {len(there) - 1} more of the files to copy)" if len(there) > 1 else ""
        raise UsageError(f"{there[0]!r} already exists{more}; nothing copied, nothing overwritten")
    try:
        for src, dst in pairs:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    except OSError as exc:
        raise UsageError(f"cannot write into {str(root)!r}: {exc.strerror or exc}") from None
    return [d for _, d in pairs]


def _is_name(value: str) -> bool:
    seps = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return not any(s in value for s in seps) and not value.endswith(".toml") and value not in ("", ".", "..")


def resolve_config_path(value: str | Path, kind: str = "sweep") -> Path:
    """The file a ``--config`` value means: a bare name (``quick``) is a shipped config, anything else a path.

    A bare name that is no shipped config but an existing file is that file; otherwise it is
    refused with the shipped names of this `kind` ("sweep" or "workload").
    """
    text = str(value)
    if not _is_name(text):
        return Path(text)
    mine, every = shipped_configs(kind), shipped_configs()
    if text in mine:
        return mine[text]
    if Path(text).is_file():
        return Path(text)
    if text in every:
        other = "workload" if kind == "sweep" else "sweep"
        raise UsageError(f"config {text!r} is a shipped {other} config, not a {kind} config; "
                         f"{kind} configs: {', '.join(mine) or 'none'}")
    raise UsageError(f"no shipped {kind} config named {text!r}; shipped: {', '.join(mine) or 'none'} "
                     "(or give the path of a .toml file)")


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> Config:
    """Read a TOML sweep file or shipped config by name (optional), apply flag overrides, validate."""
    values: dict = read_toml(resolve_config_path(path, "sweep")) if path is not None else {}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return resolve(values)


@dataclass(frozen=True)
class Case:
    """One measured configuration: a row of the results."""

    collective: str
    algorithm: str
    nbytes: int
    count: int
    dtype: str
    op: str
    in_place: bool
    root: int
    counts: str = "uniform"  # the count distribution of a v-collective's blocks (uniform for the others)

    def label(self) -> str:
        """Short human label for logs and error messages."""
        extra = f" {self.op}" if COLLECTIVES[self.collective].reduction else ""
        extra += " in-place" if self.in_place else ""
        extra += f" root={self.root}" if COLLECTIVES[self.collective].rooted else ""
        extra += f" counts={self.counts}" if COLLECTIVES[self.collective].uneven else ""
        return f"{self.collective}/{self.algorithm} {format_size(self.nbytes)} {self.dtype}{extra}"


def all_algorithms(collectives) -> dict[str, list[str]]:
    """What ``all`` stands for today, per collective: every registered algorithm but the forced variants of the
    library's (native:all), the persistent and the non-blocking forms (``Algorithm.in_all``).  A run stores it
    (run.json ``all_algorithms``), so that ``--resume`` plans the algorithms it was planned with, not those the
    registry holds since."""
    from ccbench.algorithms import REGISTRY

    return {c: [a for a, x in REGISTRY[c].items() if x.in_all] for c in collectives}


def plan(cfg: Config, nranks: int, no_hierarchy: str | None = None,
         every: dict | None = None) -> tuple[list[Case], list[tuple[str, str]]]:
    """Expand a Config into cases for `nranks` ranks; also return (what, why) of skips.

    A named algorithm that cannot run at this rank count is an error; one selected by
    ``all`` is skipped with its reason.  `no_hierarchy` says why the ranks' node map has no
    two levels (`ccbench.core.placement.hierarchy_missing`; None: it has, or it is not
    known yet): the hierarchical algorithms then cannot run either.  The v-collectives' cases carry
    ``cfg.counts``, which must fit `nranks` (one line if not); alltoallv in place needs counts the same
    both ways, and is refused (``in_place`` yes) or skipped (both) otherwise.  `every`: what ``all`` stood for
    when the run was planned (`all_algorithms`; None: today's); a name the registry no longer holds is skipped.
    """
    from ccbench.algorithms import REGISTRY

    cases: list[Case] = []
    skipped: list[tuple[str, str]] = []
    if cfg.root != "rotate" and int(cfg.root) >= nranks and any(
            COLLECTIVES[c].rooted for c in cfg.collectives):
        raise UsageError(f"root {cfg.root} does not exist with {nranks} ranks")
    for coll_name in cfg.collectives:
        coll = COLLECTIVES[coll_name]
        if "all" in cfg.algorithms:
            stood = (every if every is not None else all_algorithms([coll_name])).get(coll_name, [])
            gone = [a for a in stood if a not in REGISTRY[coll_name]]
            skipped += [(f"{coll_name}/{a}", "planned by all, but not in this ccbench") for a in gone]
            chosen = [a for a in stood if a not in gone]
        else:
            chosen = []
        algs = chosen + [a for a in cfg.algorithms if a in REGISTRY[coll_name] and a not in chosen]
        dtypes = cfg.dtypes if coll_name != "barrier" else cfg.dtypes[:1]
        ops = cfg.ops if coll.reduction else ("none",)
        places = {"no": (False,), "yes": (True,), "both": (False, True)}[cfg.in_place]
        if coll_name in ("barrier", "pingpong", "bcast"):
            places = (False,)
        counts = cfg.counts if coll.uneven else "uniform"
        if coll.uneven:
            check_ranks(parse_counts(counts), nranks)
        if coll_name == "alltoallv" and True in places and not symmetric(counts, nranks):
            why = f"in place it sends and receives the same counts (MPI_IN_PLACE), which {counts} does not"
            if cfg.in_place == "yes":
                raise UsageError(f"alltoallv {why}; use --in-place no")
            skipped.append(("alltoallv in-place", why))
            places = (False,)
        roots = (range(nranks) if cfg.root == "rotate" else (int(cfg.root),)) if coll.rooted else (0,)
        for alg_name in algs:
            alg = REGISTRY[coll_name][alg_name]
            for op in ops:
                why = alg.unsupported(nranks, None if op == "none" else op) or (
                    no_hierarchy if no_hierarchy and node_aware(alg) else None)
                if why:
                    named = "all" not in cfg.algorithms
                    if named and (not alg.native or alg.setup or alg.nonblocking):  # named: refused
                        raise UsageError(f"{coll_name}/{alg_name} cannot run here: {why}")
                    skipped.append((f"{coll_name}/{alg_name}" + (f" {op}" if op != "none" else ""), why))
                    continue
                for dtype in dtypes:
                    itemsize = DTYPES[dtype].itemsize
                    seen = set()
                    sizes = (0,) if coll_name == "barrier" else cfg.sizes
                    for size in sizes:
                        count = coll.count_for(size, itemsize, nranks)
                        if count in seen:
                            continue
                        seen.add(count)
                        nbytes = coll.nbytes_for(count, itemsize, nranks)
                        for in_place in places:
                            for root in roots:
                                cases.append(Case(coll_name, alg_name, nbytes, count, dtype, op,
                                                  in_place, root, counts))
    if not cases:
        why = "; ".join(f"{w}: {r}" for w, r in skipped[:3])
        raise UsageError("nothing to run" + (f" ({why})" if why else ""))
    return cases, skipped
