"""Several launches merged into one run directory: replicated launches, and one launch per forced native variant.

The launch is the unit of replication (process placement, memory layout and library state
change per launch; Kalibera & Jones, ISMM 2013; Hunold & Carpen-Amarie, IEEE TPDS 2016), so
``ccbench launch --launches K`` and ``ccbench workload KIND --launch N --launches K`` run the
plan K times, each a separate job, each with its own seeded order of the items and its share
of the samples (``Config.per_launch``, ``WorkloadConfig.per_launch``).  One implementation
serves both kinds of run: a `Replication` says what differs (the options of a launch, which
rows of different launches are one row, the row type, the order of the merged rows).

The MPI library reads the variables that force an internal algorithm at MPI_Init
(``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``, ``OMPI_MCA_coll_tuned_<coll>_algorithm``), so a
sweep over ``native:<alg>`` variants needs one launch per variant: the unforced part of
the sweep (native, hand-written) runs in one launch and each variant in its own.  With K
launches the parts are interleaved round by round (A B C A B C ...), never all launches of
one variant and then the next, so drift over time does not line up with a variant.

Every launch writes its own run into ``RUN/parts/``; the merged run holds one row per item
with the samples of all its launches (``ccbench.store.launches.pool_launches``: each row
records which launch measured which samples) and one ``run.json`` whose ``parts`` list says
which launch produced what.  ``--resume RUN`` continues at the launch and item where the
run stopped: finished launches are kept, an unfinished one is resumed, the rest are run.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.core.errors import UsageError
from ccbench.store.results import Row

__all__ = ["Part", "Replication", "has_variants", "launch_parts", "merge_parts", "needs_launches", "plan_launches",
           "plan_parts", "replicated", "sweep_replication"]


@dataclass(frozen=True)
class Part:
    """One launch: its collectives and algorithms, and the environment that forces them."""

    label: str
    collectives: tuple[str, ...]
    algorithms: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Replication:
    """A run made of several launches, of any kind: what `launch_parts` runs and `merge_parts` stores.

    ``options(part)`` gives the run options (by click parameter name) every launch of `part`
    is given explicitly, from the resolved configuration -- so a resumed run's launches get
    the stored values, not the command line's; ``key(row)`` says which rows of different
    launches are one row; ``sort_key(row)``, when given, orders the merged rows (else the
    order they were first seen in).
    """

    config: dict                       # the resolved configuration, as run.json stores it
    launches: int
    order: str                         # order of the items within each launch: shuffled | planned
    seed: int | None                   # the order's seed; None: drawn once for the run
    results_dir: str
    plan: list                         # [(launch number, Part)], in the order to run them
    skips: list                        # (what, why) left out before any launch
    options: Callable[[Part], dict]
    key: Callable
    row_cls: type = Row
    columns: list | None = None        # the tables' columns (None: a sweep's)
    sort_key: Callable | None = None


def replicated(launches: int) -> list[tuple[int, Part]]:
    """The plan of a run whose every launch runs everything: [(1, all), (2, all), ...]."""
    return [(k, Part("all", (), ())) for k in range(1, launches + 1)]


def sweep_replication(cfg, library: str | None) -> Replication:
    """A sweep's launches: the plan of `plan_launches`, rows pooled by case, every sweep setting given explicitly."""
    plan, skips = plan_launches(cfg, library)

    def options(part: Part) -> dict:
        return dict(collectives=",".join(part.collectives), algorithms=",".join(part.algorithms),
                    sizes=",".join(str(n) for n in cfg.sizes), dtypes=",".join(cfg.dtypes), ops=",".join(cfg.ops),
                    order=cfg.order, **{k: getattr(cfg, k) for k in _CARRIED})

    return Replication(cfg.to_dict(), cfg.launches, cfg.order, cfg.seed, cfg.results_dir, plan, skips, options,
                       _case_key)


def has_variants(cfg) -> bool:
    """True when the sweep names a forced variant of the library's own algorithms."""
    from ccbench.algorithms import REGISTRY

    return any(REGISTRY[c].get(a) is not None and REGISTRY[c][a].settings
               for c in cfg.collectives for a in cfg.algorithms)


def needs_launches(cfg) -> bool:
    """True when the sweep needs more than one launch (replicates, or forced variants)."""
    return cfg.launches > 1 or has_variants(cfg)


def plan_launches(cfg, library: str | None) -> tuple[list[tuple[int, Part]], list[tuple[str, str]]]:
    """([(launch number, part)] in the order to run them, (what, why) skips): round 1's parts, then round 2's, ..."""
    if has_variants(cfg):
        if library is None:
            raise UsageError("cannot force native variants: the launcher belongs to neither MPICH nor Open MPI")
        parts, skipped = plan_parts(cfg, library)
    else:
        parts, skipped = [Part("all", cfg.collectives, cfg.algorithms)], []
    return [(k, p) for k in range(1, cfg.launches + 1) for p in parts], skipped


def plan_parts(cfg, library: str) -> tuple[list[Part], list[tuple[str, str]]]:
    """(launches, (what, why) skips): the unforced launch first, then one per variant."""
    from ccbench.algorithms import REGISTRY
    from ccbench.algorithms.native_variants import LIBRARIES

    parts: list[Part] = []
    skipped: list[tuple[str, str]] = []
    if "all" in cfg.algorithms:  # every unforced algorithm; the variants named beside it get their launches below
        plain = ("all",)
    else:
        plain = tuple(a for a in cfg.algorithms
                      if any(a in REGISTRY[c] and not REGISTRY[c][a].settings for c in cfg.collectives))
    if plain:
        colls = tuple(c for c in cfg.collectives
                      if plain == ("all",) or any(a in REGISTRY[c] for a in plain))
        if colls:
            parts.append(Part("unforced", colls, plain))
    for coll in cfg.collectives:
        for name in cfg.algorithms:
            alg = REGISTRY[coll].get(name)
            if alg is None or not alg.settings:
                continue
            env = alg.settings.get(library)
            if env is None:
                skipped.append((f"{coll}/{name}", f"not an algorithm of {LIBRARIES[library]}"))
                continue
            parts.append(Part(f"{coll}-{name.split(':', 1)[1]}", (coll,), (name,), dict(env)))
    return parts, skipped


def _tag(launch: int, index: int, part: Part) -> str:
    return f"L{launch:02d}-{index:02d}-{part.label}".replace(":", "-")


def _part_dir(parts_dir: Path, tag: str) -> Path | None:
    found = sorted(d for d in parts_dir.glob(f"*_{tag}*") if (d / "run.json").is_file())
    return found[-1] if found else None


def _case_key(r) -> tuple:
    return (r.collective, r.algorithm, r.nbytes, r.dtype, r.op, bool(r.in_place), r.root)


_PER_PART = ("schema", "status", "failure", "signal", "skipped", "planned_cases", "finished_cases", "failed_cases",
             "end_time", "resumed", "order", "order_seed", "launch")


def _signalled(code: int) -> bool:
    """An exit code that says a signal ended the launch (negative: killed; 128 + N: as a shell reports it)."""
    return code < 0 or code >= 128


def merge_parts(dest: Path, results: list[tuple[int, Part, int, Path | None]], rep: Replication, argv: list[str],
                order_seed: int | None = None, planned: int | None = None) -> tuple[int, int]:
    """Write dest's run.json and tables from the launches' runs; return (rows, failed rows).

    `results`: (launch number, part, exit code, its run directory or None); fewer than `planned`
    (a stop signal ended the run early) make the merged run ``interrupted``, never ``complete``.  Rows of one item
    from different launches become one row (``pool_rows`` on ``rep.key``).  Provenance comes
    from the first part that ran (the same machine, library and ranks for all); each part's
    own run.json stays under ``parts/`` with its full provenance; what each launch measures before
    its first case (``reduce_local``, ``harness_floor``, ``memory_bandwidth``) is pooled over the
    launches (``ccbench.store.launches``).  The merged tables are
    derived from the parts, which are never changed: they are written beside the old ones and
    renamed over them, so a resumed merge replaces them whole.
    """
    import shutil
    import time

    from ccbench.store.launches import (
        pool_harness_floor,
        pool_load,
        pool_memory_bandwidth,
        pool_reduce_local,
        pool_rows,
    )
    from ccbench.store.results import RunWriter, install_run
    from ccbench.store.run import open_run

    kinds = (getattr(rep.row_cls, "KIND", "sweep"),)
    loaded = []
    for launch, part, code, path in results:
        run = open_run(path, kinds=kinds) if path is not None else None
        loaded.append((launch, part, code, path, run.meta if run else {}, run.rows if run else []))
    first = next((m for *_, m, _ in loaded if m), {})
    keep = {k: v for k, v in first.items() if k not in _PER_PART}
    # what every launch measures before its first case, pooled over the launches (not the first one's)
    for name, pool in (("reduce_local", pool_reduce_local), ("harness_floor", pool_harness_floor),
                       ("memory_bandwidth", pool_memory_bandwidth), ("load", pool_load)):
        if name in keep:
            keep[name] = pool([(launch, m.get(name)) for launch, *_, m, _ in loaded if m])
    skipped = [{"what": w, "why": y} for w, y in rep.skips]
    seen_skips: set[str] = set()
    part_docs = []
    statuses = []
    for launch, part, code, path, meta, rows in loaded:
        for entry in meta.get("skipped", []):  # the same skip from every launch is listed once
            if entry.get("what") not in seen_skips:
                seen_skips.add(entry.get("what"))
                skipped.append(entry)
        status = meta.get("status", "failed") if path is not None else "failed"
        if code and status == "complete":
            status = "interrupted" if _signalled(code) else "failed"
        statuses.append(status)
        if path is None:
            what = f"{','.join(part.collectives)}/{','.join(part.algorithms)}" if part.collectives else part.label
            skipped.append({"what": f"launch {launch}: {what}",
                            "why": f"its launch ended with exit code {code} before writing a run "
                                   "(MPI_Init refused the setting?)"})
        part_docs.append({"dir": str(path.relative_to(dest)) if path is not None else None, "launch": launch,
                          "label": part.label, "collectives": list(part.collectives),
                          "algorithms": list(part.algorithms), "settings": part.env, "exit_code": code,
                          "status": status, "order_seed": meta.get("order_seed"), "cases": len(rows)})
    short = planned is not None and len(results) < planned
    status = ("complete" if all(s == "complete" for s in statuses) and not short
              else "interrupted" if any(s == "interrupted" for s in statuses) or short else "failed")
    planned = [m["planned_cases"] for launch, *_, m, _ in loaded if launch == 1 and "planned_cases" in m]
    meta = dict(keep, argv=argv, config=rep.config, launches=rep.launches, order=rep.order,
                order_seed=order_seed, parts=part_docs, skipped=skipped,
                **({"planned_cases": sum(planned)} if planned else {}))
    pooled = pool_rows(((launch, r) for launch, *_, rows in loaded for r in rows), rep.key)
    if rep.sort_key is not None:
        pooled.sort(key=rep.sort_key)
    tmp = dest / ".merging"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    writer = RunWriter(tmp, meta, columns=rep.columns)
    nbad = 0
    try:
        for r in pooled:
            writer.append(r)
            nbad += not r.ok
    finally:
        extra = {} if status == "complete" else {"failure": "; ".join(
            f"launch {d['launch']} part {d['label']}: {d['status']} (exit code {d['exit_code']})"
            for d in part_docs if d["status"] != "complete")}
        writer.update(status=status, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"), finished_cases=len(pooled),
                      failed_cases=nbad, **extra)
        writer.close()
    install_run(tmp, dest)
    return len(pooled), nbad


def launch_parts(rep: Replication, kw: dict, command_for, env: dict, run_launcher, nranks: int,
                 argv: list[str], say=print, resume: Path | None = None) -> tuple[int, Path]:
    """Run every launch of `rep` with its own launcher command, merge them; return (exit code, run dir).

    `kw` are the command's parsed options; `command_for(part_kw)` gives the launcher command
    for the options `part_kw` of one launch (`kw` with the launch's own: ``rep.options``, its
    parts directory, tag, seed and launch number); `run_launcher(cmd, env, dest)` runs one
    (`dest`: the merged run, for its messages) and returns its exit code.  With `resume` (a
    merged run made by this function), its finished launches are kept, an unfinished one
    continued and the missing ones run.
    """
    import secrets

    from ccbench.store.results import new_run_dir
    from ccbench.store.run import open_run

    kinds = (getattr(rep.row_cls, "KIND", "sweep"),)
    plan = rep.plan
    if not plan:
        why = "; ".join(f"{w}: {y}" for w, y in rep.skips[:3])
        raise UsageError(f"nothing to run ({why})")
    if resume is not None:
        dest = Path(resume)
        old = open_run(dest, kinds=kinds, what="--resume").meta
        if not isinstance(old.get("parts"), list):
            raise UsageError(f"cannot resume {dest} as a run of several launches: it has no parts/")
        seed = old.get("order_seed")
    else:
        dest = new_run_dir(rep.results_dir, nranks, kw.get("tag") or "")
        (dest / "parts").mkdir()
        seed = rep.seed if rep.seed is not None else secrets.randbelow(2**32)
    from ccbench.store.lock import RunLock

    with RunLock(dest):  # one launcher of a run of several launches at a time (a second --resume is refused)
        results = _run_launches(rep, plan, dest, kw, command_for, env, run_launcher, say, seed, kinds)
        merge_parts(dest, results, rep, argv, seed, planned=len(plan))
    codes = [c for *_, c, _ in results]
    stopped = next((c for c in codes if _signalled(c)), None)
    if stopped is None and len(results) < len(plan):
        stopped = 1
    return (stopped if stopped is not None else (1 if any(codes) else 0)), dest


def _run_launches(rep, plan, dest: Path, kw, command_for, env, run_launcher, say, seed, kinds) -> list:
    """Run the launches of `plan` not finished earlier, in order, until a signal stops them; [(launch, part, exit
    code, its run directory or None)]."""
    from ccbench.store.run import open_run

    parts_dir = dest / "parts"
    per_round = len(plan) // rep.launches
    results: list[tuple[int, Part, int, Path | None]] = []
    for i, (launch, part) in enumerate(plan):
        tag = _tag(launch, i % per_round + 1, part)
        there = _part_dir(parts_dir, tag)
        done = there is not None and open_run(there, kinds=kinds).meta.get("status") == "complete"
        shown = " ".join(f"{k}={v}" for k, v in part.env.items()) or "no forcing"
        head = f"launch {launch}/{rep.launches}" + (f", part {i % per_round + 1}/{per_round}" if per_round > 1 else "")
        if done:
            say(f"{head}: finished earlier, kept ({there.name})")
            results.append((launch, part, 0, there))
            continue
        # each launch gets its own seed (launch_order adds the launch number to the run's seed)
        part_kw = {**kw, **rep.options(part), "results_dir": str(parts_dir), "tag": tag, "show": False,
                   "resume": str(there) if there else None, "launches": rep.launches, "seed": seed,
                   "launch_index": launch, "config_file": None}
        what = f"{','.join(part.collectives)} / {','.join(part.algorithms)} ({shown})" if part.collectives else \
            "the whole plan"
        say(f"{head}: {what}" + (f", continuing {there.name}" if there else ""))
        code = run_launcher(command_for(part_kw), dict(env, **part.env), dest)
        results.append((launch, part, code, _part_dir(parts_dir, tag)))
        if _signalled(code):  # a signal: stop here, keep what ran
            break
    return results


#: Sweep settings every launch is given explicitly (from the resolved configuration, so a
#: resumed run's launches get the stored values, not the command line's).
_CARRIED = ("in_place", "root", "warmup", "min_reps", "max_reps", "target_rse", "budget_s", "sync", "thread_level",
            "watchdog_s", "bind", "timing", "iterations", "loop", "rounds", "buffers", "counts")
