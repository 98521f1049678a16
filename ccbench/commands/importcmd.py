"""``ccbench import``: OSU Micro-Benchmarks and IMB-MPI1 outputs as ccbench runs (show, compare, report, export)."""

import click

__all__ = ["COMMANDS"]


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="FILE...")
@click.option("--format", "fmt", type=click.Choice(["osu", "imb"]), help="Default: recognised from each file.")
@click.option("--nranks", type=click.IntRange(1), help="Ranks of the OSU runs (OSU does not always print it).")
@click.option("--library", help="The MPI library the files were measured with (stored as mpi_library).")
@click.option("--name", "tag", default="imported", show_default=True, help="Tag of the run directory's name.")
@click.option("--results-dir", default="results", show_default=True, help="Where the run directory is made.")
def import_cmd(files, fmt, nranks, library, tag, results_dir):
    """Read OSU or IMB outputs into a new run directory; print its path.

    The rows carry the tool's own statistics (OSU's Avg/Min/Max Latency, IMB's t_avg/t_min/
    t_max) and its sizes converted to ccbench's (x ranks for scatter, gather, allgather,
    alltoall); no raw samples, so compare shows such cases untested.  Each file's sha256 and
    the tool's version line are stored in run.json.
    """
    import hashlib
    import time
    from pathlib import Path

    from ccbench import __version__
    from ccbench.core.errors import UsageError
    from ccbench.store.imports import parse_imb, parse_osu, sniff
    from ccbench.store.results import RunWriter, new_run_dir

    parsed, docs = [], []
    for f in files:
        path = Path(f)
        kind = fmt or sniff(path)
        text = path.read_text(errors="replace")
        if kind == "osu":
            procs = None
            for line in text.splitlines():
                if "Number of processes" in line:
                    procs = int("".join(ch for ch in line.split(":")[-1] if ch.isdigit()) or 0) or None
            p = procs or nranks
            one = parse_osu(text, p or 2, where=f)
            if p is None and any(r.collective != "pingpong" for r in one.rows):
                raise UsageError(f"{f}: the OSU output does not say how many ranks ran it: give --nranks")
        else:
            one = parse_imb(text, where=f)
        parsed.append(one)
        docs.append({"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "tool": one.tool,
                     "version": one.version, "options": one.options, "rows": len(one.rows)})
    rows = [r for p in parsed for r in p.rows]
    ranks = sorted({r.nranks for r in rows if r.collective != "pingpong"}) or [2]
    dest = new_run_dir(results_dir, ranks[-1], tag)
    meta = {"ccbench": __version__, "mpi_library": library or "unknown (imported)", "nranks": ranks[-1],
            "nodes": "unknown",
            "imported": docs, "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "planned_cases": len(rows),
            "skipped": [], "config": {}}
    writer = RunWriter(dest, meta)
    try:
        for r in rows:
            writer.append(r)
    finally:
        writer.update(status="complete", end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"), finished_cases=len(rows),
                      failed_cases=0)
        writer.close()
    click.echo(f"{len(rows)} rows from {len(files)} file(s) ({', '.join(sorted({p.tool for p in parsed}))}) in {dest}")


COMMANDS = [import_cmd]
