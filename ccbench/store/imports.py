"""Results of other benchmarks read into ccbench runs: OSU Micro-Benchmarks and IMB-MPI1 text output.

An imported run is an ordinary sweep run directory (``run.json`` + ``cases.jsonl`` +
``cases.csv``) whose rows carry the other tool's summary statistics, so that ``show``,
``compare``, ``fit``, ``report`` and ``export`` take it.  No raw samples exist: rows have none,
``compare`` leaves such cases untested, and the statistics are the tool's own:

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
  IMB reduces MPI_FLOAT (float32) and moves MPI_BYTE (uint8) by default.

Formats as the tools print them (OMB 7.x ``print_preamble``/``print_stats``; IMB 2021
``IMB_output``); parsers are tolerant of extra columns and comment lines, and refuse a file
that is neither with one line.  Pure: no MPI.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.errors import UsageError
from ccbench.store.results import Row

__all__ = ["IMPORTED", "Parsed", "parse_imb", "parse_osu", "sniff"]

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
         hi: float | None, dtype: str = "uint8") -> Row:
    factor = COLLECTIVES[collective].busbw_factor(nranks) if collective != "barrier" else 0.0
    algbw = nbytes / avg_s / 1e9 if avg_s > 0 else 0.0
    return Row(collective=collective, algorithm="native", nbytes=nbytes, count=per_rank_bytes, dtype=dtype,
               op="sum" if COLLECTIVES[collective].reduction else "none", in_place=False, root=0, nranks=nranks,
               samples=0, min_s=lo if lo is not None else avg_s, median_s=avg_s, mean_s=avg_s, p95_s=avg_s,
               p99_s=avg_s, max_s=hi if hi is not None else avg_s, stddev_s=float("nan"), ci_low_s=avg_s,
               ci_high_s=avg_s, algbw_gbs=algbw, busbw_gbs=algbw * factor, msgs_max=None, bytes_max=None,
               msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None, reduced_bytes_max=None,
               nwrong=0, stop_reason=IMPORTED, sync="barrier", flags=(IMPORTED,), rank_mean_min_s=lo,
               rank_mean_avg_s=avg_s, rank_mean_max_s=hi)


def _size(collective: str, size: int, nranks: int) -> int:
    return size * nranks if collective in PER_RANK else size


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
    for line in text.splitlines():
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
        values = dict(zip(columns, parts, strict=False))
        try:
            size = int(parts[0])
            avg = float(values.get("avg latency(us)", values.get("latency (us)", parts[1]))) * 1e-6
            lo = float(values["min latency(us)"]) * 1e-6 if "min latency(us)" in values else None
            hi = float(values["max latency(us)"]) * 1e-6 if "max latency(us)" in values else None
        except (ValueError, IndexError):
            raise UsageError(f"{where}: cannot read the line {s!r}") from None
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
    for block in blocks[1:]:
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
        for line in block[header.end():].splitlines():
            parts = line.split()
            if not parts or not parts[0].isdigit():
                if parts and parts[0].startswith("#"):
                    break
                continue
            nums = [float(x) for x in parts]
            if collective == "barrier":
                size, values = 0, dict(zip(cols, nums[1:], strict=False))
            else:
                size, values = int(nums[0]), dict(zip(cols, nums[2:], strict=False))
            if "t[usec]" in values:
                avg, lo, hi = values["t[usec]"] * 1e-6, None, None
            elif "t_avg[usec]" in values:
                avg, lo, hi = (values["t_avg[usec]"] * 1e-6, values.get("t_min[usec]", 0) * 1e-6,
                               values.get("t_max[usec]", 0) * 1e-6)
            else:
                continue
            # IMB reduces MPI_FLOAT and moves MPI_BYTE (its default datatypes)
            dtype = "float32" if COLLECTIVES[collective].reduction else "uint8"
            rows.append(_row(collective, _size(collective, size, p), size, p, avg, lo, hi, dtype))
    if not rows:
        raise UsageError(f"{where}: IMB blocks, but none of a collective ccbench knows with results")
    return Parsed("IMB-MPI1", version.group(0).strip(), {}, rows)


def sniff(path: Path) -> str:
    """``osu`` or ``imb`` from a file's first lines; one clear error for anything else."""
    try:
        head = path.read_text(errors="replace")[:4000]
    except OSError as exc:
        raise UsageError(f"{str(path)!r} cannot be read: {exc.strerror}") from None
    if re.search(r"^#\s*OSU MPI", head, re.M):
        return "osu"
    if "Intel(R) MPI Benchmark" in head or "IMB-MPI1" in head or "# Benchmarking" in head:
        return "imb"
    raise UsageError(f"{str(path)!r} is neither an OSU Micro-Benchmarks nor an IMB-MPI1 output; give --format")
