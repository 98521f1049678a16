"""``ccbench plan``: how a replicated run should have split its time between launches and samples."""

import click

from ccbench.commands.common import new_console

__all__ = ["COMMANDS"]


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
def plan(run_path, results_dir):
    """From a run of several launches: the optimal samples per launch and what it would gain.

    Uses the run's own launch-to-launch and call-to-call spread and its costs (Kalibera &
    Jones, ISMM 2013); the run needs --launches 2 or more.
    """

    from ccbench.analysis.design import launch_design
    from ccbench.present.plan import design_tables
    from ccbench.present.table import render
    from ccbench.store.run import open_run, part_provenance

    run = open_run(run_path, results_dir, kinds=("sweep",), need_rows=True, what="plan")
    render(design_tables(launch_design(run.rows, run.meta, part_provenance(run)), run.path.name), new_console())


COMMANDS = [plan]
