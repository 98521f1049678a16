"""Results of other benchmarks read into ccbench runs: OSU, IMB-MPI1, nccl-tests and a plain CSV.

An imported run is an ordinary sweep run directory (``run.json`` + ``cases.jsonl`` +
``cases.csv``) whose rows carry the other tool's summary statistics, so that ``show``,
``compare``, ``fit``, ``report`` and ``export`` take it.  OSU, IMB and nccl-tests rows have no
raw samples (``compare`` leaves such cases untested) and the statistics are the tool's own:

* OSU (``osu_allreduce``, ``osu_bcast``, ... and ``osu_latency``; with or without ``-f``): its
  "Avg Latency(us)" (each rank's mean, averaged over ranks) becomes the row's typical time
  (``median_s``, flagged ``imported``) and ``rank_mean_avg_s``; "Min/Max Latency(us)" with
  ``-f`` become ``rank_mean_min_s``/``rank_mean_max_s``; ``osu_latency``'s one-way latency is
  ping-pong.  Sizes: OSU's per-rank block for scatter, gather, allgather and alltoall becomes
  ccbench's whole buffer (x ranks), the block kept in the row's ``count``; the "# Datatype:" line
  gives the dtype (MPI_CHAR: uint8), which compare matches on -- measure ccbench with the same
  ``-t`` to compare.
* IMB-MPI1: every "# Benchmarking NAME" block with its "# #processes = P" line; ``t_avg``
  (each rank's mean over the repetitions, averaged over ranks) is the typical time, ``t_min``
  and ``t_max`` the minimum and maximum over ranks; PingPong's ``t[usec]`` is half a round
  trip already.  IMB's sizes of Allgather, Alltoall, Gather and Scatter are per rank, as OSU's;
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
extra columns and comment lines, and refuse a file that is none of these with one line.
`import_files` parses and checks every file before it writes anything (`check_rows`), then writes
the run aside and renames it into place when complete.  Pure: no MPI.
"""

import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import DTYPES, OPS
from ccbench.core.errors import UsageError
from ccbench.core.stats import summarize
from ccbench.core.units import MAX_SIZE, MAX_TIME_S, MIN_TIME_S, format_size
from ccbench.core.units import is_time as _is_time
from ccbench.core.version import __version__
from ccbench.store.launches import pool_launches
from ccbench.store.results import Row, RunWriter, WriteError, new_run_dir

__all__ = ["CSV_OPTIONAL", "CSV_REQUIRED", "FORMATS", "IMPORTED", "Parsed", "import_files", "parse_csv", "parse_imb",
           "parse_nccl_tests", "parse_osu", "sniff", "with_model_terms"]

#: Flag of an imported row: its statistics are the other tool's, without raw samples.
IMPORTED = "imported"
#: Collectives whose OSU/IMB size is one rank's block (ccbench's size is P blocks).
PER_RANK = frozenset({"scatter", "gather", "allgather", "alltoall"})

_OSU_NAMES = {"latency": "pingpong", "allreduce": "allreduce", "bcast": "bcast", "reduce": "reduce",
              "allgather": "allgather", "alltoall": "alltoall", "all-to-all": "alltoall", "gather": "gather",
              "scatter": "scatter", "reduce_scatter": "reduce_scatter", "reduce-scatter": "reduce_scatter",
              "barrier": "barrier"}
#: MPI datatypes as OSU's "# Datatype:" line names them, as ccbench's dtypes.
_DTYPES = {"MPI_CHAR": "uint8", "MPI_BYTE": "uint8", "MPI_INT": "int32", "MPI_FLOAT": "float32",
           "MPI_DOUBLE": "float64", "MPI_LONG": "int64"}
_IMB_NAMES = {"pingpong": "pingpong", "allreduce": "allreduce", "bcast": "bcast", "reduce": "reduce",
              "allgather": "allgather", "alltoall": "alltoall", "gather": "gather", "scatter": "scatter",
              "reduce_scatter_block": "reduce_scatter", "barrier": "barrier"}


@dataclass(frozen=True)
class Parsed:
    """What a file held: the tool and its version line, options seen in its header, and the rows."""

    tool: str
    version: str
    options: dict
    rows: list[Row]


def _row(collective: str, nbytes: int, per_rank_bytes: int, nranks: int, avg_s: float, lo: float | None,
         hi: float | None, dtype: str = "uint8", *, op: str | None = None, in_place: bool = False, root: int = 0,
         nwrong: int = 0, timing: str = "per-call") -> Row:
    factor = COLLECTIVES[collective].busbw_factor(nranks) if collective != "barrier" else 0.0
    algbw = nbytes / avg_s / 1e9 if avg_s > 0 else 0.0
    if op is None:
        op = "sum" if COLLECTIVES[collective].reduction else "none"
    return Row(collective=collective, algorithm="native", nbytes=nbytes, count=per_rank_bytes, dtype=dtype,
               op=op, in_place=in_place, root=root, nranks=nranks,
               samples=0, min_s=lo if lo is not None else avg_s, median_s=avg_s, mean_s=avg_s, p95_s=avg_s,
               p99_s=avg_s, max_s=hi if hi is not None else avg_s, stddev_s=float("nan"), ci_low_s=avg_s,
               ci_high_s=avg_s, algbw_gbs=algbw, busbw_gbs=algbw * factor, msgs_max=None, bytes_max=None,
               msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None, reduced_bytes_max=None,
               nwrong=nwrong, stop_reason=IMPORTED, sync="barrier", flags=(IMPORTED,), timing=timing,
               rank_mean_min_s=lo, rank_mean_avg_s=avg_s, rank_mean_max_s=hi)


def _size(collective: str, size: int, nranks: int) -> int:
    return size * nranks if collective in PER_RANK else size


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


def parse_osu(text: str, nranks: int, where: str = "file") -> Parsed:
    """An OSU Micro-Benchmarks output (module docstring)."""
    head = re.search(r"^#\s*OSU MPI(?:-\w+)?\s+(.+?)\s+(?:Latency\s+)?Test(?:\s+v?([\d.]+))?", text, re.M)
    if head is None:
        raise UsageError(f"{where}: not an OSU Micro-Benchmarks output (no '# OSU MPI ... Test' line)")
    title = head.group(1).strip().lower().replace(" latency", "")
    name = title.split()[-1] if title else "latency"
    collective = _OSU_NAMES.get(name) or _OSU_NAMES.get(title)
    if collective is None:
        raise UsageError(f"{where}: OSU test {head.group(1)!r} is not a collective ccbench knows")
    options = dict(re.findall(r"^#\s*(Datatype|Root|Window size|Number of processes)\s*:\s*(\S+?)\.?\s*$", text,
                              re.M))
    columns = None
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s.startswith("#"):
            if "Size" in s and "Latency" in s:
                columns = [c.strip().lower() for c in re.split(r"\s{2,}", s.lstrip("#").strip())]
            continue
        if not s or columns is None:
            continue
        parts = s.split()
        if not parts[0].isdigit():
            continue
        at = f"{where}, line {n}"
        if len(parts) < len(columns):  # a line cut short (a killed job, a full disk): never a shorter row
            raise UsageError(f"{at}: {len(parts)} values under {len(columns)} columns (a line cut short?)")
        values = dict(zip(columns, parts, strict=False))
        try:
            size = int(parts[0])
            avg_col = "avg latency(us)" if "avg latency(us)" in values else (
                "latency (us)" if "latency (us)" in values else columns[1])
            avg = _time_us(values[avg_col], at, avg_col)
            lo = _time_us(values["min latency(us)"], at, "min latency(us)") if "min latency(us)" in values else None
            hi = _time_us(values["max latency(us)"], at, "max latency(us)") if "max latency(us)" in values else None
        except (ValueError, IndexError, KeyError):
            raise UsageError(f"{at}: cannot read the line {s!r}") from None
        p = 2 if collective == "pingpong" else nranks
        rows.append(_row(collective, _size(collective, size, p), size, p, avg, lo, hi,
                         _DTYPES.get(options.get("Datatype", "MPI_CHAR"), "uint8")))
    if not rows:
        raise UsageError(f"{where}: an OSU header but no result lines")
    return Parsed("OSU Micro-Benchmarks", head.group(0).lstrip("# ").strip(), options, rows)


def parse_imb(text: str, where: str = "file") -> Parsed:
    """An IMB-MPI1 output, every block of a collective or PingPong (module docstring)."""
    version = re.search(r"Intel\(R\) MPI Benchmarks?\s*([\d.]+[^\n]*)?", text) or re.search(r"IMB-MPI1", text)
    blocks = re.split(r"^#-+\n#\s*Benchmarking\s+", text, flags=re.M)
    if version is None or len(blocks) < 2:
        raise UsageError(f"{where}: not an IMB-MPI1 output (no '# Benchmarking NAME' blocks)")
    rows = []
    pos = 0
    for block in blocks[1:]:
        start = text.index(block, pos)  # where this block begins in the file, for line numbers
        pos = start + len(block)
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
            rows.append(_row(collective, _size(collective, size, p), size, p, avg, lo, hi, dtype))
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
    if not _is_time(time_us * 1e-6):
        raise ValueError(f"time {time_us!r} us {_NOT_A_TIME}")
    r = int(root) if str(root).strip().lstrip("-").isdigit() else -1
    op = redop if coll.reduction and redop not in ("none", "") else ("sum" if coll.reduction else "none")
    return _row(collective, size, count, nranks, time_us * 1e-6, None, None, _NCCL_DTYPES.get(type_name, type_name),
                op=op, in_place=in_place, root=max(r, 0) if coll.rooted else 0,
                nwrong=int(nwrong) if nwrong is not None and math.isfinite(nwrong) else 0, timing=timing)


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
                                      str(res.get("redop", "none")), str(res.get("root", "-1")), float(t),
                                      float(nwrong) if nwrong is not None else None, in_place, timing))
        except (KeyError, TypeError, ValueError) as exc:
            why = str(exc) if isinstance(exc, ValueError) and "not a time" in str(exc) else "lacks size, count or time"
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
    rows = []
    for line in text[table.end():].splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#") or not parts[0].isdigit():
            continue
        head_cols = dict(zip(params, parts, strict=False))
        rest = parts[len(params):]
        if len(rest) < 4:
            raise UsageError(f"{where}: cannot read the line {line.strip()!r}")
        try:
            for i, in_place in ((0, False), (4, True)):
                if len(rest) < i + 4:
                    break
                t, _, _, wrong = rest[i:i + 4]
                rows.append(_nccl_row(collective, P, int(head_cols["size"]), int(head_cols["count"]),
                                      head_cols["type"], head_cols.get("redop", head_cols.get("op", "none")),
                                      head_cols.get("root", "-1"), float(t),
                                      None if wrong == "N/A" else float(wrong), in_place, timing))
        except ValueError as exc:
            why = f": {exc}" if "not a time" in str(exc) else ""
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


def parse_csv(text: str, where: str = "file") -> Parsed:
    """A CSV of timings, one row per sample or per summary (module docstring); '#' lines are comments."""
    kept = [(n, ln) for n, ln in enumerate(text.splitlines(), start=1)
            if ln.strip() and not ln.lstrip().startswith("#")]
    numbers, lines = [n for n, _ in kept], [ln for _, ln in kept]
    if not lines:
        raise UsageError(f"{where}: an empty CSV (a header row and data rows are needed)")
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    header = [c.strip() for c in reader.fieldnames or []]
    unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing or unknown:
        what = "; ".join(p for p in (f"missing columns {', '.join(missing)}" if missing else "",
                                     f"unknown columns {', '.join(unknown)}" if unknown else "") if p)
        raise UsageError(f"{where}: {what} (required: {', '.join(CSV_REQUIRED)}; optional: {', '.join(CSV_OPTIONAL)})")
    reader.fieldnames = header
    has_launch, has_sample = "launch" in header, "sample" in header
    values: dict[tuple, dict[int, list[float]]] = {}   # case -> launch -> samples, in file order
    seen: set = set()
    layout: dict[int, set] = {}                         # nranks -> {(nodes, ppn)}
    for rec in reader:
        i = numbers[min(reader.line_num, len(numbers)) - 1]  # the file's own line number
        if None in rec:
            raise UsageError(f"{where}, line {i}: more values than the header has columns")
        rec = {k: (v or "").strip() for k, v in rec.items()}
        if any(rec.get(c, "") == "" for c in CSV_REQUIRED):
            raise UsageError(f"{where}, line {i}: every row needs {', '.join(CSV_REQUIRED)}")
        collective = rec["collective"]
        if collective not in COLLECTIVES:
            raise UsageError(f"{where}, line {i}: unknown collective {collective!r}; choose from "
                             f"{', '.join(COLLECTIVES)}")
        reduction = COLLECTIVES[collective].reduction
        nranks = _csv_int(rec["nranks"], "nranks", where, i, low=1)
        nbytes = _csv_int(rec["nbytes"], "nbytes", where, i)
        try:
            t = float(rec["time_s"])
        except ValueError:
            t = math.nan
        if not _is_time(t):
            raise UsageError(f"{where}, line {i}: time_s {rec['time_s']!r} {_NOT_A_TIME}")
        key = (collective, rec["algorithm"], nranks, nbytes, rec.get("dtype") or "unknown",
               rec.get("op") or ("sum" if reduction else "none"))
        launch = _csv_int(rec["launch"], "launch", where, i) if has_launch else 1
        sample = _csv_int(rec["sample"], "sample", where, i) if has_sample else None
        ident = (key, launch, sample)
        if ident in seen:
            hint = ("" if has_sample else ": add a 'sample' column for several samples of one case"
                    + ("" if has_launch else " or a 'launch' column for several launches"))
            raise UsageError(f"{where}, line {i}: the case {'/'.join(map(str, key[:4]))} B"
                             f"{f' launch {launch}' if has_launch else ''}{f' sample {sample}' if has_sample else ''}"
                             f" appears twice{hint}")
        seen.add(ident)
        values.setdefault(key, {}).setdefault(launch, []).append(t)
        nodes = _csv_int(rec["nodes"], "nodes", where, i, low=1) if rec.get("nodes") else None
        ppn = _csv_int(rec["ppn"], "ppn", where, i, low=1) if rec.get("ppn") else None
        layout.setdefault(nranks, set()).add((nodes, ppn))
    if not values:
        raise UsageError(f"{where}: a CSV header but no rows")
    for p, seen_layouts in layout.items():
        if len(seen_layouts) > 1:
            raise UsageError(f"{where}: rows at {p} ranks give different nodes/ppn {sorted(seen_layouts, key=str)}")
    rows = []
    for key, launches in values.items():
        collective, _, nranks, nbytes, dtype, _ = key
        itemsize = DTYPES[dtype].itemsize if dtype in DTYPES else 1
        count = COLLECTIVES[collective].count_for(nbytes, itemsize, nranks)
        if not has_launch:
            (xs,) = launches.values()
            rows.append(_sample_row(key, xs, count) if has_sample else _row_csv_summary(key, xs[0], count))
            continue
        blocks = [(n, _sample_row(key, xs, count, summary_only=not has_sample)) for n, xs in launches.items()]
        rows.append(pool_launches(blocks))
    options: dict = {"columns": header}
    for name, pos in (("nodes", 0), ("ppn", 1)):
        per = {str(p): next(iter(v))[pos] for p, v in sorted(layout.items()) if next(iter(v))[pos] is not None}
        if per:
            options[name] = per
    return Parsed("CSV", f"CSV with columns {', '.join(header)}", options, rows)


def _row_csv_summary(key: tuple, t: float, count: int) -> Row:
    """A CSV case given by one summary value: the typical time, no raw samples."""
    collective, algorithm, nranks, nbytes, dtype, op = key
    return dataclasses.replace(_row(collective, nbytes, count, nranks, t, None, None, dtype, op=op),
                               algorithm=algorithm, rank_mean_avg_s=None, sync="unknown")


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
        head = path.read_text(errors="replace")[:4000]
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
    """Every number an imported file brings, checked at the door: times within `MIN_TIME_S` .. `MAX_TIME_S`, sizes up to
    ``MAX_SIZE``, rank counts from 1 to `MAX_RANKS`, element types and operations ccbench knows, and no case
    twice in one file.  One clear error naming the file and the case; nothing has been written yet."""
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


def _parse_one(path: Path, fmt: str | None, nranks: int | None) -> Parsed:
    """One file, by its format (given or sniffed), every number checked (`check_rows`)."""
    one = _parse_text(path, fmt, nranks)
    check_rows(one.rows, str(path))
    return one


def _parse_text(path: Path, fmt: str | None, nranks: int | None) -> Parsed:
    kind = fmt or sniff(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise UsageError(f"{str(path)!r} cannot be read: {exc.strerror}") from None
    where = str(path)
    if kind == "osu":
        procs = re.search(r"Number of processes\s*:\s*(\d+)", text)
        p = int(procs.group(1)) if procs else nranks
        one = parse_osu(text, p or 2, where=where)
        if p is None and any(r.collective != "pingpong" for r in one.rows):
            raise UsageError(f"{where}: the OSU output does not say how many ranks ran it: give --nranks")
        return one
    if kind == "imb":
        return parse_imb(text, where=where)
    if kind == "nccl-tests":
        return parse_nccl_tests(text, nranks, where=where)
    if kind == "csv":
        return parse_csv(text, where=where)
    raise UsageError(f"unknown format {kind!r}; choose from {', '.join(FORMATS)}")


def import_files(paths: Sequence[str | Path], fmt: str | None = None, *, nranks: int | None = None,
                 library: str | None = None, tag: str = "imported", results_dir: str | Path = "results",
                 cost: CostOf | None = None) -> tuple[Path, list[Parsed]]:
    """Read every file, then write one new run directory of their rows; (its path, what each file held).

    Every file is parsed before anything is written: a bad file leaves no directory behind.
    `cost` gives the rows their algorithm's model terms (`with_model_terms`); ranks per node
    come from a CSV's ``ppn`` column.  run.json records each file's path, sha256, tool,
    version line and the options seen in it.
    """
    parsed, docs = [], []
    for f in paths:
        path = Path(f)
        one = _parse_one(path, fmt, nranks)
        if cost is not None:
            ppn = {int(p): int(v) for p, v in (one.options.get("ppn") or {}).items()}
            one = dataclasses.replace(one, rows=with_model_terms(one.rows, cost, ppn))
        parsed.append(one)
        docs.append({"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "tool": one.tool,
                     "version": one.version, "options": one.options, "rows": len(one.rows),
                     "modelled_rows": sum(r.steps_max is not None for r in one.rows)})
    rows = [r for p in parsed for r in p.rows]
    ranks = sorted({r.nranks for r in rows if r.collective != "pingpong"}) or [2]
    layouts = {k: {v for p in parsed for v in (p.options.get(k) or {}).values()} for k in ("nodes", "ppn")}
    hosts = sorted({h for p in parsed for h in p.options.get("hosts") or []})
    meta = {"ccbench": __version__, "mpi_library": library or "unknown (imported)", "nranks": ranks[-1],
            "imported": docs, "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "planned_cases": len(rows),
            "skipped": [], "config": {}}
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
    # written aside and renamed into place when complete: an interrupted import (Ctrl-C, a full disk) leaves
    # no run behind, never one that says it is complete with part of its rows
    dest = new_run_dir(results_dir, ranks[-1], tag)  # the name, reserved by an empty folder
    aside = dest.with_name(f".{dest.name}.importing")
    try:
        aside.mkdir()
        writer = RunWriter(aside, meta)
        try:
            writer.extend(rows)
            writer.update(status="complete", end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                          finished_cases=len(rows), failed_cases=0)
        finally:
            writer.close()
        os.replace(aside, dest)  # over the empty folder, in one step
    except BaseException as exc:
        shutil.rmtree(aside, ignore_errors=True)
        with contextlib.suppress(OSError):
            dest.rmdir()
        if isinstance(exc, (OSError, WriteError)):
            raise UsageError(f"cannot write the imported run into {str(dest.parent)!r}: {exc.strerror}; "
                             "nothing was kept") from None
        raise
    return dest, parsed
