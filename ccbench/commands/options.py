"""Click options shared by commands in different modules (measuring runs; `ccbench predict` and `workload predict`)."""

import click

from ccbench.core.choices import BINDINGS, THREAD_LEVELS

__all__ = ["BIND_HELP", "OUT_OPTION", "PLACEMENT_OPTION", "network_options", "run_options"]

_NETWORK_OPTIONS = [
    click.option("--from", "from_run", metavar="RUN", help="Take alpha, beta, gamma from a run's ping-pong "
                 "and local reduction benchmark."),
    click.option("--results-dir", default="results", help="Where to look for --from RUN by name or 'latest'."),
    click.option("--alpha", help="Network latency: 2us, 1.5ms, 3e-6 (bare numbers are seconds)."),
    click.option("--beta", help="Inverse bandwidth in s/byte (1e-10) or a bandwidth in bytes/s (10GB/s, 800MiB/s)."),
    click.option("--gamma", help="Reduction time per byte, as --beta (default 0: reductions free)."),
]


def network_options(fn):
    """The options that give a prediction its parameters (see `ccbench.analysis.runs.given_params`)."""
    for opt in reversed(_NETWORK_OPTIONS):
        fn = opt(fn)
    return fn


#: Where a command that reads runs writes what it derives (``ccbench.store.derived``).
OUT_OPTION = click.option("--out", type=click.Path(file_okay=False), metavar="DIR",
                          help="Folder for the files written (default: RESULTS-derived/RUN beside the results tree; "
                               "the run itself is never written).")


#: Re-rank the communicator before a sweep (``ccbench.core.placement``).
PLACEMENT_OPTION = click.option(
    "--placement", metavar="block|cyclic|random[:SEED]|FILE",
    help="Re-rank the ranks before the sweep: block (each node's ranks consecutive), cyclic (dealt one node at a "
         "time), random (seeded, recorded), or a permutation of 0..P-1 listing the launch's ranks in their new "
         "order (a file, one rank per line or comma separated, or the list: 0,2,1,3). Default: the launch's order.")


BIND_HELP = ("How the launcher binds the ranks: core, socket or none (given in its own syntax: hydra -bind-to, "
             "Open MPI --bind-to, srun --cpu-bind); auto (default) = core when the ranks fit the cores, else none. "
             "Recorded in run.json with each rank's CPUs.")


def run_options(item: str, thread_help: str, resume_help: str) -> dict:
    """The options every measuring command has (sweeps and workloads): watchdog, thread level, results
    directory, tag, resume and binding; `item` is what one unit of the run is called ("case", "item")."""
    return {
        "watchdog": click.option("--watchdog", "watchdog_s", type=float, help=f"End the job when {_a(item)} runs this "
                                 "many seconds past its budget (default 300; 0 = off)."),
        "thread_level": click.option("--thread-level", "thread_level", type=click.Choice(THREAD_LEVELS),
                                     help=thread_help),
        "results_dir": click.option("--results-dir", "results_dir",
                                    help="Where run directories are created (default results/)."),
        "tag": click.option("--tag", default="", help="Appended to the run directory's name."),
        "resume": click.option("--resume", "resume", metavar="RUN", help=resume_help),
        "bind": click.option("--bind", "bind", type=click.Choice(BINDINGS), help=BIND_HELP),
    }


def _a(item: str) -> str:
    return ("an " if item[0] in "aeiou" else "a ") + item
