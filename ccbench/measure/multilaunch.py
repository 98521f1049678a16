"""One launch per forced native variant, merged into one run directory.

The MPI library reads the variables that force an internal algorithm at MPI_Init
(``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``, ``OMPI_MCA_coll_tuned_<coll>_algorithm``), so a
sweep over ``native:<alg>`` variants needs one launch per variant.  ``ccbench launch``
runs the unforced part of the sweep (native, hand-written) in one launch and each
variant in its own, each into ``RUN/parts/``, then writes the merged rows -- every row
with the settings it ran under -- and one ``run.json`` whose ``parts`` list says which
launch produced what.
"""

from dataclasses import dataclass, field
from pathlib import Path

from ccbench.core.errors import UsageError

__all__ = ["Part", "has_variants", "launch_parts", "merge_parts", "plan_parts"]


@dataclass(frozen=True)
class Part:
    """One launch: its collectives and algorithms, and the environment that forces them."""

    label: str
    collectives: tuple[str, ...]
    algorithms: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


def has_variants(cfg) -> bool:
    """True when the sweep names a forced variant of the library's own algorithms."""
    from ccbench.algorithms import REGISTRY

    return any(REGISTRY[c].get(a) is not None and REGISTRY[c][a].settings
               for c in cfg.collectives for a in cfg.algorithms)


def plan_parts(cfg, library: str) -> tuple[list[Part], list[tuple[str, str]]]:
    """(launches, (what, why) skips): the unforced launch first, then one per variant."""
    from ccbench.algorithms import REGISTRY
    from ccbench.algorithms.native_variants import LIBRARIES

    parts: list[Part] = []
    skipped: list[tuple[str, str]] = []
    if cfg.algorithms == ("all",):
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


def _part_dir(parts_dir: Path, tag: str) -> Path | None:
    found = sorted(d for d in parts_dir.glob(f"*_{tag}*") if (d / "run.json").is_file())
    return found[-1] if found else None


def merge_parts(dest: Path, results: list[tuple[Part, int, Path | None]], cfg, argv: list[str],
                library_skips: list[tuple[str, str]]) -> tuple[int, int]:
    """Write dest's run.json and tables from the parts' runs; return (rows, failed rows).

    Provenance comes from the first part that ran (the same machine, library and ranks for
    all); each part's own run.json stays under ``parts/`` with its full provenance.
    """
    import time

    from ccbench.store.results import RunWriter
    from ccbench.store.run import load_run

    loaded = []
    for part, code, path in results:
        meta, rows, _ = load_run(path) if path is not None else ({}, [], [])
        loaded.append((part, code, path, meta, rows))
    first = next((m for _, _, _, m, _ in loaded if m), {})
    keep = {k: v for k, v in first.items() if k not in ("schema", "status", "failure", "signal", "skipped",
                                                         "planned_cases", "finished_cases", "failed_cases",
                                                         "end_time", "resumed")}
    skipped = [{"what": w, "why": y} for w, y in library_skips]
    part_docs = []
    statuses = []
    for part, code, path, meta, rows in loaded:
        skipped += meta.get("skipped", [])
        status = meta.get("status", "failed") if path is not None else "failed"
        if code and status == "complete":
            status = "failed"
        statuses.append(status)
        if path is None:
            skipped.append({"what": f"{','.join(part.collectives)}/{','.join(part.algorithms)}",
                            "why": f"its launch ended with exit code {code} before writing a run "
                                   "(MPI_Init refused the setting?)"})
        part_docs.append({"dir": str(path.relative_to(dest)) if path is not None else None,
                          "label": part.label, "collectives": list(part.collectives),
                          "algorithms": list(part.algorithms), "settings": part.env, "exit_code": code,
                          "status": status, "cases": len(rows)})
    status = ("complete" if all(s == "complete" for s in statuses)
              else "interrupted" if any(s == "interrupted" for s in statuses) else "failed")
    meta = dict(keep, argv=argv, config=cfg.to_dict(), parts=part_docs, skipped=skipped,
                planned_cases=sum(m.get("planned_cases", 0) for *_, m, _ in loaded))
    writer = RunWriter(dest, meta)
    nrows = nbad = 0
    try:
        for *_, rows in loaded:
            for r in rows:
                writer.append(r)
                nrows += 1
                nbad += not r.ok
    finally:
        extra = {} if status == "complete" else {"failure": "; ".join(
            f"part {d['label']}: {d['status']} (exit code {d['exit_code']})"
            for d in part_docs if d["status"] != "complete")}
        writer.update(status=status, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"), finished_cases=nrows,
                      failed_cases=nbad, **extra)
        writer.close()
    return nrows, nbad


def launch_parts(cfg, kw: dict, library: str | None, command_for, env: dict, run_launcher, nranks: int,
                 argv: list[str], say=print) -> tuple[int, Path]:
    """Run every part with its own launcher command, merge them; return (exit code, run dir).

    `command_for(part_kw)` gives the launcher command for the sweep options `part_kw`;
    `run_launcher(cmd, env)` runs one and returns its exit code.
    """
    from ccbench.store.results import new_run_dir

    if kw.get("resume"):
        raise UsageError("--resume cannot continue a launch of forced native variants (one launch per "
                         "variant); launch the sweep again")
    if library is None:
        raise UsageError("cannot force native variants: the launcher belongs to neither MPICH nor Open MPI")
    parts, library_skips = plan_parts(cfg, library)
    if not parts:
        why = "; ".join(f"{w}: {y}" for w, y in library_skips[:3])
        raise UsageError(f"nothing to run ({why})")
    dest = new_run_dir(cfg.results_dir, nranks, kw.get("tag") or "")
    parts_dir = dest / "parts"
    parts_dir.mkdir()
    results: list[tuple[Part, int, Path | None]] = []
    for i, part in enumerate(parts, 1):
        tag = f"{i:02d}-{part.label}".replace(":", "-")
        part_kw = dict(kw, collectives=",".join(part.collectives), algorithms=",".join(part.algorithms),
                       results_dir=str(parts_dir), tag=tag, show=False, resume=None)
        shown = " ".join(f"{k}={v}" for k, v in part.env.items()) or "no forcing"
        say(f"part {i}/{len(parts)}: {','.join(part.collectives)} / {','.join(part.algorithms)} ({shown})")
        code = run_launcher(command_for(part_kw), dict(env, **part.env))
        results.append((part, code, _part_dir(parts_dir, tag)))
        if code < 0 or code >= 128:  # a signal: stop here, keep what ran
            break
    merge_parts(dest, results, cfg, argv, library_skips)
    codes = [c for _, c, _ in results]
    stopped = next((c for c in codes if c < 0 or c >= 128), None)
    return (stopped if stopped is not None else (1 if any(codes) else 0)), dest
