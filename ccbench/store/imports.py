"""Results of other benchmarks read into ccbench runs: OSU, IMB-MPI1, nccl-tests and a plain CSV.

An imported run is an ordinary sweep run directory (``run.json`` + ``cases.jsonl`` +
``cases.csv``) whose rows carry the other tool's summary statistics, so that ``show``,
``compare``, ``fit``, ``report`` and ``export`` take it.  OSU, IMB and nccl-tests rows have no
raw samples (``compare`` leaves such cases untested) and the statistics are the tool's own:

* OSU (``osu_allreduce``, ``osu_bcast``, ... and ``osu_latency``; with or without ``-f``; the v-tests and the
  persistent tests too, as ``native-persistent``; not the non-blocking tests, which time overlap): its
  "Avg Latency(us)" (each rank's mean, averaged over ranks) becomes the row's typical time
  (``median_s``, flagged ``imported``) and ``rank_mean_avg_s``; "Min/Max Latency(us)" with
  ``-f`` become ``rank_mean_min_s``/``rank_mean_max_s``; a size whose "Validation" (``-c``) is not "Pass"
  is a wrong row (``nwrong`` 1: OSU does not say how many elements); ``osu_latency``'s one-way latency is
  ping-pong.  ``osu_reduce_scatter`` (MPI_Reduce_scatter) is reduce_scatterv, ``osu_reduce_scatter_block``
  reduce_scatter (``OSU_TITLES``).  Sizes: OSU's per-rank block for the scatters, gathers, allgathers and
  all-to-alls, even and v, becomes
  ccbench's whole buffer (x ranks), the block kept in the row's ``count``; the "# Datatype:" line
  gives the dtype (MPI_CHAR: uint8), which compare matches on -- measure ccbench with the same
  ``-t`` to compare.
* IMB-MPI1: every "# Benchmarking NAME" block with its "# #processes = P" line; ``t_avg``
  (each rank's mean over the repetitions, averaged over ranks) is the typical time, ``t_min``
  and ``t_max`` the minimum and maximum over ranks; PingPong's ``t[usec]`` is half a round
  trip already.  IMB's sizes of Allgather, Alltoall, Gather and Scatter (and their v forms) are per rank, as
  OSU's; Reduce_scatter (MPI_Reduce_scatter, equal blocks) is reduce_scatterv;
  IMB reduces MPI_FLOAT (float32) and moves MPI_BYTE (uint8) by default.  A file with several
  process counts gives rows per count in one run, as a ccbench run of several sizes does.
* nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ``broadcast_perf``, ``reduce_perf``,
  ``reduce_scatter_perf``, ``alltoall_perf``, ``gather_perf``, ``scatter_perf``): the text table
  and the ``-J`` JSON file.  Each size gives an out-of-place and an in-place row; the time (each
  rank's mean over ``iters`` back-to-back calls, averaged over ranks) is the typical time and
  ``rank_mean_avg_s``, the row's timing ``batched:iters*agg_iters``.  nccl-tests' ``size`` is
  ``max(send, receive)`` bytes per rank (``common.cu``): the buffer of allreduce, bcast and
  reduce, the gathered receive buffer of allgather and gather, the send buffer of
  reduce-scatter, scatter and alltoall -- the total array S of nccl-tests'
  ``doc/PERFORMANCE.md`` ("S is the size in bytes of the total array ... ``sendcount*n``" for
  allgather, ``recvcount*n`` for reduce-scatter), which is ccbench's ``nbytes`` unchanged; its
  ``count`` (elements per rank's block where per rank) is ccbench's ``count``.  Ranks: the
  ``#  Rank`` lines (JSON: the processes listed x ``nthreads`` x ``ngpus``), else the given
  process count x nThread x nGpus.  ``sendrecv_perf`` is refused: every rank sends to its
  right neighbour while receiving from its left one, concurrently, which is not ccbench's
  ping-pong (a round trip between two ranks, the others idle).
* CSV (``parse_csv``): a header row, then one row per sample or per summary with columns
  ``collective, algorithm, nranks, nbytes, time_s`` and optionally ``dtype, op, launch,
  sample, nodes, ppn``.  ``time_s`` is seconds per call (ping-pong: one way, half the round
  trip).  Without ``launch`` and ``sample`` each case has one row, its typical time; with
  ``sample`` the rows of a case are its raw samples (``ccbench.core.stats.summarize``); with
  ``launch`` the rows of one launch are that launch's samples (one summary value each when
  there is no ``sample`` column) and the case becomes one row pooled over launches
  (``ccbench.store.launches.pool_launches``: the launch-level statistics of a replicated run).
  Algorithm names are the registry's, ``native`` or ``native:<alg>``; other names are kept
  (and not modelled).  Several rank counts give rows per count in one run, as IMB does.

Rows whose algorithm has a closed-form cost carry its terms (``steps_max``, ``step_bytes_max``,
``reduced_bytes_max``: the busiest rank's alpha, beta and gamma counts, where a measured row
carries its counted traffic) through `with_model_terms`, so that ``fit`` and ``predict --from``
work on imported runs.  The cost comes in as a function: this stage sits below the algorithms.

Formats as the tools print them (OMB 7.x ``print_preamble``/``print_stats``; IMB 2021
``IMB_output``; nccl-tests ``src/common.cu`` and ``src/util.cu``); parsers are tolerant of
extra columns and comment lines, and refuse a file that is none of these with one line, and a result line cut
short: fewer values than its columns, or the file's last line without a line end (a number cut mid-way reads as a
number all the same).  A CSV's sizes are whole elements of its dtype (whole blocks of P elements where the size
covers P blocks), as a sweep's are.
`import_files` streams: OSU files and CSVs are read line by line, every number checked as it comes
(IMB and nccl-tests files, small, whole: `check_rows`), and the rows written as they are read into a
folder aside, pushed to disk once and renamed into place when every file is complete; a refused
file leaves nothing behind.  Pure: no MPI.
"""

import contextlib
import csv
import dataclasses
import glob
import hashlib
import io
import itertools
import json
import math
import operator
import os
import re
import shutil
import signal
import socket
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import DTYPES, OPS
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.stats import summarize
from ccbench.core.units import MAX_SIZE, MAX_TIME_S, MIN_TIME_S, format_size
from ccbench.core.units import is_time as _is_time
from ccbench.core.version import __version__
from ccbench.store.launches import pool_launches
from ccbench.store.results import CSV_COLUMNS, Row, RunWriter, WriteError, _check_name, make_results_dir, new_run_dir

__all__ = ["CSV_OPTIONAL", "CSV_REQUIRED", "FORMATS", "IMPORTED", "OSU_PERSISTENT", "OSU_TITLES", "PER_RANK", "Parsed",
           "import_files", "parse_csv", "parse_imb", "parse_nccl_tests", "parse_osu", "sniff", "with_model_terms"]

#: Flag of an imported row: its statistics are the other tool's, without raw samples.
IMPORTED = "imported"
#: Collectives whose OSU/IMB size is one rank's block (ccbench's size is P blocks): the gathers, the scatters and
#: the all-to-alls, even and v (OSU's v-tests give every block the same size).
PER_RANK = frozenset({"scatter", "gather", "allgather", "alltoall", "scatterv", "gatherv", "allgatherv", "alltoallv"})
#: Each collective's OSU test, as its header names it ("# OSU MPI <title> Latency Test": OMB's osu_<name>.c, 5.x-7.x).
#: OSU's osu_reduce_scatter calls MPI_Reduce_scatter (ccbench's reduce_scatterv, its blocks equal) and
#: osu_reduce_scatter_block MPI_Reduce_scatter_block (ccbench's reduce_scatter).
OSU_TITLES = {"pingpong": "Latency", "barrier": "Barrier", "bcast": "Broadcast", "scatter": "Scatter",
              "gather": "Gather", "allgather": "Allgather", "reduce": "Reduce",
              "reduce_scatter": "Reduce_scatter_block", "allreduce": "Allreduce",
              "alltoall": "All-to-All Personalized Exchange", "allgatherv": "Allgatherv", "gatherv": "Gatherv",
              "scatterv": "Scatterv", "reduce_scatterv": "Reduce_scatter",
              "alltoallv": "All-to-Allv Personalized Exchange"}
#: A persistent OSU test ("# OSU MPI Broadcast Persistent Latency Test", OMB 7.3+: MPI_<coll>_init once, then Start
#: and Wait per call) is ccbench's ``native-persistent``, timed the same way.
OSU_PERSISTENT = "native-persistent"

_OSU_NAMES = {**{t.lower(): c for c, t in OSU_TITLES.items()},
              # the short names of older headers, and the spellings of hand-made ones
              "bcast": "bcast", "all-to-all": "alltoall", "alltoall": "alltoall", "alltoallv": "alltoallv",
              "all-to-allv": "alltoallv", "reduce-scatter": "reduce_scatterv"}
#: MPI datatypes as OSU's "# Datatype:" line names them, as ccbench's dtypes.
_DTYPES = {"MPI_CHAR": "uint8", "MPI_BYTE": "uint8", "MPI_INT": "int32", "MPI_FLOAT": "float32",
           "MPI_DOUBLE": "float64", "MPI_LONG": "int64"}
#: IMB-MPI1's benchmarks by ccbench collective: Reduce_scatter calls MPI_Reduce_scatter (equal blocks), as OSU's.
_IMB_NAMES = {"pingpong": "pingpong", "allreduce": "allreduce", "bcast": "bcast", "reduce": "reduce",
              "allgather": "allgather", "alltoall": "alltoall", "gather": "gather", "scatter": "scatter",
              "reduce_scatter_block": "reduce_scatter", "barrier": "barrier", "allgatherv": "allgatherv",
              "alltoallv": "alltoallv", "gatherv": "gatherv", "scatterv": "scatterv",
              "reduce_scatter": "reduce_scatterv"}


@dataclass(frozen=True)
class Parsed:
    """What a file held: the tool and its version line, options seen in its header, and the rows (`import_files`:
    read back from the stored run when asked for)."""

    tool: str
    version: str
    options: dict
    rows: Sequence[Row]

    @property
    def modelled_rows(self) -> int:
        """How many of the rows carry model terms (`with_model_terms`)."""
        modelled = getattr(self.rows, "modelled", None)
        return modelled if modelled is not None else sum(r.steps_max is not None for r in self.rows)

    @property
    def wrong_rows(self) -> int:
        """How many of the rows the tool itself found wrong (OSU's -c "Fail", nccl-tests' #wrong, IMB's errors)."""
        wrong = getattr(self.rows, "wrong", None)
        return wrong if wrong is not None else sum(r.nwrong > 0 for r in self.rows)


def _row(collective: str, nbytes: int, count: int, nranks: int, avg_s: float, lo: float | None,
         hi: float | None, dtype: str = "uint8", *, op: str | None = None, in_place: bool = False, root: int = 0,
         nwrong: int = 0, timing: str = "per-call", algorithm: str = "native") -> Row:
    factor = COLLECTIVES[collective].busbw_factor(nranks) if collective != "barrier" else 0.0
    algbw = nbytes / avg_s / 1e9 if avg_s > 0 else 0.0
    if op is None:
        op = "sum" if COLLECTIVES[collective].reduction else "none"
    return Row(collective=collective, algorithm=algorithm, nbytes=nbytes, count=count, dtype=dtype,
               op=op, in_place=in_place, root=root, nranks=nranks,
               samples=0, min_s=lo if lo is not None else avg_s, median_s=avg_s, mean_s=avg_s, p95_s=avg_s,
               p99_s=avg_s, max_s=hi if hi is not None else avg_s, stddev_s=float("nan"), ci_low_s=avg_s,
               ci_high_s=avg_s, algbw_gbs=algbw, busbw_gbs=algbw * factor, msgs_max=None, bytes_max=None,
               msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None, reduced_bytes_max=None,
               nwrong=nwrong, stop_reason=IMPORTED, sync="barrier", flags=(IMPORTED,), timing=timing,
               rank_mean_min_s=lo, rank_mean_avg_s=avg_s, rank_mean_max_s=hi)


def _size(collective: str, size: int, nranks: int) -> int:
    return size * nranks if collective in PER_RANK else size


def _count(collective: str, nbytes: int, dtype: str, nranks: int) -> int:
    """A row's ``count`` as a sweep's row has it (elements per block where ccbench's size is P blocks: the gathers,
    scatters, all-to-alls and reduce-scatters), from its ccbench size in bytes."""
    return COLLECTIVES[collective].count_for(nbytes, DTYPES[dtype].itemsize, nranks)


_NOT_A_TIME = f"is not a time (a finite number of seconds from {MIN_TIME_S:g} to {MAX_TIME_S:g})"


def _time_us(text: str, at: str, column: str) -> float:
    """A time in microseconds as another tool printed it, in seconds: finite and positive, else one clear error."""
    try:
        t = float(text) * 1e-6
    except ValueError:
        raise UsageError(f"{at}: {column} {text!r} is not a number") from None
    if not _is_time(t):
        raise UsageError(f"{at}: {column} {text!r} us {_NOT_A_TIME}")
    return t


_ENDED = ("\n", "\r")


def _cut_short(where: str, n: int) -> UsageError:
    """The refusal of a result line at the end of a file without a line end: a file cut short mid-line (a killed
    job, a full disk, a copy of a file still being written) may have lost the end of its last number, which reads
    as a number all the same (OSU's "90.12" cut to "90")."""
    return UsageError(f"{where}, line {n}: the last line has no line end: the file looks cut short (end the line if "
                      "it is whole)")


def _check_last_line(text: str, where: str) -> None:
    """Refuse a whole file whose last line is a result (it starts with a number) without a line end."""
    if text and not text.endswith(_ENDED):
        lines = text.splitlines()
        if lines[-1].split()[:1] and lines[-1].split()[0].isdigit():
            raise _cut_short(where, len(lines))


_OSU_HEAD = re.compile(r"^#\s*OSU MPI(?:-\w+)?\s+(.+?)\s+(?:Latency\s+)?Test(?:\s+v?([\d.]+))?")
_OSU_OPTION = re.compile(r"^#\s*(Datatype|Root|Window size|Number of processes)\s*:\s*(\S+?)\.?\s*$")
_OSU_PROCS = re.compile(r"Number of processes\s*:\s*(\d+)")


class _OsuReader:
    """An OSU output read line by line (module docstring): its header, then one record per result line, every
    number checked at the door as it comes (a time within bounds, a size up to ``MAX_SIZE``, each size once).

    The header (the "# OSU MPI ... Test" line, "# Datatype:", "# Number of processes:") comes before the
    results; a second header that would change what the rows before it say is refused.  With `from_file`
    the rank count is the file's own "Number of processes", else `nranks` (``--nranks``); without it
    `nranks` is the rank count.
    """

    def __init__(self, where: str, nranks: int | None, *, from_file: bool) -> None:
        self.where, self.nranks, self.from_file = where, nranks, from_file
        self.head: re.Match | None = None
        self.collective = ""
        self.algorithm = "native"  # OSU_PERSISTENT for a persistent test
        self.options: dict[str, str] = {}
        self.procs: int | None = None
        self.p = 0              # the rank count of every row, known at the first result line
        self.dtype = "uint8"
        self.columns: list[str] | None = None
        self._cols: tuple | None = None  # (values per line, avg, min, max indexes; -1: no such column)
        self.sizeless = False  # osu_barrier's lines: times without a size (read as size 0)
        self._valid = -1  # the index of OSU's "Validation" column (-c), -1 without one
        self.failed: set[int] = set()  # the sizes (ccbench's nbytes) whose validation OSU printed as not "Pass"
        self.started = False

    @property
    def version(self) -> str:
        """The header's "# OSU MPI ... Test vX" line."""
        return self.head.group(0).lstrip("# ").strip() if self.head else ""

    def _other(self, line: str, n: int) -> None:
        """A line that is not a result: the header's test, options and columns."""
        s = line.strip()
        if not s.startswith("#"):
            if m := _OSU_PROCS.search(line):
                self._procs(int(m.group(1)), n)
            return
        head = _OSU_HEAD.match(line)
        if head is not None:
            if self.head is None:
                self.head = head
                words = head.group(1).lower().split()  # the title, "Latency Test" left out (_OSU_HEAD)
                if words[:1] == ["non-blocking"]:
                    raise UsageError(f"{self.where}: OSU test {head.group(1)!r} times a non-blocking collective "
                                     "beside computation (Overall, Compute, Pure Comm.): import its blocking test")
                if "persistent" in words:
                    self.algorithm = OSU_PERSISTENT
                title = " ".join(w for w in words if w != "persistent")
                collective = _OSU_NAMES.get(title) or _OSU_NAMES.get(title.rpartition(" ")[2])
                if collective is None:
                    raise UsageError(f"{self.where}: OSU test {head.group(1)!r} is not a collective ccbench knows")
                self.collective = collective
            elif self.started and head.group(1) != self.head.group(1):
                raise UsageError(f"{self.where}, line {n}: a second OSU output ({head.group(1)!r} after "
                                 f"{self.head.group(1)!r}): import each output as a file of its own")
        option = _OSU_OPTION.match(line)
        if option is not None:
            name, value = option.groups()
            if self.started and name == "Datatype" and value != self.options.get(name, "MPI_CHAR"):
                raise UsageError(f"{self.where}, line {n}: '# Datatype: {value}' after results of "
                                 f"{self.options.get(name, 'MPI_CHAR')}: import each output as a file of its own")
            self.options[name] = value
        if m := _OSU_PROCS.search(line):
            self._procs(int(m.group(1)), n)
        if head is None and "Latency" in s and ("Size" in s or self.collective == "barrier"):
            self.columns = columns = [c.strip().lower() for c in re.split(r"\s{2,}", s.lstrip("#").strip())]
            # osu_barrier's header: "# Avg Latency(us)", then one line of times, no size
            self.sizeless = "size" not in columns
            if self.sizeless:
                self.columns = columns = ["size", *columns]
            index = {c: i for i, c in enumerate(columns)}  # dict(zip(columns, parts)) keeps a name's last value
            avg = next((c for c in ("avg latency(us)", "latency (us)") if c in index),
                       columns[1] if len(columns) > 1 else None)
            self._cols = None if avg is None else (len(columns), index[avg], index.get("min latency(us)", -1),
                                                   index.get("max latency(us)", -1))
            self._valid = index.get("validation", -1)  # OSU's -c: "Pass" or "Fail" a size

    def _procs(self, procs: int, n: int) -> None:
        """A "Number of processes" line: the first one counts; one after the results must agree with them."""
        if not self.started:
            self.procs = procs if self.procs is None else self.procs
        elif self.from_file and self.collective != "pingpong" and procs != self.p:
            raise UsageError(f"{self.where}, line {n}: 'Number of processes: {procs}' after results at {self.p} "
                             "ranks: import each output as a file of its own")

    def _start(self) -> None:
        """The first result line: the header is complete."""
        if self.head is None:
            raise UsageError(f"{self.where}: not an OSU Micro-Benchmarks output (no '# OSU MPI ... Test' line)")
        if self.collective == "pingpong":
            p = 2
        elif self.from_file:
            p = self.procs if self.procs is not None else self.nranks
            if p is None:
                raise UsageError(f"{self.where}: the OSU output does not say how many ranks ran it: give --nranks")
        else:
            p = self.nranks
        if not 1 <= p <= MAX_RANKS:
            raise UsageError(f"{self.where}: {self.collective} at {p} ranks: the rank count is outside 1 .. "
                             f"{MAX_RANKS}")
        self.p = p
        self.dtype = _DTYPES.get(self.options.get("Datatype", "MPI_CHAR"), "uint8")
        self.started = True

    def _bad(self, line: str, n: int) -> None:
        """Raise the one-line refusal of a result line the fast path did not take."""
        at, columns, parts = f"{self.where}, line {n}", self.columns, self._parts(line)
        values = dict(zip(columns, parts, strict=False))
        try:
            int(parts[0])
            avg_col = "avg latency(us)" if "avg latency(us)" in values else (
                "latency (us)" if "latency (us)" in values else columns[1])
            _time_us(values[avg_col], at, avg_col)
            for col in ("min latency(us)", "max latency(us)"):
                if col in values:
                    _time_us(values[col], at, col)
        except (ValueError, IndexError, KeyError):
            pass
        raise UsageError(f"{at}: cannot read the line {line.strip()!r}")

    def _parts(self, line: str) -> list[str]:
        """A line's fields, a result line of osu_barrier's led by its size, 0."""
        parts = line.split()
        return ["0", *parts] if self.sizeless and parts and not parts[0].startswith("#") else parts

    def records(self, lines: Iterable[str]) -> Iterator[tuple[int, int, int, float, float | None, float | None]]:
        """(line, nbytes, per-rank bytes, avg, min, max) of each result line, in seconds; min/max None without
        ``-f``.  One `UsageError` naming the file and line for the first bad one."""
        low, high = MIN_TIME_S, MAX_TIME_S
        # each size once: OSU prints sizes in increasing order, so the sizes so far (and their lines) are kept in
        # two compact arrays, made a dict only when a size comes out of order
        last, sizes, first_line, seen = -1, array("q"), array("q"), None
        mult = 1
        for n, line in enumerate(lines, start=1):
            parts = line.split() if not self.sizeless else self._parts(line)
            if not parts or self._cols is None or not parts[0].isdigit():
                if parts and self.columns is not None and parts[0].isdigit():
                    self._bad(line, n)  # a result under a header without a time column
                self._other(line, n)
                continue
            if not self.started:
                self._start()
                mult = self.p if self.collective in PER_RANK else 1
            width, ia, imin, imax = self._cols
            if len(parts) < width:  # a line cut short (a killed job, a full disk): never a shorter row
                raise UsageError(f"{self.where}, line {n}: {len(parts)} values under {width} columns (a line cut "
                                 "short?)")
            if not line.endswith(_ENDED):  # only the last line of a file can lack one
                raise _cut_short(self.where, n)
            try:
                size = int(parts[0])
                avg = float(parts[ia]) * 1e-6
                lo = float(parts[imin]) * 1e-6 if imin >= 0 else None
                hi = float(parts[imax]) * 1e-6 if imax >= 0 else None
            except ValueError:
                self._bad(line, n)
            if not (low <= avg <= high and (lo is None or low <= lo <= high) and (hi is None or low <= hi <= high)):
                self._bad(line, n)
            nbytes = size * mult
            if nbytes > MAX_SIZE:
                raise UsageError(f"{self.where}, line {n}: {self._case(nbytes)}: the size is outside 0 B .. "
                                 f"{format_size(MAX_SIZE)}")
            if nbytes > last and seen is None:
                last = nbytes
                sizes.append(nbytes)
                first_line.append(n)
            else:
                if seen is None:
                    seen = dict(zip(sizes, first_line, strict=True))
                    sizes = first_line = array("q")
                if nbytes in seen:
                    raise UsageError(f"{self.where}, line {n}: {self._case(nbytes)} ({self.dtype}, {self._op}) "
                                     f"appears twice (lines {seen[nbytes]} and {n}): one file holds one result "
                                     "per case")
                seen[nbytes] = n
            if self._valid >= 0 and parts[self._valid].lower() != "pass":  # OSU found a wrong result: so is the row
                self.failed.add(nbytes)
            yield n, nbytes, size, avg, lo, hi
        if self.head is None:
            raise UsageError(f"{self.where}: not an OSU Micro-Benchmarks output (no '# OSU MPI ... Test' line)")
        if not self.started:
            raise UsageError(f"{self.where}: an OSU header but no result lines")

    @property
    def _op(self) -> str:
        return "sum" if COLLECTIVES[self.collective].reduction else "none"

    def _case(self, nbytes: int) -> str:
        return f"{self.collective}/{self.algorithm} {nbytes} B at {self.p} ranks"

    def parsed(self, rows: Sequence[Row]) -> Parsed:
        return Parsed("OSU Micro-Benchmarks", self.version, self.options, rows)


def parse_osu(text: str, nranks: int, where: str = "file") -> Parsed:
    """An OSU Micro-Benchmarks output (module docstring), every number checked (`_OsuReader`)."""
    reader = _OsuReader(where, nranks, from_file=False)
    rows = [_row(reader.collective, nbytes, _count(reader.collective, nbytes, reader.dtype, reader.p), reader.p, avg,
                 lo, hi, reader.dtype, algorithm=reader.algorithm, nwrong=int(nbytes in reader.failed))
            for _, nbytes, _, avg, lo, hi in reader.records(text.splitlines(keepends=True))]
    return reader.parsed(rows)



def parse_imb(text: str, where: str = "file") -> Parsed:
    """An IMB-MPI1 output, every block of a collective or PingPong (module docstring)."""
    version = re.search(r"Intel\(R\) MPI Benchmarks?\s*([\d.]+[^\n]*)?", text) or re.search(r"IMB-MPI1", text)
    blocks = re.split(r"^#-+\n#\s*Benchmarking\s+", text, flags=re.M)
    if version is None or len(blocks) < 2:
        raise UsageError(f"{where}: not an IMB-MPI1 output (no '# Benchmarking NAME' blocks)")
    _check_last_line(text, where)
    rows = []
    pos = 0
    for block in blocks[1:]:
        start = text.index(block, pos)  # where this block begins in the file, for line numbers
        pos = start + len(block)
        if not block.strip():  # the file ends at "# Benchmarking ": a block cut before its name holds no rows
            continue
        name = block.split()[0]
        collective = _IMB_NAMES.get(name.lower())
        if collective is None:
            continue
        procs = re.search(r"#\s*#processes\s*=\s*(\d+)", block)
        p = int(procs.group(1)) if procs else 2
        header = re.search(r"^\s*#bytes\s+#repetitions\s+(.+)$", block, re.M) or re.search(
            r"^\s*#repetitions\s+(.+)$", block, re.M)
        if header is None:
            continue
        cols = header.group(1).split()
        first = text.count("\n", 0, start) + block.count("\n", 0, header.end()) + 1
        lead = 1 if collective == "barrier" else 2   # #repetitions, or #bytes and #repetitions
        for k, line in enumerate(block[header.end():].splitlines()):
            parts = line.split()
            if not parts or not parts[0].isdigit():
                if parts and parts[0].startswith("#"):
                    break
                continue
            at = f"{where}, line {first + k}"
            if len(parts) < lead + len(cols):  # a row cut mid-line: refused, never dropped or shortened
                raise UsageError(f"{at}: {len(parts)} values under {lead + len(cols)} columns (a line cut short?)")
            size = 0 if collective == "barrier" else int(parts[0])
            values = {c: _time_us(v, at, c) if c.startswith("t") else v
                      for c, v in zip(cols, parts[lead:], strict=False)}
            if "t[usec]" in values:
                avg, lo, hi = values["t[usec]"], None, None
            elif "t_avg[usec]" in values:
                avg, lo, hi = values["t_avg[usec]"], values.get("t_min[usec]"), values.get("t_max[usec]")
            else:
                continue
            # IMB reduces MPI_FLOAT and moves MPI_BYTE (its default datatypes)
            dtype = "float32" if COLLECTIVES[collective].reduction else "uint8"
            nbytes = _size(collective, size, p)
            rows.append(_row(collective, nbytes, _count(collective, nbytes, dtype, p), p, avg, lo, hi,
                             dtype))
    if not rows:
        raise UsageError(f"{where}: IMB blocks, but none of a collective ccbench knows with results")
    return Parsed("IMB-MPI1", version.group(0).strip(), {}, rows)


# --------------------------------------------------------------------------- nccl-tests

#: nccl-tests' programs (without ``_perf``) as ccbench's collectives.
_NCCL_NAMES = {"all_reduce": "allreduce", "all_gather": "allgather", "broadcast": "bcast", "reduce": "reduce",
               "reduce_scatter": "reduce_scatter", "alltoall": "alltoall", "gather": "gather", "scatter": "scatter"}
#: nccl-tests' programs that have no ccbench counterpart, and why.
_NCCL_REFUSED = {
    "sendrecv": "every rank sends to its right neighbour while receiving from its left one, all at once; "
                "ccbench's pingpong is a round trip between two ranks with the others idle",
    "hypercube": "it exchanges with every hypercube neighbour in turn, which no ccbench collective does",
    "alltoallv": "its per-peer counts vary, which ccbench's alltoall (equal blocks) does not model",
}
# longest names first where one contains another (all_reduce before reduce, alltoallv before alltoall)
_NCCL_TEST = re.compile(r"(all_reduce|all_gather|reduce_scatter|broadcast|alltoallv|alltoall|sendrecv|hypercube|"
                        r"gather|scatter|reduce)(?:_perf)?")
#: nccl-tests' type names as ccbench's (numpy's) dtype names.
_NCCL_DTYPES = {"int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32",
                "uint32": "uint32", "int64": "int64", "uint64": "uint64", "half": "float16", "float": "float32",
                "double": "float64", "bfloat16": "bfloat16"}


def _nccl_collective(text: str, where: str) -> tuple[str, str]:
    """(nccl-tests' program, ccbench's collective): the 'Collective test starting' line, a '*_perf' command in
    the file, else the file's name."""
    starting = re.search(r"^#\s*Collective test starting:\s*(\S+)", text, re.M)
    command = re.search(r"\b(\w+_perf)\b", text)
    m = None
    for candidate in (starting and starting.group(1), command and command.group(1), Path(where).name):
        m = _NCCL_TEST.search(Path(candidate).name) if candidate else None
        if m:
            break
    if m is None:
        raise UsageError(f"{where}: cannot tell which nccl-tests program wrote this (no 'Collective test starting' "
                         "line, no '*_perf' command); name the file after it, e.g. all_reduce_perf.txt")
    name = m.group(1)
    if name in _NCCL_REFUSED:
        raise UsageError(f"{where}: {name}_perf has no ccbench counterpart: {_NCCL_REFUSED[name]}")
    return name, _NCCL_NAMES[name]


def _nccl_row(collective: str, nranks: int, size: int, count: int, type_name: str, redop: str, root: str,
              time_us: float, nwrong: float | None, in_place: bool, timing: str) -> Row:
    """One row of nccl-tests: its size is ccbench's nbytes and its count ccbench's count (module docstring)."""
    coll = COLLECTIVES[collective]
    if isinstance(time_us, bool) or not _is_time(time_us * 1e-6):
        raise ValueError(f"time {time_us!r} us {_NOT_A_TIME}")
    if nwrong is not None and (isinstance(nwrong, bool) or not (math.isfinite(nwrong) and 0 <= nwrong == int(nwrong))):
        raise ValueError(f"#wrong {nwrong!r} is not a count of elements")
    r = int(root) if str(root).strip().lstrip("-").isdigit() else -1
    op = redop if coll.reduction and redop not in ("none", "") else ("sum" if coll.reduction else "none")
    return _row(collective, size, count, nranks, time_us * 1e-6, None, None, _NCCL_DTYPES.get(type_name, type_name),
                op=op, in_place=in_place, root=max(r, 0) if coll.rooted else 0,
                nwrong=int(nwrong or 0), timing=timing)


def _wrong(text: str, counted: bool) -> float | None:
    """The #wrong column of nccl-tests' text table; an older "error" column (`counted` False), a largest error,
    must be a number >= 0 and counts no elements (None)."""
    value = float(text)
    if counted:
        return value
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"error {text!r} is not a number >= 0")
    return None


def _nccl_timing(iters, agg) -> str:
    """nccl-tests times `iters` x `agg` back-to-back calls and divides: ccbench's batched timing."""
    return f"batched:{int(iters) * int(agg or 1)}" if iters else "batched"


def _parse_nccl_json(doc: dict, nranks: int | None, where: str) -> Parsed:
    """nccl-tests' ``-J`` file (``src/util.cu``, JSON_FILE_VERSION 2)."""
    config = doc.get("config") or {}
    args = doc.get("args") or []
    name, collective = _nccl_collective("\n".join(str(a) for a in args[:1]) or "", where)
    devices = config.get("devices") or []
    per_proc = int(config.get("nthreads") or 1) * int(config.get("ngpus") or 1)
    # one device record per process (the first of its GPUs), so ranks = processes x threads x GPUs
    P = len(devices) * per_proc if devices else (nranks * per_proc if nranks else None)
    if not P:
        raise UsageError(f"{where}: the nccl-tests JSON lists no devices: give --nranks (the processes launched)")
    timing = _nccl_timing(config.get("iterations"), config.get("aggregated_iterations"))
    rows = []
    for res in doc.get("results") or []:
        try:
            for key, in_place in (("out_of_place", False), ("in_place", True)):
                part = res.get(key)
                if not part:
                    continue
                t = part.get("time", part.get("cpu_time"))
                nwrong = part.get("nwrong")
                rows.append(_nccl_row(collective, P, int(res["size"]), int(res["count"]), str(res.get("type", "")),
                                      str(res.get("redop", "none")), str(res.get("root", "-1")),
                                      t if isinstance(t, bool) else float(t),
                                      nwrong if nwrong is None or isinstance(nwrong, bool) else float(nwrong),
                                      in_place, timing))
        except (KeyError, TypeError, ValueError) as exc:
            why = str(exc) if isinstance(exc, ValueError) and " is not a " in str(exc) else "lacks size, count or time"
            raise UsageError(f"{where}: a result of the nccl-tests JSON {why}: {json.dumps(res)[:120]}") from None
    if not rows:
        raise UsageError(f"{where}: an nccl-tests JSON file without results")
    options = {"test": f"{name}_perf", "args": " ".join(str(a) for a in args),
               "nccl_version": doc.get("nccl_version"), "hosts": sorted({str(d.get("hostname")) for d in devices}),
               "devices": sorted({str(d.get("device_info")) for d in devices})}
    options.update({k: config[k] for k in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor",
                                           "step_bytes", "warmup_iters", "iterations", "aggregated_iterations",
                                           "validation", "graph") if k in config})
    bw = (doc.get("average_bus_bandwidth") or {}).get("bandwidth")
    if bw is not None:
        options["avg_bus_bandwidth_gbs"] = bw
    version = f"nccl-tests JSON v{doc.get('version')} ({name}_perf, NCCL {doc.get('nccl_version')})"
    return Parsed("nccl-tests", version, options, rows)


def parse_nccl_tests(text: str, nranks: int | None = None, where: str = "file") -> Parsed:
    """An nccl-tests output: its text table (out-of-place and in-place) or its ``-J`` JSON (module docstring).

    `nranks` is the number of processes launched, used only where the file lists no ranks.
    """
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(doc, dict) or "results" not in doc:
            raise UsageError(f"{where}: a JSON file, but not nccl-tests' (no 'results')")
        return _parse_nccl_json(doc, nranks, where)
    head = re.search(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)(.*)$", text, re.M)
    table = re.search(r"^#\s*size\s+count\s+type\s+(.*)$", text, re.M)
    if head is None or table is None:
        raise UsageError(f"{where}: not an nccl-tests output (no '# nThread ... nGpus ...' line and "
                         "'# size count type ...' table header)")
    _check_last_line(text, where)
    name, collective = _nccl_collective(text, where)
    per_proc = int(head.group(1)) * int(head.group(2))
    ranks = {int(m.group(1)) for m in re.finditer(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid", text, re.M)}
    P = max(ranks) + 1 if ranks else (nranks * per_proc if nranks else None)
    if not P:
        raise UsageError(f"{where}: the nccl-tests output lists no '#  Rank' lines: give --nranks (the processes "
                         "launched; nccl-tests multiplies them by nThread x nGpus)")
    options = {"test": f"{name}_perf", "nThread": int(head.group(1)), "nGpus": int(head.group(2))}
    for key, value in re.findall(r"(minBytes|maxBytes|warmup iters|agg iters|iters|validation|graph|step):?\s+(\S+)",
                                 head.group(3)):
        options[key] = value
    options["hosts"] = sorted(set(re.findall(r"^#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)", text,
                                             re.M)))
    devices = re.findall(r"^#\s+Rank\s+\d+.*?device\s+\d+\s+\[[^]]*\]\s+(.+?)\s*$", text, re.M)
    if devices:
        options["devices"] = sorted(set(devices))
    bw = re.search(r"^#?\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)", text, re.M)
    if bw:
        options["avg_bus_bandwidth_gbs"] = float(bw.group(1))
    # the parameter columns before the first time: size count type [redop] [root] (older versions lack root)
    params = ["size", "count", "type"] + [c for c in table.group(1).split() if c in ("redop", "op", "root")]
    timing = _nccl_timing(options.get("iters"), options.get("agg iters"))
    # time, algbw, busbw, #wrong out of place, then in place: a line with fewer values was cut short
    values = 4 * max(1, table.group(1).split().count("time"))
    # older versions name the fourth column "error": the largest error seen, not a count of wrong elements
    counted = "error" not in table.group(1).split()
    rows = []
    for line in text[table.end():].splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#") or not parts[0].isdigit():
            continue
        head_cols = dict(zip(params, parts, strict=False))
        rest = parts[len(params):]
        if len(rest) < values:
            raise UsageError(f"{where}: {len(rest)} values after the parameters of the line {line.strip()!r}, under "
                             f"{values} (a line cut short?)")
        try:
            for i, in_place in ((0, False), (4, True)):
                if len(rest) < i + 4:
                    break
                t, _, _, wrong = rest[i:i + 4]
                rows.append(_nccl_row(collective, P, int(head_cols["size"]), int(head_cols["count"]),
                                      head_cols["type"], head_cols.get("redop", head_cols.get("op", "none")),
                                      head_cols.get("root", "-1"), float(t),
                                      None if wrong == "N/A" else _wrong(wrong, counted), in_place, timing))
        except ValueError as exc:
            why = f": {exc}" if " is not a " in str(exc) else ""
            raise UsageError(f"{where}: cannot read the line {line.strip()!r}{why}") from None
    if not rows:
        raise UsageError(f"{where}: an nccl-tests header but no result lines")
    version = re.search(r"^#\s*(nccl-tests version .+?)\s*$", text, re.M)
    return Parsed("nccl-tests", version.group(1) if version else f"nccl-tests {name}_perf (version not printed)",
                  options, rows)


# --------------------------------------------------------------------------- CSV

#: Columns a CSV must have, and those it may have.
CSV_REQUIRED = ("collective", "algorithm", "nranks", "nbytes", "time_s")
CSV_OPTIONAL = ("dtype", "op", "launch", "sample", "nodes", "ppn")
#: The columns that name a case's group (every column but its size, time, launch and sample).
_CSV_GROUP = ("collective", "algorithm", "nranks", "dtype", "op", "nodes", "ppn")


def _csv_int(value: str, column: str, where: str, line: int, low: int = 0) -> int:
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"{where}, line {line}: {column} must be a whole number, got {value!r}") from None
    if n < low:
        raise UsageError(f"{where}, line {line}: {column} must be at least {low}, got {n}")
    return n


def _sample_row(key: tuple, xs: Sequence[float], count: int, *, summary_only: bool = False) -> Row:
    """A row of one launch from its samples (`summary_only`: one summary value, no sample flags)."""
    collective, algorithm, nranks, nbytes, dtype, op = key
    x = np.asarray(xs, dtype=np.float64)
    s = summarize(x)
    flags = (IMPORTED,) if summary_only else (IMPORTED, *s.flags)
    algbw = nbytes / s.median_s / 1e9 if s.median_s > 0 else 0.0
    factor = COLLECTIVES[collective].busbw_factor(nranks) if collective != "barrier" else 0.0
    return Row(collective=collective, algorithm=algorithm, nbytes=nbytes, count=count, dtype=dtype, op=op,
               in_place=False, root=0, nranks=nranks, samples=int(x.size), min_s=s.min_s, median_s=s.median_s,
               mean_s=s.mean_s, p95_s=s.p95_s, p99_s=s.p99_s, max_s=s.max_s, stddev_s=s.stddev_s,
               ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, algbw_gbs=algbw, busbw_gbs=algbw * factor,
               msgs_max=None, bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None,
               step_bytes_max=None, reduced_bytes_max=None, nwrong=0, stop_reason=IMPORTED, sync="unknown",
               flags=flags, samples_s=tuple(float(v) for v in x), p90_s=float(np.percentile(x, 90)))


def _row_csv_summary(key: tuple, t: float, count: int) -> Row:
    """A CSV case given by one summary value: the typical time, no raw samples."""
    collective, algorithm, nranks, nbytes, dtype, op = key
    return dataclasses.replace(_row(collective, nbytes, count, nranks, t, None, None, dtype, op=op),
                               algorithm=algorithm, rank_mean_avg_s=None, sync="unknown")


class _FirstSeen:
    """The values seen so far, to tell a repeat without a set of every value: a compact array while they come in
    increasing order (as files list them), a set only once one comes out of order."""

    __slots__ = ("last", "values", "seen")

    def __init__(self) -> None:
        self.last, self.values, self.seen = -1, array("q"), None

    def once(self, value: int) -> bool:
        """Record `value`; False if it was seen before."""
        if value > self.last and self.seen is None:
            self.last = value
            self.values.append(value)
            return True
        if self.seen is None:
            self.seen, self.values = set(self.values), array("q")
        if value in self.seen:
            return False
        self.seen.add(value)
        return True


class _CsvGroup:
    """The cases of a CSV that share collective, algorithm, rank count, dtype and op: what their rows have in
    common, and the sizes seen so far (to refuse a case twice without a set of every case)."""

    __slots__ = ("collective", "algorithm", "nranks", "dtype", "op", "ppn", "itemsize", "unit", "template", "sizes")

    def __init__(self, collective: str, algorithm: str, nranks: int, dtype: str, op: str, ppn: int | None) -> None:
        self.collective, self.algorithm, self.nranks, self.dtype, self.op = collective, algorithm, nranks, dtype, op
        self.ppn = ppn
        self.itemsize = DTYPES[dtype].itemsize if dtype in DTYPES else 1
        # the sizes a sweep stores are whole elements (whole blocks of P elements where the size covers P blocks):
        # a size is a multiple of `unit`; a barrier's unit is beyond every size, so that its only size is 0
        coll = COLLECTIVES[collective]
        self.unit = MAX_SIZE + 1 if collective == "barrier" else coll.nbytes_for(1, self.itemsize, nranks)
        self.template: tuple | None = None  # (its rows' `_Template` or None, busbw factor), made by an import
        self.sizes = _FirstSeen()

    def key(self, nbytes: int) -> tuple:
        """The case's key: (collective, algorithm, nranks, nbytes, dtype, op)."""
        return self.collective, self.algorithm, self.nranks, nbytes, self.dtype, self.op

    def count(self, nbytes: int) -> int:
        return COLLECTIVES[self.collective].count_for(nbytes, self.itemsize, self.nranks)

    def once(self, nbytes: int) -> bool:
        """Record a size of this group; False if it was seen before."""
        return self.sizes.once(nbytes)


class _Launch:
    """One launch of one case: its times and (with a ``sample`` column) sample numbers, as compact arrays."""

    __slots__ = ("times", "samples")

    def __init__(self) -> None:
        self.times, self.samples = array("d"), _FirstSeen()

    def once(self, sample: int) -> bool:
        """Record a sample number; False if it was seen before."""
        return self.samples.once(sample)


class _CsvReader:
    """A CSV of timings read line by line (module docstring); '#' lines are comments.

    `records` gives each data line's case group, size, time, launch and sample, every value checked as it comes
    (one `UsageError` naming the file, the line and the column); `summaries` the cases of a file without
    ``launch`` and ``sample`` columns one by one, and `rows` those of any file (the samples of every case held
    in compact arrays until the end).  `finish` checks what needs the whole file.
    """

    def __init__(self, lines: Iterable[str], where: str) -> None:
        self.where = where
        self.line = 0  # the file's own number of the line last read
        self._reader = csv.reader(self._kept(lines))
        first = next(self._reader, None)
        if first is None:
            raise UsageError(f"{where}: an empty CSV (a header row and data rows are needed)")
        header = [c.strip() for c in first]
        unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
        missing = [c for c in CSV_REQUIRED if c not in header]
        if missing or unknown:
            what = "; ".join(p for p in (f"missing columns {', '.join(missing)}" if missing else "",
                                         f"unknown columns {', '.join(unknown)}" if unknown else "") if p)
            raise UsageError(f"{where}: {what} (required: {', '.join(CSV_REQUIRED)}; optional: "
                             f"{', '.join(CSV_OPTIONAL)})")
        self.header = header
        self.index = {c: i for i, c in enumerate(header)}  # a column named twice: its last value, as DictReader
        self.has_launch, self.has_sample = "launch" in header, "sample" in header
        self.layout: dict[int, set] = {}   # nranks -> {(nodes, ppn)}
        self._groups: dict[tuple, _CsvGroup] = {}   # the group columns' text -> their group
        self._by_key: dict[tuple, _CsvGroup] = {}   # (collective, algorithm, nranks, dtype, op) -> group
        self.lines_read = 0

    def _kept(self, lines: Iterable[str]) -> Iterator[str]:
        for n, ln in enumerate(lines, start=1):
            c = ln[:1]
            if not c or c == "#" or c.isspace():
                s = ln.strip()
                if not s or s.startswith("#"):
                    continue
            self.line = n
            if not ln.endswith(_ENDED):  # only the last line of a file can lack one
                raise _cut_short(self.where, n)
            yield ln

    def records(self) -> Iterator[tuple[_CsvGroup, int, float, int, int | None, int]]:
        """(group, nbytes, time_s, launch, sample or None, line) of every data line, each value checked."""
        index, width = self.index, len(self.header)
        cells = operator.itemgetter(*[index[c] for c in _CSV_GROUP if c in index])
        ib, it = index["nbytes"], index["time_s"]
        il, isample = index.get("launch"), index.get("sample")
        groups, low, high = self._groups, MIN_TIME_S, MAX_TIME_S
        for rec in self._reader:
            self.lines_read += 1
            if len(rec) == width and (g := groups.get(cells(rec))) is not None:
                # the common line, of a group seen before: its size, time, launch and sample only
                try:
                    nbytes, t = int(rec[ib]), float(rec[it])
                    launch = int(rec[il]) if il is not None else 1
                    sample = int(rec[isample]) if isample is not None else None
                except ValueError:
                    pass
                else:
                    if 0 <= nbytes <= MAX_SIZE and low <= t <= high and launch >= 0 and (
                            sample is None or sample >= 0) and nbytes % g.unit == 0:
                        yield g, nbytes, t, launch, sample, self.line
                        continue
            yield self._line(rec, cells)

    def _line(self, rec: list[str], cells) -> tuple[_CsvGroup, int, float, int, int | None, int]:
        """One data line checked column by column, in the order of its columns' meaning; its group made."""
        where, i, width = self.where, self.line, len(self.header)
        if len(rec) > width:
            raise UsageError(f"{where}, line {i}: more values than the header has columns")
        rec = rec + [""] * (width - len(rec))
        v = {c: rec[k].strip() for c, k in self.index.items()}
        if any(v.get(c, "") == "" for c in CSV_REQUIRED):
            raise UsageError(f"{where}, line {i}: every row needs {', '.join(CSV_REQUIRED)}")
        collective = v["collective"]
        if collective not in COLLECTIVES:
            raise UsageError(f"{where}, line {i}: unknown collective {collective!r}; choose from "
                             f"{', '.join(COLLECTIVES)}")
        nranks = _csv_int(v["nranks"], "nranks", where, i, low=1)
        nbytes = _csv_int(v["nbytes"], "nbytes", where, i)
        try:
            t = float(v["time_s"])
        except ValueError:
            t = math.nan
        if not _is_time(t):
            raise UsageError(f"{where}, line {i}: time_s {v['time_s']!r} {_NOT_A_TIME}")
        launch = _csv_int(v["launch"], "launch", where, i) if self.has_launch else 1
        sample = _csv_int(v["sample"], "sample", where, i) if self.has_sample else None
        nodes = _csv_int(v["nodes"], "nodes", where, i, low=1) if v.get("nodes") else None
        ppn = _csv_int(v["ppn"], "ppn", where, i, low=1) if v.get("ppn") else None
        dtype = v.get("dtype") or "unknown"
        op = v.get("op") or ("sum" if COLLECTIVES[collective].reduction else "none")
        case = f"{collective}/{v['algorithm']} {nbytes} B at {nranks} ranks"
        if nbytes > MAX_SIZE:
            raise UsageError(f"{where}, line {i}: {case}: the size is outside 0 B .. {format_size(MAX_SIZE)}")
        if nranks > MAX_RANKS:
            raise UsageError(f"{where}, line {i}: {case}: the rank count is outside 1 .. {MAX_RANKS}")
        if dtype not in KNOWN_DTYPES:
            raise UsageError(f"{where}, line {i}: {case}: unknown dtype {dtype!r}; ccbench knows "
                             f"{', '.join(sorted(KNOWN_DTYPES))}")
        if op not in KNOWN_OPS:
            raise UsageError(f"{where}, line {i}: {case}: unknown op {op!r}; ccbench knows "
                             f"{', '.join(sorted(KNOWN_OPS))}")
        key = (collective, v["algorithm"], nranks, dtype, op)
        g = self._by_key.get(key)
        if g is None:
            g = self._by_key[key] = _CsvGroup(*key, ppn)
        if nbytes % g.unit:
            what = ("a barrier moves no bytes" if collective == "barrier" else
                    f"not a whole number of {'blocks of ' + str(nranks) + ' x ' if g.unit != g.itemsize else ''}"
                    f"{g.itemsize}-byte {dtype if dtype in DTYPES else 'byte'} elements")
            raise UsageError(f"{where}, line {i}: {case}: {what} (the sizes a sweep stores)")
        self._groups[cells(rec)] = g
        self.layout.setdefault(nranks, set()).add((nodes, ppn))
        return g, nbytes, t, launch, sample, i

    def _twice(self, g: _CsvGroup, nbytes: int, launch: int, sample: int | None, i: int) -> UsageError:
        key = g.key(nbytes)
        hint = ("" if self.has_sample else ": add a 'sample' column for several samples of one case"
                + ("" if self.has_launch else " or a 'launch' column for several launches"))
        return UsageError(f"{self.where}, line {i}: the case {'/'.join(map(str, key[:4]))} B"
                          f"{f' launch {launch}' if self.has_launch else ''}"
                          f"{f' sample {sample}' if self.has_sample else ''} appears twice{hint}")

    def summaries(self) -> Iterator[tuple[_CsvGroup, int, float]]:
        """(group, nbytes, time_s) of each case of a file without ``launch`` and ``sample`` columns, as read."""
        for g, nbytes, t, launch, sample, i in self.records():
            if not g.once(nbytes):
                raise self._twice(g, nbytes, launch, sample, i)
            yield g, nbytes, t

    def rows(self) -> Iterator[Row]:
        """Every case's row, in the order the file first names the cases; with launches or samples, only once
        every line is read and checked (`finish`)."""
        if not (self.has_launch or self.has_sample):
            for g, nbytes, t in self.summaries():
                yield _row_csv_summary(g.key(nbytes), t, g.count(nbytes))
            self.finish()
            return
        cases: dict[tuple, dict[int, _Launch]] = {}  # (group, nbytes) -> launch -> its values
        for g, nbytes, t, launch, sample, i in self.records():
            launches = cases.get((g, nbytes))
            if launches is None:
                launches = cases[(g, nbytes)] = {}
            one = launches.get(launch)
            if one is None:
                one = launches[launch] = _Launch()
            elif sample is None:
                raise self._twice(g, nbytes, launch, sample, i)
            if sample is not None and not one.once(sample):
                raise self._twice(g, nbytes, launch, sample, i)
            one.times.append(t)
        self.finish()
        for (g, nbytes), launches in cases.items():
            key, count = g.key(nbytes), g.count(nbytes)
            if not self.has_launch:
                (one,) = launches.values()
                yield _sample_row(key, one.times, count)
                continue
            yield pool_launches([(n, _sample_row(key, one.times, count, summary_only=not self.has_sample))
                                 for n, one in launches.items()])

    def finish(self) -> None:
        """What needs the whole file: at least one row, one nodes/ppn per rank count."""
        if not self.lines_read:
            raise UsageError(f"{self.where}: a CSV header but no rows")
        for p, seen_layouts in self.layout.items():
            if len(seen_layouts) > 1:
                raise UsageError(f"{self.where}: rows at {p} ranks give different nodes/ppn "
                                 f"{sorted(seen_layouts, key=str)}")

    def parsed(self, rows: Sequence[Row]) -> Parsed:
        options: dict = {"columns": self.header}
        for name, pos in (("nodes", 0), ("ppn", 1)):
            per = {str(p): next(iter(v))[pos] for p, v in sorted(self.layout.items())
                   if next(iter(v))[pos] is not None}
            if per:
                options[name] = per
        return Parsed("CSV", f"CSV with columns {', '.join(self.header)}", options, rows)


def parse_csv(text: str, where: str = "file") -> Parsed:
    """A CSV of timings, one row per sample or per summary (module docstring); '#' lines are comments."""
    reader = _CsvReader(text.splitlines(keepends=True), where)
    rows = list(reader.rows())
    return reader.parsed(rows)


# --------------------------------------------------------------------------- model terms

#: (collective, algorithm, nranks, nbytes, ranks per node or None) -> the closed-form Cost, or None
#: where the algorithm is unknown or has no model.
CostOf = Callable[[str, str, int, int, int | None], object]


def with_model_terms(rows: Sequence[Row], cost: CostOf, ranks_per_node: dict[int, int] | None = None) -> list[Row]:
    """Rows with the closed-form terms of their algorithm's cost where `cost` knows it, others unchanged.

    ``steps_max``, ``step_bytes_max`` and ``reduced_bytes_max`` get the busiest rank's alpha,
    beta and gamma counts (``Cost.alpha``/``beta``/``gamma``, rounded to whole steps and bytes):
    the fields in which a measured row carries its counted traffic, which ``fit`` regresses on.
    """
    out = []
    for r in rows:
        c = cost(r.collective, r.algorithm, r.nranks, r.nbytes, (ranks_per_node or {}).get(r.nranks))
        if c is None or r.steps_max is not None:
            out.append(r)
            continue
        out.append(dataclasses.replace(r, steps_max=int(round(c.alpha)), step_bytes_max=int(round(c.beta)),
                                       reduced_bytes_max=int(round(c.gamma))))
    return out


# --------------------------------------------------------------------------- files and the run

#: The formats `import_files` reads.
FORMATS = ("osu", "imb", "nccl-tests", "csv")


def sniff(path: Path) -> str:
    """``osu``, ``imb``, ``nccl-tests`` or ``csv`` from a file's first lines; one clear error for anything else."""
    try:
        with open(path, errors="replace") as f:
            head = f.read(4000)
    except OSError as exc:
        raise UsageError(f"{str(path)!r} cannot be read: {exc.strerror}") from None
    if re.search(r"^#\s*OSU MPI", head, re.M):
        return "osu"
    if "Intel(R) MPI Benchmark" in head or "IMB-MPI1" in head or "# Benchmarking" in head:
        return "imb"
    if re.search(r"^#\s*nThread\s+\d+\s+nGpus", head, re.M) or (
            head.lstrip().startswith("{") and '"nccl_version"' in head):
        return "nccl-tests"
    first = next((ln for ln in head.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    if {"collective", "time_s"} <= {c.strip() for c in first.split(",")}:
        return "csv"
    raise UsageError(f"{str(path)!r} is not an OSU, IMB-MPI1 or nccl-tests output nor a ccbench CSV; give --format")


#: The most ranks an imported row may have (16 Mi: beyond any machine; a larger count is a typo or garbage).
MAX_RANKS = 1 << 24
#: The element types and operations an imported row may name: ccbench's own, those nccl-tests prints (GPU
#: types, NCCL's avg) and "unknown" (a CSV without a dtype column).
KNOWN_DTYPES = frozenset({*DTYPES, *_NCCL_DTYPES.values(), "unknown"})
KNOWN_OPS = frozenset({*OPS, "none", "avg"})
_TIMES = ("median_s", "min_s", "max_s", "mean_s", "rank_mean_min_s", "rank_mean_avg_s", "rank_mean_max_s")


def check_rows(rows: Sequence[Row], where: str) -> None:
    """Every number of rows an imported file brings, checked at the door: times within `MIN_TIME_S` ..
    `MAX_TIME_S`, sizes up to ``MAX_SIZE``, rank counts from 1 to `MAX_RANKS`, element types and operations ccbench
    knows, and no case twice in one file.  One clear error naming the file and the case.  (OSU files and CSVs are
    checked line by line as they are read, the error naming the line.)"""
    seen: dict[tuple, int] = {}
    for i, r in enumerate(rows, start=1):
        case = f"{r.collective}/{r.algorithm} {r.nbytes} B at {r.nranks} ranks"
        for name in _TIMES:
            t = getattr(r, name, None)
            if t is not None and not _is_time(t):
                raise UsageError(f"{where}: {case}: {name} {t!r} {_NOT_A_TIME}")
        if not 0 <= r.nbytes <= MAX_SIZE:
            raise UsageError(f"{where}: {case}: the size is outside 0 B .. {format_size(MAX_SIZE)}")
        if not 1 <= r.nranks <= MAX_RANKS:
            raise UsageError(f"{where}: {case}: the rank count is outside 1 .. {MAX_RANKS}")
        if r.dtype not in KNOWN_DTYPES:
            raise UsageError(f"{where}: {case}: unknown dtype {r.dtype!r}; ccbench knows "
                             f"{', '.join(sorted(KNOWN_DTYPES))}")
        if r.op not in KNOWN_OPS:
            raise UsageError(f"{where}: {case}: unknown op {r.op!r}; ccbench knows {', '.join(sorted(KNOWN_OPS))}")
        key = (r.collective, r.algorithm, r.nbytes, r.dtype, r.op, r.in_place, r.root, r.nranks)
        if key in seen:
            raise UsageError(f"{where}: {case} ({r.dtype}, {r.op}{', in place' if r.in_place else ''}) appears "
                             f"twice (results {seen[key]} and {i}): one file holds one result per case")
        seen[key] = i


# --------------------------------------------------------------------------- writing a run as it is read

#: The fields in which the summary rows of one file (`_row`: OSU's, a CSV's one value per case) differ from one
#: another, and the slot each fills in a `_Template`: the typical time fills seven fields.
_SUMMARY_FIELDS = {"nbytes": "nbytes", "count": "count", "min_s": "min", "median_s": "avg", "mean_s": "avg",
                   "p95_s": "avg", "p99_s": "avg", "max_s": "max", "ci_low_s": "avg", "ci_high_s": "avg",
                   "algbw_gbs": "algbw", "busbw_gbs": "busbw", "steps_max": "steps", "step_bytes_max": "sbytes",
                   "reduced_bytes_max": "rbytes"}
_OSU_FIELDS = {**_SUMMARY_FIELDS, "rank_mean_min_s": "rmin", "rank_mean_avg_s": "avg", "rank_mean_max_s": "rmax"}
#: The values a row gives `_Template.lines`, in this order: a number, or a float's text (repr); a slot that may be
#: None has two, cases.jsonl's (``null`` or the number) and cases.csv's (``NAME_c``: '' or the number).
_SLOTS = ("nbytes", "count", "avg", "min", "max", "algbw", "busbw", "rmin", "rmin_c", "rmax", "rmax_c",
          "steps", "steps_c", "sbytes", "sbytes_c", "rbytes", "rbytes_c")
_NULLABLE = frozenset({"rmin", "rmax", "steps", "sbytes", "rbytes"})
_NO_TERMS = ("null", "", "null", "", "null", "")  # the last six values of a row without model terms


def _terms(cost: CostOf | None, collective: str, algorithm: str, nranks: int, nbytes: int,
           ppn: int | None) -> tuple | None:
    """A row's model terms as `with_model_terms` gives them (steps, step bytes, reduced bytes), or None."""
    c = cost(collective, algorithm, nranks, nbytes, ppn) if cost is not None else None
    return None if c is None else (int(round(c.alpha)), int(round(c.beta)), int(round(c.gamma)))


def _csv_line(row: Row) -> str:
    """A row's line of cases.csv, as `RunWriter` writes it."""
    buf = io.StringIO(newline="")
    csv.DictWriter(buf, fieldnames=CSV_COLUMNS).writerow(row.csv_dict())
    return buf.getvalue()


class _Template:
    """The cases.jsonl and cases.csv lines of rows that differ from a prototype row only in some fields, as ``%``
    templates made by the encoders `RunWriter` uses (``Row.to_json``, ``csv.DictWriter``): the same bytes as
    writing each row, without building it (a Row takes ~100 us to build and encode, its two lines ~4 us here).
    `make` checks that the templates filled with the prototype's own values give its lines, else gives None."""

    def __init__(self, json_text: str, json_values, csv_text: str, csv_values) -> None:
        self._json, self._json_values, self._csv, self._csv_values = json_text, json_values, csv_text, csv_values

    @classmethod
    def make(cls, proto: Row, fields: Mapping[str, str]) -> "_Template | None":
        """Templates of `proto`'s rows whose `fields` (name -> slot of `_SLOTS`) differ."""
        doc, cells, own_json, own_csv = json.loads(proto.to_json()), proto.csv_dict(), proto.to_json(), _csv_line(proto)
        token = "@@"
        while token in own_json or token in own_csv:  # a mark no value holds
            token += "@"
        for name, slot in fields.items():
            doc[name] = cells[name] = f"{token}{slot}{token}"
        buf = io.StringIO(newline="")
        csv.DictWriter(buf, fieldnames=CSV_COLUMNS).writerow(cells)
        made = []
        for text, marked, suffix in ((json.dumps(doc, allow_nan=False) + "\n", f'"{token}(\\w+){token}"', ""),
                                     (buf.getvalue(), f"{token}(\\w+){token}", "_c")):
            parts = re.split(marked, text)  # text, slot, text, slot, ..., text
            made += ["%s".join(p.replace("%", "%%") for p in parts[::2]),
                     operator.itemgetter(*[_SLOTS.index(slot + suffix if slot in _NULLABLE else slot)
                                           for slot in parts[1::2]])]
        template = cls(*made)
        own = {}
        for name, slot in fields.items():
            v = getattr(proto, name)
            own[slot], own[f"{slot}_c"] = ("null", "") if v is None else (v, v)
        values = tuple(own.get(slot, "") for slot in _SLOTS)
        return template if template.lines(values) == (own_json + "\n", own_csv) else None

    def lines(self, values: tuple) -> tuple[str, str]:
        """A row's two lines (cases.jsonl's, cases.csv's) from its values (`_SLOTS`)."""
        return self._json % self._json_values(values), self._csv % self._csv_values(values)


class _AsideWriter(RunWriter):
    """The run being imported, in its folder written aside: rows (`Row` objects, or their two lines from a
    `_Template`) are buffered and written in blocks of about a megabyte, and the tables fsynced once, when the
    import is complete (`finish`) -- a sweep's writer pushes every row to disk as it is measured, which cost an
    import of 61,726 rows two fsyncs per row.  On any failure the whole folder is abandoned, never cut back."""

    BLOCK = 1 << 20
    #: Rows handed to `RunWriter.extend` at a time.
    ROWS = 4096

    def __init__(self, path: Path, meta: dict) -> None:
        super().__init__(path, meta)
        # a sweep's run.json says "running" from the start; the folder aside is no run until it is complete (a
        # killed import leaves tables and no run.json: `latest` and `open_run` pass it by)
        (path / "run.json").unlink(missing_ok=True)
        self._pending: tuple[list[str], list[str]] = ([], [])
        self._size = 0

    def _write(self, rows: list) -> None:
        pairs = [r if type(r) is tuple else (r.to_json() + "\n", _csv_line(r)) for r in rows]
        if not pairs:
            return
        jsonl, table = zip(*pairs, strict=True)
        self._pending[0].extend(jsonl)
        self._pending[1].extend(table)
        self._size += sum(map(len, jsonl)) + sum(map(len, table))
        self.rows += len(pairs)
        if self._size >= self.BLOCK:
            self._flush()

    def _flush(self) -> None:
        try:
            for fd, parts in zip(self._fds, self._pending, strict=True):
                view = memoryview("".join(parts).encode())
                parts.clear()
                while view:
                    view = view[os.write(fd, view):]
        except OSError as exc:
            raise WriteError(f"cannot write {self.path}: {exc.strerror}", exc.strerror) from None
        self._size = 0

    def finish(self) -> None:
        """Write what is buffered and push both tables to disk, once."""
        self._flush()
        try:
            for fd in self._fds:
                os.fsync(fd)
        except OSError as exc:
            raise WriteError(f"cannot write {self.path}: {exc.strerror}", exc.strerror) from None


class _Out:
    """Where the rows of the files go: the writer, a few thousand at a time (`RunWriter.extend`), and what the run
    needs to know of them (how many carry model terms, the rank counts other than ping-pong's)."""

    def __init__(self, writer: _AsideWriter) -> None:
        self.writer, self.items, self.modelled, self.wrong, self.ranks = writer, [], 0, 0, set()

    @property
    def rows(self) -> int:
        return self.writer.rows + len(self.items)

    def add(self, row: Row) -> None:
        self.modelled += row.steps_max is not None
        self.wrong += row.nwrong > 0
        if row.collective != "pingpong":
            self.ranks.add(row.nranks)
        self.items.append(row)
        if len(self.items) >= self.writer.ROWS:
            self.flush()

    def add_line(self, template, values: tuple, terms) -> None:
        """One summary row written from its `template`'s text (with its model terms, or none)."""
        if terms is None:
            self.items.append(template.lines(values + _NO_TERMS))
        else:
            self.modelled += 1
            steps, sbytes, rbytes = terms
            self.items.append(template.lines(values + (steps, steps, sbytes, sbytes, rbytes, rbytes)))
        if len(self.items) >= self.writer.ROWS:
            self.flush()

    def flush(self) -> None:
        if self.items:
            self.writer.extend(self.items)
            self.items.clear()


def _with_terms(row: Row, terms: tuple | None) -> Row:
    """A summary row with its model terms (where its `_Template` could not be made)."""
    if terms is None:
        return row
    return dataclasses.replace(row, steps_max=terms[0], step_bytes_max=terms[1], reduced_bytes_max=terms[2])


def _write_osu(lines: Iterable[str], where: str, nranks: int | None, cost: CostOf | None, out: _Out) -> Parsed:
    """An OSU file's rows into the run as they are read (`_OsuReader`, `_Template`)."""
    reader = _OsuReader(where, nranks, from_file=True)
    records = reader.records(lines)
    first = next(records, None)
    if first is None:
        return reader.parsed([])
    collective, p, dtype, alg = reader.collective, reader.p, reader.dtype, reader.algorithm
    factor = COLLECTIVES[collective].busbw_factor(p) if collective != "barrier" else 0.0
    template = _Template.make(_row(collective, 8, 8, p, 1e-6, 1e-6, 1e-6, dtype, algorithm=alg), _OSU_FIELDS)
    if collective != "pingpong":
        out.ranks.add(p)
    count_for, itemsize = COLLECTIVES[collective].count_for, DTYPES[dtype].itemsize
    for _, nbytes, _, avg, lo, hi in itertools.chain((first,), records):
        terms = _terms(cost, collective, alg, p, nbytes, None)
        if template is None or nbytes in reader.failed:  # a size OSU failed: its row says so (nwrong)
            out.add(_with_terms(_row(collective, nbytes, count_for(nbytes, itemsize, p), p, avg, lo, hi, dtype,
                                     algorithm=alg, nwrong=int(nbytes in reader.failed)),
                                terms))
            continue
        a = repr(avg)
        lo_t = a if lo is None else repr(lo)
        hi_t = a if hi is None else repr(hi)
        algbw = nbytes / avg / 1e9
        values = (nbytes, count_for(nbytes, itemsize, p), a, lo_t, hi_t, algbw, algbw * factor,
                  "null" if lo is None else lo_t, "" if lo is None else lo_t, "null" if hi is None else hi_t,
                  "" if hi is None else hi_t)
        out.add_line(template, values, terms)
    return reader.parsed([])


def _write_csv(lines: Iterable[str], where: str, cost: CostOf | None, out: _Out) -> Parsed:
    """A CSV's rows into the run: one value per case as they are read; samples and launches once every line is
    read (a case's rows may be anywhere in the file), each case pooled and written in turn."""
    reader = _CsvReader(lines, where)
    if reader.has_launch or reader.has_sample:
        ppn: dict[int, int] | None = None
        for row in reader.rows():
            if ppn is None:  # known once the whole file is read, before the first row
                ppn = {int(p): int(v) for p, v in (reader.parsed([]).options.get("ppn") or {}).items()}
            (row,) = with_model_terms([row], cost, ppn) if cost is not None else (row,)
            check_rows([row], where)
            out.add(row)
        return reader.parsed([])
    for g, nbytes, t in reader.summaries():
        if g.template is None:
            factor = COLLECTIVES[g.collective].busbw_factor(g.nranks) if g.collective != "barrier" else 0.0
            g.template = (_Template.make(_row_csv_summary(g.key(8), 1e-6, 1), _SUMMARY_FIELDS), factor)
            if g.collective != "pingpong":
                out.ranks.add(g.nranks)
        template, factor = g.template
        count = g.count(nbytes)
        terms = _terms(cost, g.collective, g.algorithm, g.nranks, nbytes, g.ppn)
        if template is None:
            out.add(_with_terms(_row_csv_summary(g.key(nbytes), t, count), terms))
            continue
        a = repr(t)
        algbw = nbytes / t / 1e9
        values = (nbytes, count, a, a, a, algbw, algbw * factor, "null", "", "null", "")
        out.add_line(template, values, terms)
    reader.finish()
    return reader.parsed([])


class _Hashing(io.RawIOBase):
    """A file read through, with the sha256 of every byte read: run.json's hash is of the bytes parsed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._f = open(path, "rb", buffering=0)
        except OSError as exc:
            raise UsageError(f"{str(path)!r} cannot be read: {exc.strerror}") from None
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            n = self._f.readinto(b)
        except OSError as exc:
            raise UsageError(f"{str(self.path)!r} cannot be read: {exc.strerror}") from None
        if n:
            self.sha256.update(memoryview(b)[:n])
        return n

    def hexdigest(self) -> str:
        """The sha256 of the whole file: what was not read yet is read now."""
        while self.read(1 << 20):
            pass
        return self.sha256.hexdigest()

    def close(self) -> None:
        self._f.close()
        super().close()


def _import_file(path: Path, fmt: str | None, nranks: int | None, cost: CostOf | None,
                 out: _Out) -> tuple[Parsed, dict, int]:
    """One file, by its format (given or sniffed), into the run being written: (what it held, run.json's record
    of it, the index of its first row)."""
    kind = fmt or sniff(path)
    if kind not in FORMATS:
        raise UsageError(f"unknown format {kind!r}; choose from {', '.join(FORMATS)}")
    where, start, modelled, wrong = str(path), out.rows, out.modelled, out.wrong
    raw = _Hashing(path)
    with raw, io.TextIOWrapper(io.BufferedReader(raw, 1 << 20), errors="replace") as text:
        if kind == "osu":
            parsed = _write_osu(text, where, nranks, cost, out)
        elif kind == "csv":
            parsed = _write_csv(text, where, cost, out)
        else:
            whole = text.read()
            parsed = parse_imb(whole, where=where) if kind == "imb" else parse_nccl_tests(whole, nranks, where=where)
            check_rows(parsed.rows, where)
            for row in with_model_terms(parsed.rows, cost) if cost is not None else parsed.rows:
                out.add(row)
        sha256 = raw.hexdigest()
    rows = out.rows - start
    return parsed, {"path": where, "sha256": sha256, "tool": parsed.tool, "version": parsed.version,
                    "options": parsed.options, "rows": rows, "modelled_rows": out.modelled - modelled,
                    "wrong_rows": out.wrong - wrong}, start


class _StoredRows(Sequence):
    """The rows one imported file gave, read back from the run's cases.jsonl when asked for: an import of millions
    of rows holds none of them."""

    def __init__(self, table: Path, start: int, count: int, modelled: int, wrong: int) -> None:
        self.table, self.start, self.count, self.modelled, self.wrong = table, start, count, modelled, wrong

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Row]:
        with open(self.table) as f:
            for line in itertools.islice(f, self.start, self.start + self.count):
                yield Row.from_dict(json.loads(line))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self)[i]
        k = range(self.count)[i]
        return next(itertools.islice(iter(self), k, None))


def _make_folders(root: Path) -> list[Path]:
    """Create `root` and its missing parents; the folders made, deepest first."""
    made, p = [], root
    while not p.exists() and p != p.parent:
        made.append(p)
        p = p.parent
    make_results_dir(root)
    return made


def _alive(pid: int) -> bool:
    """Whether process `pid` of this host exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: it exists
        return True
    return True


def _aside(root: Path) -> Path:
    """A new hidden folder in `root` to write a run in before it is renamed into place (mode as any run's).

    Its name holds this host and process id; folders aside that an import of this host left when it was killed
    (SIGKILL, which it cannot catch) are removed first.  Another host's, on a shared file system, are left alone.
    """
    head = f".import-{socket.gethostname()}-"
    for old in root.glob(f"{glob.escape(head)}*.importing"):
        pid = old.name[len(head):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    for k in itertools.count(1):
        path = root / f"{head}{os.getpid()}-{k}.importing"
        try:
            path.mkdir()
            return path
        except FileExistsError:  # this process's own earlier import, still there
            continue
    raise AssertionError("unreachable")


class _Stopped(BaseException):
    """SIGTERM or SIGHUP during an import: raised where it arrives, so that the folder aside is removed."""


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP (a batch system's limit, a closed terminal) end an import as Ctrl-C does: the folder
    aside is removed, then one `CCBenchError` with exit code 128 + the signal.  In the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):  # noqa: ARG001
        raise _Stopped(signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except _Stopped as exc:
        error = CCBenchError(f"stopped by {signal.Signals(exc.args[0]).name}: nothing was imported")
        error.exit_code = 128 + exc.args[0]
        raise error from None
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def import_files(paths: Sequence[str | Path], fmt: str | None = None, *, nranks: int | None = None,
                 library: str | None = None, tag: str = "imported", results_dir: str | Path = "results",
                 cost: CostOf | None = None) -> tuple[Path, list[Parsed]]:
    """Read every file into one new run directory; (its path, what each file held).

    Each file is read line by line, every number checked at the door as it comes (`check_rows`; OSU and CSV
    line by line), and its rows written as they are read into a folder aside (``RESULTS/.import-*.importing``,
    buffered, fsynced once), which is renamed into place (``RESULTS/DATE_HOST_npP_TAG``) only when every file is
    complete: a bad file, an interrupt (Ctrl-C; SIGTERM and SIGHUP too, `_stop_signals_raise`) or a full disk
    leaves no run behind, never one that says it is complete with part of its rows (and a refused file not even
    the results folder, where the import made it); what a killed import (SIGKILL) left aside goes at the next
    import on its host (`_aside`).  Memory
    stays bounded: rows are not held, only a CSV's samples (16 bytes each) until its cases are pooled.  The
    ``rows`` of each `Parsed` are read back from the stored run when asked for (``modelled_rows``: without).
    `cost` gives the rows their algorithm's model terms (`with_model_terms`); ranks per node come from a CSV's
    ``ppn`` column.  run.json records each file's path, sha256, tool, version line and the options seen in it.
    """
    with _stop_signals_raise():
        return _import_files(paths, fmt, nranks, library, tag, results_dir, cost)


def _import_files(paths, fmt, nranks, library, tag, results_dir, cost) -> tuple[Path, list[Parsed]]:
    _check_name(tag, "tag")
    root = Path(results_dir)
    made = _make_folders(root)
    aside: Path | None = None
    dest: Path | None = None
    try:
        aside = _aside(root)
        start = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        writer = _AsideWriter(aside, {"ccbench": __version__, "mpi_library": library or "unknown (imported)",
                                      "nranks": None, "imported": [], "start_time": start, "planned_cases": None,
                                      "skipped": [], "config": {}})
        try:
            out = _Out(writer)
            files = [_import_file(Path(f), fmt, nranks, cost, out) for f in paths]
            out.flush()
            writer.finish()
            ranks = sorted(out.ranks) or [2]
            meta = {"nranks": ranks[-1], "imported": [doc for _, doc, _ in files], "planned_cases": writer.rows}
            parsed = [p for p, _, _ in files]
            layouts = {k: {v for p in parsed for v in (p.options.get(k) or {}).values()} for k in ("nodes", "ppn")}
            hosts = sorted({h for p in parsed for h in p.options.get("hosts") or []})
            # nodes and ranks per node only where the files say (a CSV's columns, the hosts nccl-tests lists)
            if len(layouts["nodes"]) == 1:
                meta["nodes"] = next(iter(layouts["nodes"]))
            elif hosts and len(ranks) == 1:
                meta["nodes"] = len(hosts)
            if len(layouts["ppn"]) == 1:
                meta["ranks_per_node"] = next(iter(layouts["ppn"]))
            elif hosts and len(ranks) == 1 and ranks[0] % len(hosts) == 0:
                meta["ranks_per_node"] = ranks[0] // len(hosts)
            if hosts:
                meta["hosts"] = hosts
            writer.update(**meta, status="complete", end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                          finished_cases=writer.rows, failed_cases=0)
        finally:
            writer.close()
        dest = new_run_dir(root, ranks[-1], tag)  # the name, reserved by an empty folder
        os.replace(aside, dest)  # over the empty folder, in one step
        aside = None
    except BaseException as exc:
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
            if dest is not None:
                with contextlib.suppress(OSError):
                    dest.rmdir()
        if isinstance(exc, (UsageError, OSError, WriteError)):  # a refused file leaves nothing; Ctrl-C no run
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        if isinstance(exc, (OSError, WriteError)):
            raise UsageError(f"cannot write the imported run into {str(root)!r}: {exc.strerror}; "
                             "nothing was kept") from None
        raise
    with contextlib.suppress(OSError):  # the rename itself on disk
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    table = dest / "cases.jsonl"
    return dest, [dataclasses.replace(p, rows=_StoredRows(table, first, doc["rows"], doc["modelled_rows"],
                                                          doc["wrong_rows"]))
                  for p, doc, first in files]
