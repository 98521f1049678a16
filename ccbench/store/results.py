"""Results on disk: one directory per run, never overwritten, with a schema version.

A run directory holds ``run.json`` (schema, provenance once, configuration, status,
skipped cases), ``cases.jsonl`` (one JSON row per finished case, raw samples included)
and ``cases.csv`` (the same rows without raw samples, one column per parameter).  Rows
are appended and flushed to disk as each case finishes; ``run.json`` is replaced
atomically (write a temporary file, then rename).  Analyses are written beside these
files, never into them.
"""

import contextlib
import csv
import dataclasses
import functools
import io
import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.store.lock import RunLock

__all__ = ["READABLE_SCHEMAS", "SCHEMA", "Row", "RunWriter", "StoredRow", "free_path", "free_stem", "latest_run",
           "install_run", "make_results_dir", "new_numbered_dir", "new_run_dir", "reopen_tables", "resolve_run",
           "started_at", "write_json_atomic", "WriteError"]

#: The schema a run is written with.  /2: cases.jsonl is strict JSON (null where /1 wrote NaN or Infinity).
SCHEMA = "ccbench.run/2"
#: The schemas this ccbench reads (a /1 run's NaN is read back as it was).
READABLE_SCHEMAS = ("ccbench.run/1", SCHEMA)
STATUSES = ("running", "complete", "interrupted", "failed")


@functools.cache
def _field_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


class StoredRow:
    """What every stored row type shares: a validity check and the JSON form of cases.jsonl.

    Rows are frozen dataclasses with ``nwrong``, ``flags`` (a tuple), ``samples_s`` (the raw
    samples, a tuple) and ``launches`` / ``launch_samples`` (which launch measured which
    samples: ``samples_s`` is the launches' samples one after the other, ``launch_samples[i]``
    of them from launch ``launches[i]``; both empty for a row of one launch); fields with
    defaults may be absent from older files.
    """

    @property
    def n_launches(self) -> int:
        """How many launches measured this row (1 for a row of one launch)."""
        return max(1, len(self.launches))

    def launch_blocks(self) -> list[tuple[int, tuple[float, ...]]]:
        """[(launch number, its samples)], in launch order; a row of one launch is launch 1."""
        if not self.launches:
            return [(1, tuple(self.samples_s))]
        out, start = [], 0
        for launch, n in zip(self.launches, self.launch_samples, strict=True):
            out.append((launch, tuple(self.samples_s[start:start + n])))
            start += n
        return out

    @property
    def ok(self) -> bool:
        """True when every element was right."""
        return self.nwrong == 0

    def to_dict(self, raw: bool = True) -> dict:
        """The row as a JSON-ready dict (without raw samples if raw is False).

        Field by field, not ``dataclasses.asdict`` (a deep copy, 85% of an import's time): the values are
        numbers, strings, tuples (made lists) and flat dicts (copied)."""
        d = {name: getattr(self, name) for name in _field_names(type(self))}
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
            elif isinstance(v, dict):
                d[k] = dict(v)
        if not raw:
            del d["samples_s"]
        return d

    def to_json(self) -> str:
        """The row as one line of strict JSON (RFC 8259): a number that is not finite is null."""
        return json.dumps({k: _strict(v) for k, v in self.to_dict().items()}, allow_nan=False)

    def csv_dict(self) -> dict:
        """The row as one CSV line: flags joined by ';', a dict field (a Row's settings) as 'NAME=value;...'."""
        d = self.to_dict(raw=False)
        d["flags"] = ";".join(self.flags)
        for k, v in d.items():
            if isinstance(v, dict):
                d[k] = ";".join(f"{name}={value}" for name, value in v.items())
            elif isinstance(v, (list, tuple)):
                d[k] = ";".join(str(x) for x in v)
        return d

    @classmethod
    def from_dict(cls, d: dict):
        """Build (and validate) a row from a stored dict."""
        fields = dataclasses.fields(cls)
        required = {f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        missing = required - set(d)
        if missing:
            raise ValueError(f"missing columns {sorted(missing)}")
        kw = {k: v for k, v in d.items() if k in {f.name for f in fields}}
        for name in ("flags", "samples_s", "launches", "launch_samples"):
            kw[name] = tuple(kw.get(name, ()))
        for f in fields:  # strict JSON writes null for a NaN of a field that is always a number
            if kw.get(f.name, 0) is None and f.type in (float, "float"):
                kw[f.name] = math.nan
        return cls(**kw)


def _strict(v):
    """`v` with every float that is not finite as None (JSON has no NaN nor Infinity)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    if isinstance(v, dict):
        return {k: _strict(x) for k, x in v.items()}
    return v


@dataclass(frozen=True)
class Row(StoredRow):
    """One finished case: parameters, statistics (seconds), bandwidths (GB/s), traffic, checks."""

    collective: str
    algorithm: str
    nbytes: int
    count: int
    dtype: str
    op: str
    in_place: bool
    root: int
    nranks: int
    samples: int
    min_s: float
    median_s: float
    mean_s: float
    p95_s: float
    p99_s: float
    max_s: float
    stddev_s: float
    ci_low_s: float
    ci_high_s: float
    algbw_gbs: float
    busbw_gbs: float
    msgs_max: int | None      # messages sent by the busiest rank (hand-written only)
    bytes_max: int | None     # bytes sent by the busiest rank
    msgs_total: int | None    # messages sent by all ranks
    bytes_total: int | None   # bytes sent by all ranks
    steps_max: int | None     # alpha-count: sequential steps of the busiest rank
    step_bytes_max: int | None  # beta-count: bytes on those steps
    reduced_bytes_max: int | None  # gamma-count: bytes reduced locally
    nwrong: int
    stop_reason: str
    sync: str
    flags: tuple[str, ...] = ()
    # environment that forced a native:<alg> variant of the library (empty otherwise;
    # absent from rows written before it existed)
    settings: dict[str, str] = field(default_factory=dict)
    samples_s: tuple[float, ...] = field(default=(), repr=False)
    # launch numbers and their sample counts (StoredRow); empty for a row of one launch
    launches: tuple[int, ...] = ()
    launch_samples: tuple[int, ...] = ()
    # how a sample was taken: "per-call" (one synchronised call) or "batched:K" (K back-to-back
    # calls, the time / K); absent from rows written before it existed, which were per-call
    timing: str = "per-call"
    # OSU's "Min/Avg/Max Latency" and IMB's t_min/t_avg/t_max: each rank's mean time, then the
    # min, mean and max over ranks (None in rows written before they were recorded)
    rank_mean_min_s: float | None = None
    rank_mean_avg_s: float | None = None
    rank_mean_max_s: float | None = None
    p90_s: float | None = None
    # which loop timed the calls: "python" (ccbench's timing loop) or "compiled" (its C loop, `--loop
    # compiled`, the library's own collectives only); absent from rows written before it existed, which were Python
    loop: str = "python"
    # the buffers the timed calls used: "warm" (the same ones every call) or "cold" (the next of several sets each
    # call, none in cache: IMB's -off_cache); absent from rows written before it existed, which were warm
    buffers: str = "warm"
    # the count distribution of a v-collective's blocks (`ccbench.core.counts`: uniform, heavy:F, zipf:S, moe:E,K,CF,T,
    # weights:...); "uniform" for the even collectives, and in rows written before it existed
    counts: str = "uniform"
    # a persistent algorithm's set-up (``<coll>_init``, or its persistent point-to-point requests), made once per
    # case outside the timed calls: its time, the maximum over ranks (seconds); None for the others, and in rows
    # written before it existed
    setup_s: float | None = None

    def __post_init__(self):
        if self.nbytes < 0 or self.count < 0 or self.nranks < 1 or self.nwrong < 0:
            raise ValueError(f"invalid row {self.collective}/{self.algorithm}: negative field")
        if self.samples != len(self.samples_s):
            raise ValueError("samples does not match the raw samples kept")
        check_launches(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        """Build (and validate) a row from a stored dict; `settings` absent from older rows."""
        return super().from_dict({**d, "settings": dict(d.get("settings") or {})})



def check_launches(row) -> None:
    """Refuse a row whose launch fields do not split its samples (StoredRow)."""
    if len(row.launches) != len(row.launch_samples):
        raise ValueError("launches and launch_samples differ in length")
    if row.launches and sum(row.launch_samples) != len(row.samples_s):
        raise ValueError("launch_samples does not add up to the raw samples kept")
    if len(set(row.launches)) != len(row.launches):
        raise ValueError("a launch appears twice in one row")


CSV_COLUMNS = [f.name for f in dataclasses.fields(Row) if f.name != "samples_s"]


class WriteError(CCBenchError):
    """A file of a run could not be written (a full disk, a read-only or vanished folder): one line, no traceback."""

    def __init__(self, message: str, strerror: str | None = None) -> None:
        super().__init__(message)
        self.strerror = strerror or message


def write_json_atomic(path: Path, data: dict) -> None:
    """Replace `path` with `data` as strict JSON (a number that is not finite is null): write a temporary file,
    fsync, rename."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            json.dump(_strict(data), f, indent=2, sort_keys=False, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, a read-only or vanished folder: the old file stays, no temporary one
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise WriteError(f"cannot write {path}: {exc.strerror}", exc.strerror) from None


def free_stem(folder: Path, stem: str, suffixes=("",)) -> str:
    """The first ``stem``, ``stem-2``, ... for which no ``name + suffix`` exists in `folder` (a set of files
    written together, e.g. ``fits.json`` + ``fits.csv``, gets one number)."""
    for k in range(1, 10_000):
        base = stem if k == 1 else f"{stem}-{k}"
        if not any((folder / f"{base}{s}").exists() for s in suffixes):
            return base
    raise CCBenchError(f"too many {stem}* in {folder}")


def free_path(folder: Path, stem: str, suffix: str = "") -> Path:
    """The first ``stem``, ``stem-2``, ... (+ suffix) that does not exist in `folder`."""
    return folder / (free_stem(folder, stem, (suffix,)) + suffix)


def new_numbered_dir(folder: Path, stem: str, what: str = "a directory") -> Path:
    """Create and return a new directory ``stem``, ``stem-2``, ... in `folder`, never an existing one."""
    for _ in range(100):
        p = free_path(folder, stem)
        try:
            p.mkdir()
            return p
        except FileExistsError:  # made by someone else in between: take the next name
            continue
        except OSError as exc:
            raise UsageError(f"cannot create {what} in {str(folder)!r}: {exc.strerror}") from None
    raise CCBenchError(f"cannot find a free name for {stem} in {folder}")


def _check_name(name: str, what: str) -> None:
    """Refuse a user-given part of a directory name holding a path separator or a control character.

    Shell metacharacters (``;``, ``$``, ``*``, quotes, spaces) are left alone: the name is only
    ever a path component, never passed to a shell.
    """
    for ch in name:
        if ch == os.sep or ch == os.altsep:
            raise UsageError(f"{what} {name!r} cannot name a run directory: it holds the path separator {ch!r}")
        if ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0:
            raise UsageError(f"{what} {name!r} cannot name a run directory: it holds the control character {ch!r}")


def make_results_dir(root: Path) -> None:
    """Create the results directory `root` and its parents; one clear line where it cannot be made or written."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"results directory {str(root)!r} cannot be created: {exc.strerror}") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise UsageError(f"results directory {str(root)!r} is not writable")


def new_run_dir(root: str | Path, nranks: int, tag: str = "") -> Path:
    """Create a new, uniquely named run directory under `root` (never reuses a name); `tag` is checked first."""
    _check_name(tag, "tag")
    root = Path(root)
    make_results_dir(root)
    host = socket.gethostname().split(".")[0] or "host"
    stem = time.strftime("%Y%m%d-%H%M%S") + f"_{host}_np{nranks}" + (f"_{tag}" if tag else "")
    return new_numbered_dir(root, stem, "a run")


class RunWriter:
    """Rank 0's writer of one run directory."""

    def __init__(self, path: Path, meta: dict, rows: int = 0, columns: list[str] | None = None,
                 lock: RunLock | None = None) -> None:
        self.path = path
        # one writer of a run at a time (`lock`: taken already, by a resume before it reads the tables)
        self._lock = lock if lock is not None else RunLock(path).acquire()
        self.meta = dict(meta, schema=SCHEMA, status="running")
        write_json_atomic(path / "run.json", self.meta)
        record = os.environ.get("CCBENCH_RUN_RECORD")
        if record:  # the process that started the launcher marks the run failed if the job dies
            Path(record).write_text(str(path))
        # the tables are written through their descriptors, whole rows at a time, so that a failed write can be
        # cut back to the last whole row (no buffered remainder left to flush later)
        self._columns = columns or CSV_COLUMNS  # another row type (a workload's) brings its own columns
        try:
            self._fds = [os.open(path / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                         for name in ("cases.jsonl", "cases.csv")]
            if os.lseek(self._fds[1], 0, os.SEEK_END) == 0:
                os.write(self._fds[1], self._csv_text([], header=True))
        except OSError as exc:
            self._lock.release()
            raise WriteError(f"cannot write {path}: {exc.strerror}", exc.strerror) from None
        self.rows = rows

    def _csv_text(self, rows, header: bool = False) -> bytes:
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=self._columns)
        if header:
            w.writeheader()
        for row in rows:
            w.writerow(row.csv_dict())
        return buf.getvalue().encode()

    def append(self, row: Row) -> None:
        """Append one finished case to both tables and push it to disk; on a write error (a full disk) both tables
        are cut back to their rows so far (no torn line) and one `WriteError` says how many were kept."""
        self._write([row])

    def extend(self, rows) -> None:
        """Append many rows and push them to disk once (an import: the rows exist already, nothing is measured)."""
        self._write(list(rows))

    def _write(self, rows: list) -> None:
        texts = ["".join(r.to_json() + "\n" for r in rows).encode(), self._csv_text(rows)]
        sizes = [os.lseek(fd, 0, os.SEEK_END) for fd in self._fds]
        try:
            for fd, data in zip(self._fds, texts, strict=True):
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
        except OSError as exc:
            for fd, size in zip(self._fds, sizes, strict=True):
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
            raise WriteError(f"cannot write {self.path}: {exc.strerror}; {self.rows} finished rows kept",
                             exc.strerror) from None
        self.rows += len(rows)

    def update(self, **fields) -> None:
        """Update run.json atomically with new fields (status, end time, ...)."""
        if "status" in fields and fields["status"] not in STATUSES:
            raise ValueError(fields["status"])
        self.meta.update(fields)
        write_json_atomic(self.path / "run.json", self.meta)

    def close(self) -> None:
        """Close the tables and give the run's lock back (a second call does nothing)."""
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lock.release()


def reopen_tables(path: Path, rows: list, columns: list[str] | None = None) -> None:
    """Make a run's tables ready to append to again (a resume): keep the lines of `rows` only, rebuild cases.csv.

    `rows` are the first rows of cases.jsonl as ``ccbench.store.run.open_run`` read them: what follows them (a line
    torn by a crash, rows of an item left unfinished) is cut off, and a whole last row whose newline was not
    written gets it.  Blank lines between the kept rows stay.  The JSON Lines file is the record (it has the raw
    samples); cases.csv (`columns`, by default a sweep's) is rebuilt from `rows` atomically, so a CSV line torn by
    the same crash disappears too.
    """
    jsonl = path / "cases.jsonl"
    if jsonl.exists():
        data = jsonl.read_bytes()
        end, kept = 0, 0
        while kept < len(rows):
            nl = data.find(b"\n", end)
            if nl < 0:  # a whole last row whose newline was not written: finish its line
                data += b"\n"
                with open(jsonl, "ab") as f:
                    f.write(b"\n")
                nl = len(data) - 1
            if data[end:nl].strip():
                kept += 1
            end = nl + 1
        if end < len(data):
            with open(jsonl, "r+b") as f:
                f.truncate(end)
    tmp = path / f".cases.csv.tmp{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns or CSV_COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(r.csv_dict())
    os.replace(tmp, path / "cases.csv")


def install_run(written: Path, dest: Path) -> None:
    """Put the run written whole in the folder `written` (a merge of launches) in place of `dest`'s tables and
    run.json, run.json last (it says the tables are whole), and remove `written`."""
    for name in ("cases.jsonl", "cases.csv", "run.json"):
        os.replace(written / name, dest / name)
    written.rmdir()


def started_at(run_dir: Path) -> float | None:
    """When a run started, in seconds since the epoch: run.json's ``start_time`` (an imported run's is its import
    time); None where it has none that can be read."""
    try:
        meta = json.loads((run_dir / "run.json").read_text())
        return datetime.strptime(meta["start_time"], "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (OSError, ValueError, TypeError, KeyError):
        return None


def latest_run(results_dir: str | Path = "results") -> Path:
    """The run under `results_dir` that started last (`started_at`; ties and runs without a start time by name).

    Not the newest file: reading a run writes nothing into it, but a copy, a resume or a
    file added by hand would change a directory's time, never its start.
    """
    root = Path(results_dir)
    runs = [d for d in root.glob("*") if (d / "run.json").is_file()] if root.is_dir() else []
    if not runs:
        raise UsageError(f"no runs under {str(root)!r}")

    def key(d: Path) -> tuple:
        t = started_at(d)
        return (t is not None, t or 0.0, d.name)

    return max(runs, key=key)


def resolve_run(run: str | Path, results_dir: str | Path = "results") -> Path:
    """A run directory from a path, a name under `results_dir`, or ``latest`` (`latest_run`)."""
    p = Path(run)
    if str(run) == "latest":
        return latest_run(results_dir)
    for cand in (p, Path(results_dir) / p):
        if cand.is_dir():
            return cand
        if cand.is_file() and cand.name in ("run.json", "cases.jsonl", "cases.csv"):
            return cand.parent
    raise UsageError(f"no run at {str(run)!r} (give a run directory, its name under "
                     f"{str(results_dir)!r}, or latest)")



