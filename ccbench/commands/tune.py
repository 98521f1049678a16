"""``ccbench tune``: the tuning file that makes the MPI library pick its fastest measured algorithm."""

import click

__all__ = ["COMMANDS"]


@click.command("tune")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", required=True, type=click.Choice(["mpich-json", "openmpi-rules", "openmpi-json"]),
              help="MPICH's selection JSON, Open MPI's classic rules file, or Open MPI's JSON rules (6.0+).")
@click.option("-o", "--output", metavar="FILE", help="Where to write it (default: tuning.* in the first run; "
              "never overwritten).")
@click.option("--results-dir", default="results", show_default=True, help="Where to look for RUN by name or latest.")
@click.option("--verify", is_flag=True, help="Relaunch the library's default selection with the file and show, "
              "per size, whether its time moved to the best variant's.")
def tune(runs, fmt, output, results_dir, verify):
    """Write the MPI library's tuning file from the native:<alg> variants measured in RUN(s).

    Per collective, rank count (one run per rank count) and size range, the fastest
    measured variant; boundaries at the measured crossovers.  Measure the variants with
    e.g. ccbench launch -n 4 -C allreduce,bcast -a native,native:all.
    """
    from rich.table import Table

    from ccbench.analysis.tune import tune_runs
    from ccbench.analysis.tune import verify as do_verify
    from ccbench.commands.common import new_console
    from ccbench.core.units import fmt_time, format_size

    console = new_console()
    doc = tune_runs(runs, fmt, output, results_dir)
    for s in doc["selections"]:
        t = Table(title=f"{s.collective} at {s.nranks} ranks ({s.dtype}{'/' + s.op if s.op != 'none' else ''}) "
                        f"from run {s.run}: fastest variant per size", title_justify="left", header_style="bold")
        for col in ("size", "fastest", "time", "runner-up", "time ", "margin", "default (native)", "note"):
            t.add_column(col, justify="right" if col in ("size", "time", "time ", "margin", "default (native)")
                         else "left")
        for c in s.choices:
            t.add_row(format_size(c.nbytes), c.winner, fmt_time(c.winner_s), c.runner_up or "-",
                      fmt_time(c.runner_up_s) if c.runner_up_s else "-",
                      f"{c.runner_up_s / c.winner_s - 1:.0%}" if c.runner_up_s else "-",
                      fmt_time(c.default_s) if c.default_s else "-",
                      "toss-up (CIs overlap)" if c.within_noise else
                      (f"{c.fastest_any} faster, not writable" if c.fastest_any != c.winner else ""))
        console.print(t)
        console.print("  ranges: " + "; ".join(
            f"{format_size(r.lo)}-{format_size(r.hi) if r.hi is not None else 'up'}: {r.algorithm}" for r in s.ranges))
        for n in s.notes:
            console.print(f"  [yellow]note: {n}[/]")
    for n in doc["notes"]:
        console.print(f"[yellow]note: {n}[/]")
    console.print(f"wrote {doc['path']}")
    if not verify:
        return
    rows = do_verify(doc, say=console.print)
    t = Table(title=f"verification of {doc['path']}: the library's default selection before, the best variant, "
                    "and the default with the file", title_justify="left", header_style="bold")
    for col in ("collective", "P", "size", "default before", "best variant", "best", "with file", "verdict"):
        t.add_column(col, justify="left" if col in ("collective", "best variant", "verdict") else "right")
    for r in rows:
        t.add_row(r["collective"], str(r["nranks"]), format_size(r["nbytes"]),
                  fmt_time(r["default_before_s"]) if r["default_before_s"] else "-", r["best"], fmt_time(r["best_s"]),
                  fmt_time(r["with_file_s"]) if r["with_file_s"] else "-",
                  f"[red]{r['verdict']}[/]" if r["verdict"] in ("did not move", "worse") else r["verdict"])
    console.print(t)
    stuck = [r for r in rows if r["verdict"] in ("did not move", "worse", "not measured")]
    console.print(f"{len(rows) - len(stuck)} of {len(rows)} sizes at the best variant's time (or already there); "
                  f"verification run: {rows[0]['verify_run'] if rows else '-'}")


COMMANDS = [tune]
