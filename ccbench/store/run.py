"""One way to open a stored run: run.json read once, the run's kind known, rows of that kind's type.

Every reader of a run directory goes through `open_run`, which returns a `Run`: provenance,
rows and load warnings, with the kind it read; ``kinds=`` makes it refuse a run of another
kind.  What differs between the kinds of run is their `RunKind` (``ccbench.store.kinds``): the
row type and the column that marks its rows.
Code downstream asks ``run.kind`` and looks things up by it, never re-reading run.json.
"""

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.core.errors import UsageError
from ccbench.store.kinds import PLUGINS_VAR, RunKind, kind_named
from ccbench.store.results import READABLE_SCHEMAS, WriteError, resolve_run, write_json_atomic
from ccbench.store.workload_rows import KIND as WORKLOAD

__all__ = ["SWEEP", "WORKLOAD", "Run", "RunKind", "lab_block", "mark_failed", "open_run", "part_provenance"]

SWEEP = "sweep"


@dataclass(frozen=True)
class Run:
    """A stored run as read from its directory: provenance, rows, load warnings, kind."""

    path: Path
    meta: dict
    rows: list = field(repr=False)
    warnings: list
    kind: str

    @property
    def spec(self) -> RunKind:
        """The `RunKind` of this run (``ccbench.store.kinds``)."""
        return kind_named(self.kind)


def _read_meta(path: Path) -> dict:
    meta_path = path / "run.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{str(path)!r} is not a ccbench run (no run.json)") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UsageError(f"{str(meta_path)!r} is corrupt (not JSON)") from None
    schema = meta.get("schema") if isinstance(meta, dict) else None
    if schema not in READABLE_SCHEMAS:
        if isinstance(schema, str) and schema.startswith("ccbench.run/"):
            raise UsageError(f"{str(path)!r} has schema {schema}; this ccbench reads "
                             f"{' and '.join(READABLE_SCHEMAS)}: use the ccbench version that wrote it, or re-run "
                             "the sweep")
        raise UsageError(f"{str(meta_path)!r} is not a ccbench run file (schema {schema!r})")
    return meta


def _read_rows(path: Path, kind: RunKind) -> tuple[list, list[str]]:
    """Rows of cases.jsonl; a torn last line (a crash mid-write) is dropped with a warning."""
    rows: list = []
    warnings: list[str] = []
    try:
        text = (path / "cases.jsonl").read_text()
    except FileNotFoundError:  # every writer creates it with run.json: its rows are gone, not "0 cases, all correct"
        raise UsageError(f"{str(path)!r} has no cases.jsonl: the run's rows are missing (a run holds run.json, "
                         "cases.jsonl and cases.csv)") from None
    except UnicodeDecodeError:
        raise UsageError(f"{str(path / 'cases.jsonl')!r} is corrupt (not text)") from None
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not rows and isinstance(data, dict) and kind.marker not in data:
                raise UsageError(f"{str(path)!r} is a {kind.name!r} run but its cases.jsonl holds rows of another "
                                 f"kind (no {kind.marker!r} column)")
            rows.append(kind.rows.from_dict(data))
        except (json.JSONDecodeError, ValueError, TypeError) as exc:
            last = i == len(lines) - 1 or all(not x.strip() for x in lines[i + 1:])
            if last and not text.endswith("\n"):
                warnings.append(f"dropped a torn last line of cases.jsonl (line {i + 1})")
                continue
            raise UsageError(f"{str(path / 'cases.jsonl')!r} line {i + 1} is corrupt: {exc}") from None
    return rows, warnings


def open_run(run, results_dir="results", *, kinds=None, need_rows: bool = False, what: str = "this command") -> Run:
    """Open a stored run (a path, a name under `results_dir`, or ``latest``); one clear error otherwise.

    Refuses a directory without run.json, corrupt or foreign files, an unknown schema, a run
    whose kind is not among `kinds` (when given; `what` names the refusing command), and,
    with `need_rows`, a run without finished cases.
    """
    path = resolve_run(run, results_dir)
    meta = _read_meta(path)
    kind = meta.get("kind") or SWEEP
    spec = kind_named(kind) if isinstance(kind, str) else None
    if spec is None:
        raise UsageError(f"{str(path)!r} is a {kind!r} run, a kind this ccbench does not know (a plug-in's kind: "
                         f"load it with ccbench --plugin MODULE, or name it in {PLUGINS_VAR})")
    if kinds is not None and kind not in kinds:
        wanted = " or ".join((kind_named(k).label if kind_named(k) else k) + "s" for k in kinds)
        raise UsageError(f"{str(path)!r} is a {kind!r} run; {what} reads {wanted} only")
    rows, warnings = _read_rows(path, spec)
    said = meta.get("finished_cases")
    if isinstance(said, int) and not isinstance(said, bool) and len(rows) < said:  # a truncated or emptied file
        warnings.append(f"cases.jsonl holds {len(rows)} rows, but run.json says {said} finished: "
                        f"{said - len(rows)} are lost")
    # NaN in a run of schema /1, or a file edited by hand: fit, compare and check cannot use such a row
    medians = (getattr(r, "median_s", 0.0) for r in rows)
    blank = sum(not (isinstance(m, (int, float)) and math.isfinite(m)) for m in medians)
    if blank:
        warnings.append(f"{blank} row(s) of cases.jsonl have no median time (null or not finite): fits and comparisons "
                        "leave them out, and a check of their cases fails")
    if need_rows and not rows:
        raise UsageError(f"{str(path)!r} has no finished cases")
    return Run(path, meta, rows, warnings, kind)


def part_provenance(run: Run) -> list[dict]:
    """The run.json of each launch a merged run was made of (its ``parts``, in order); {} for one that is gone."""
    out = []
    for doc in run.meta.get("parts") or []:
        where = run.path / doc["dir"] if isinstance(doc, Mapping) and doc.get("dir") else None
        try:
            out.append(_read_meta(where) if where is not None else {})
        except UsageError:
            out.append({})
    return out


def mark_failed(path: str | Path, reason: str) -> bool:
    """Mark a run that its ranks left ``running`` as ``failed`` with `reason`; True if it was changed.

    For the process that started the launcher: when a rank crashes or is killed, the
    launcher ends the others at once and none of them can record why. A run whose own
    ranks already set a final status (complete, interrupted, failed) is left alone.
    """
    meta_path = Path(path) / "run.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    if not isinstance(meta, dict) or meta.get("schema") not in READABLE_SCHEMAS or meta.get("status") != "running":
        return False
    try:
        rows = open_run(path).rows
    except UsageError:
        rows = []
    meta.update(status="failed", failure=reason, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                finished_cases=len(rows))
    try:
        write_json_atomic(meta_path, meta)
    except WriteError:  # a full or read-only disk: the run keeps its last state (a resume may take it over)
        return False
    return True


def lab_block(meta: Mapping) -> dict | None:
    """The emulated-lab settings of a run (``lab`` in its provenance), if any."""
    lab = meta.get("lab")
    if lab is None and isinstance(meta.get("provenance"), Mapping):
        lab = meta["provenance"].get("lab")
    return lab if isinstance(lab, Mapping) else None

