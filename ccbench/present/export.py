"""Stored runs in other tools' formats: OSU Micro-Benchmarks' text blocks, nccl-tests' table, one tidy CSV.

* ``osu``: per curve (collective, algorithm, ranks, dtype, op, in place, root) a block the way
  OSU Micro-Benchmarks prints one -- ``# OSU MPI <Collective> Latency Test``, a header line
  ``# Size       Avg Latency(us)`` and one line per size with the latency in microseconds, two
  decimals -- so that parsers written for OSU read it (ReFrame's OSU checks match
  ``^{size}\\s+(\\S+)``; Ramble's OSU modifier reads the same columns).  Each block is titled as OSU's
  own test of that call (``ccbench.store.imports.OSU_TITLES``: ``Broadcast``, ``All-to-All Personalized
  Exchange``, ``Reduce_scatter_block`` for ccbench's reduce_scatter, ``Reduce_scatter`` for
  reduce_scatterv; ``Persistent`` for ``native-persistent``), so that ``ccbench import`` reads a block
  back as what it was.  Sizes follow OSU's definitions: for the scatters, gathers, allgathers and
  all-to-alls, even and v, OSU's size is one rank's block, so ccbench's size (P blocks) is divided
  by the rank count; the other collectives' sizes are the same.  OSU's v-tests give every block
  the same size, so a v-collective measured on another count distribution (``--counts zipf``) has no
  OSU block: it is named in a comment line at the top instead.  The latency is ccbench's median
  (for runs of several launches, the geometric mean of the launches' medians): OSU prints the
  mean over ranks of each rank's mean, a different statistic, as the block's comment line says.
* ``nccl-tests``: the out-of-place columns of nccl-tests' table (size, count, type, redop,
  root, time in us, algbw, busbw in GB/s, #wrong); ccbench already uses nccl-tests' size and
  bus-bandwidth definitions.
* ``csv``: every row of every run given, without raw samples, with the run's name, MPI
  library, ranks and nodes in front: one file for dashboards.
"""

import csv
import io
from collections.abc import Sequence

from ccbench.analysis.fastest import group_rows
from ccbench.core.collectives import COLLECTIVES
from ccbench.store.imports import OSU_PERSISTENT, OSU_TITLES
from ccbench.store.imports import PER_RANK as OSU_PER_RANK

__all__ = ["EXPORT_FORMATS", "OSU_PER_RANK", "SWEEP_EXPORTS", "export_csv", "export_nccl_tests", "export_osu",
           "exporter"]

EXPORT_FORMATS = ("osu", "nccl-tests", "csv")


def _library(meta: dict) -> str:
    return " ".join(str(meta.get("mpi_library") or "?").split())


def _osu_title(collective: str, algorithm: str) -> str:
    """OSU's header of its test of this call: ``OSU MPI <title> [Persistent ]Latency Test``."""
    if collective == "pingpong":
        return "OSU MPI Latency Test"
    return f"OSU MPI {OSU_TITLES[collective]} {'Persistent ' if algorithm == OSU_PERSISTENT else ''}Latency Test"


def export_osu(runs: Sequence[tuple[str, dict, list]]) -> str:
    """OSU-style blocks of every curve of `runs` ([(name, meta, rows)]), one after the other; a v-collective's
    curve on unequal blocks is named in a comment line first instead (OSU's v-tests have equal blocks)."""
    out, unequal = io.StringIO(), {}  # (run, counts) -> {collective: [algorithm, ...]}
    for name, meta, rows in runs:
        for g in group_rows(rows):
            for alg, curve in g.by_algorithm.items():
                spread = sorted({r.counts for r in curve if COLLECTIVES[g.collective].uneven} - {"uniform"})
                if spread:
                    unequal.setdefault((name, ", ".join(spread)), {}).setdefault(g.collective, []).append(alg)
                    continue
                title = _osu_title(g.collective, alg)
                per_rank = g.collective in OSU_PER_RANK
                out.write(f"# {title} (ccbench export of {name}: {alg}, {g.nranks} ranks, {g.dtype}"
                          + (f" {g.op}" if COLLECTIVES[g.collective].reduction else "")
                          + (", in place" if g.in_place else "") + f"; {_library(meta)})\n")
                out.write("# latency = ccbench's median of the per-call maximum over ranks"
                          + (" (size: one rank's block, as OSU)" if per_rank else "") + "\n")
                out.write(f"# {'Size':<10}{'Avg Latency(us)':>18}\n")
                for r in curve:
                    if not r.ok:
                        continue
                    size = r.nbytes // g.nranks if per_rank else r.nbytes
                    out.write(f"{size:<12d}{r.median_s * 1e6:>18.2f}\n")
                out.write("\n")
    if not unequal:
        return out.getvalue()
    skipped = "; ".join(", ".join(f"{c} ({', '.join(algs)})" for c, algs in colls.items()) + f" of {run} on counts "
                        f"{counts}" for (run, counts), colls in unequal.items())
    return f"# not written: {skipped}: OSU's v-tests give every block the same size\n\n" + out.getvalue()


def export_nccl_tests(runs: Sequence[tuple[str, dict, list]]) -> str:
    """nccl-tests-style tables (out-of-place columns) of every curve of `runs`."""
    out = io.StringIO()
    for name, meta, rows in runs:
        for g in group_rows(rows):
            for alg, curve in g.by_algorithm.items():
                out.write(f"# ccbench export of {name}: {g.collective} {alg}, {g.nranks} ranks "
                          f"({_library(meta)}); time = median\n")
                out.write(f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>6} {'time':>8} "
                          f"{'algbw':>7} {'busbw':>7} {'#wrong':>6}\n")
                out.write(f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>6} {'(us)':>8} "
                          f"{'(GB/s)':>7} {'(GB/s)':>7} {'':>6}\n")
                for r in curve:
                    redop = r.op if COLLECTIVES[r.collective].reduction else "none"
                    root = r.root if COLLECTIVES[r.collective].rooted else -1
                    out.write(f"{r.nbytes:>12d} {r.count:>12d} {r.dtype:>8} {redop:>6} {root:>6d} "
                              f"{r.median_s * 1e6:>8.2f} {r.algbw_gbs:>7.2f} {r.busbw_gbs:>7.2f} {r.nwrong:>6d}\n")
                out.write("\n")
    return out.getvalue()


def export_csv(runs: Sequence[tuple[str, dict, list]]) -> str:
    """One CSV of every row of `runs` (no raw samples), the run's name, library, ranks and nodes first."""
    out = io.StringIO()
    head = ["run", "mpi_library", "run_nranks", "nodes"]
    writer = None
    for name, meta, rows in runs:
        for r in rows:
            d = r.csv_dict()
            if writer is None:
                writer = csv.DictWriter(out, fieldnames=head + list(d), extrasaction="ignore")
                writer.writeheader()
            writer.writerow({"run": name, "mpi_library": meta.get("mpi_library", ""),
                             "run_nranks": meta.get("nranks", ""), "nodes": meta.get("nodes", ""), **d})
    return out.getvalue()


#: The formats of a collective sweep beside ``csv`` (its ``RunKind.exports``).
SWEEP_EXPORTS = {"osu": export_osu, "nccl-tests": export_nccl_tests}


def exporter(kind, fmt: str):
    """The function that writes runs of `kind` (a ``RunKind``) as `fmt`: ``csv`` for every kind, the others as the
    kind declares them; None when it has no such format."""
    return export_csv if fmt == "csv" else (kind.get("exports") or {}).get(fmt)
