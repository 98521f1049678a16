"""``ccbench import``: OSU, IMB-MPI1 and nccl-tests outputs and CSV timings as ccbench runs."""

import functools

import click

__all__ = ["COMMANDS"]


@functools.cache
def _model(collective: str, algorithm: str):
    """(the registry's algorithm, whether its cost takes ranks_per_node), or None where it has no cost: looked up
    once per algorithm, not once per imported row."""
    import inspect

    from ccbench.algorithms import REGISTRY  # imports no MPI

    alg = REGISTRY.get(collective, {}).get(algorithm)
    if alg is None or alg.cost is None:
        return None
    return alg, "ranks_per_node" in inspect.signature(alg.cost).parameters


def _model_cost(collective: str, algorithm: str, nranks: int, nbytes: int, ranks_per_node: int | None):
    """The registry's closed-form Cost of an algorithm at (P, n), or None where it has none or cannot run at P."""
    model = _model(collective, algorithm)
    if model is None:
        return None
    alg, node_aware = model
    if alg.unsupported(nranks) is not None:
        return None
    return alg.cost(nranks, nbytes, **({"ranks_per_node": ranks_per_node} if node_aware and ranks_per_node else {}))


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="FILE...")
@click.option("--format", "fmt", type=click.Choice(["osu", "imb", "nccl-tests", "csv"]),
              help="Default: recognised from each file.")
@click.option("--nranks", type=click.IntRange(1),
              help="Ranks of OSU runs (OSU does not always print it); processes of nccl-tests runs without "
                   "'#  Rank' lines.")
@click.option("--library", help="The MPI library the files were measured with (stored as mpi_library).")
@click.option("--name", "tag", default="imported", show_default=True, help="Tag of the run directory's name.")
@click.option("--results-dir", default="results", show_default=True, help="Where the run directory is made.")
def import_cmd(files, fmt, nranks, library, tag, results_dir):
    """Read OSU, IMB, nccl-tests outputs or a CSV of timings into a new run directory; print its path.

    The rows carry the tool's own statistics (OSU's Avg/Min/Max Latency, IMB's t_avg/t_min/
    t_max, nccl-tests' out-of-place and in-place times) and its sizes converted to ccbench's
    (x ranks for OSU's and IMB's scatter, gather, allgather, alltoall).  A CSV has the columns
    collective, algorithm, nranks, nbytes, time_s and optionally dtype, op, launch, sample,
    nodes, ppn.  Rows of an algorithm the registry models carry its cost terms, for fit and
    predict --from.  Each file's sha256 and the tool's version line are stored in run.json.
    """
    from ccbench.store.imports import import_files

    dest, parsed = import_files(files, fmt, nranks=nranks, library=library, tag=tag, results_dir=results_dir,
                                cost=_model_cost)
    rows = sum(len(p.rows) for p in parsed)
    modelled = sum(p.modelled_rows for p in parsed)
    wrong = sum(p.wrong_rows for p in parsed)
    click.echo(f"{rows} rows ({modelled} modelled"
               + (f"; {wrong} wrong by the tool's own check" if wrong else "") + f") from {len(files)} file(s) "
               f"({', '.join(sorted({p.tool for p in parsed}))}) in {dest}")


COMMANDS = [import_cmd]
