"""``ccbench fit`` and ``ccbench predict``: alpha-beta-gamma models of stored runs, and at scale."""


import click

from ccbench.commands.common import new_console
from ccbench.commands.options import network_options
from ccbench.core.errors import UsageError

__all__ = ["COMMANDS"]


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
def fit(run_path, results_dir):
    """Fit cost models to a stored run; write fits.json and fits.csv beside it and print tables.

    Fits every curve (alpha + beta n, segmented at protocol changes), the network
    parameters from ping-pong + the local reduction benchmark and jointly over the
    hand-written algorithms, checks predictions against the measurements and says who
    wins where.  The run's own files are never modified; earlier fits are never overwritten.
    """
    from ccbench.analysis.runs import fit_run
    from ccbench.present.model_tables import print_fit

    print_fit(fit_run(run_path, results_dir), new_console())


@click.command("predict")
@network_options
@click.option("--intra-alpha", "intra_alpha", help="Intra-node latency for the two-level allreduce.")
@click.option("--intra-beta", "intra_beta", help="Intra-node s/byte or bandwidth, as --beta.")
@click.option("--ppn", type=int, help="Ranks per node: the hierarchical allreduce's nodes, and the two-level model's.")
@click.option("-n", "ranks", required=True, help="Rank counts: 1024,4096 or a range 64:65536:4.")
@click.option("-s", "--sizes", default="8:64M:8", show_default=True, help="Sizes in bytes: 8:64M[:FACTOR] or 8,4K,1M.")
@click.option("-C", "--collective", "collectives", help="Collectives, comma separated (default: every modelled one).")
def predict_cmd(from_run, results_dir, alpha, beta, gamma, intra_alpha, intra_beta, ppn, ranks, sizes,
                collectives):
    """Predict every modelled algorithm's time at any rank count and size, and the winner per size."""
    from ccbench.analysis.predict import TwoLevelParams
    from ccbench.analysis.runs import given_params, predict_table
    from ccbench.core.units import parse_inverse_rate, parse_ranks, parse_sizes, parse_time
    from ccbench.present.model_tables import print_predictions

    params, source = given_params(from_run, results_dir, alpha, beta, gamma)
    rank_list, size_list = parse_ranks(ranks), parse_sizes(sizes)
    colls = [c.strip() for c in collectives.split(",") if c.strip()] if collectives else None
    two = None
    if ppn is not None and ppn < 1:
        raise UsageError(f"--ppn must be at least 1, got {ppn}")
    if intra_alpha is not None or intra_beta is not None:
        if intra_alpha is None or intra_beta is None or ppn is None:
            raise UsageError("the two-level model needs all of --intra-alpha, --intra-beta and --ppn")
        ia, ib = parse_time(intra_alpha, "--intra-alpha"), parse_inverse_rate(intra_beta, "--intra-beta")
        if ia < 0 or ib < 0:
            raise UsageError("--intra-alpha and --intra-beta must be >= 0")
        two = TwoLevelParams(ia, ib, params.alpha_s, params.beta_s_per_byte, ppn,
                             params.gamma_s_per_byte or 0.0)
    tables = predict_table(params, rank_list, size_list, colls, two_level=two, ranks_per_node=ppn)
    print_predictions(params, source, two, ppn, tables, new_console())


COMMANDS = [fit, predict_cmd]
