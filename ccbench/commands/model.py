"""``ccbench fit`` and ``ccbench predict``: alpha-beta-gamma models of stored runs, and at scale."""


import click

from ccbench.commands.common import OUT_OPTION, new_console
from ccbench.core.errors import UsageError

__all__ = ["COMMANDS"]


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
@OUT_OPTION
def fit(run_path, results_dir, out):
    """Fit cost models to a stored run; print tables and write fits.json and fits.csv.

    Fits every curve (alpha + beta n, segmented at protocol changes), the network
    parameters from ping-pong + the local reduction benchmark and jointly over the
    hand-written algorithms, checks predictions against the measurements and says who
    wins where.  The run is only read; the files go to --out DIR, by default
    RESULTS-derived/RUN beside the results tree, never over earlier fits.
    """
    from ccbench.present.model_tables import print_fit
    from ccbench.workflow.fit import fit as fit_and_write

    res = fit_and_write(run_path, results_dir, out)
    print_fit(res.fit, new_console(), res.files)


@click.command("predict")
@click.option("--from", "from_runs", metavar="RUN", multiple=True,
              help="Take the parameters from a run (with --against: fit on this run; repeatable).")
@click.option("--params", "which", type=click.Choice(["auto", "pingpong", "joint", "effective"]), default="auto",
              show_default=True, help="Which of a run's parameters: ping-pong + reduce_local, the joint fit over "
              "counted traffic, effective per path fitted to the collectives; auto = the best the run supports.")
@click.option("--against", metavar="RUN", help="Cross-validate: predict this larger run from the --from runs.")
@click.option("-o", "--output", metavar="FILE", help="With --against: write the table (.csv, else JSON).")
@click.option("--results-dir", default="results", help="Where to look for runs by name or 'latest'.")
@click.option("--alpha", help="Network latency: 2us, 1.5ms, 3e-6 (bare numbers are seconds).")
@click.option("--beta", help="Inverse bandwidth in s/byte (1e-10) or a bandwidth in bytes/s (10GB/s, 800MiB/s).")
@click.option("--gamma", help="Reduction time per byte, as --beta (default 0: reductions free).")
@click.option("--intra-alpha", "intra_alpha", help="Intra-node latency for the two-level allreduce.")
@click.option("--intra-beta", "intra_beta", help="Intra-node s/byte or bandwidth, as --beta.")
@click.option("--intra-from", "intra_from", metavar="RUN",
              help="Intra-node alpha and beta from a one-node run: its ping-pong, beta no better than the node's "
                   "memory bandwidth shared by --ppn ranks (needs --ppn).")
@click.option("--levels-from", "levels_from", metavar="RUN",
              help="Both levels from a diagnosis run (ccbench doctor): the link levels its pair times show, inside "
                   "and between nodes (--ppn: the run's own unless given).")
@click.option("--ppn", type=int, help="Ranks per node: the hierarchical allreduce's nodes, and the two-level model's.")
@click.option("--placement", metavar="LIST",
              help="With the two-level model: time each hand-written algorithm's schedule with the ranks re-ranked "
                   "block, cyclic, random[:SEED] or as a FILE of ranks (comma list, e.g. block,cyclic), and show "
                   "the levels its critical path crosses (up to 256 ranks).")
@click.option("--acked-from", "acked_from", metavar="SIZE",
              help="With --placement: sends between nodes of at least SIZE complete only when acknowledged "
                   "(MPI over TCP; default: every send completes at once).")
@click.option("-n", "ranks", help="Rank counts: 1024,4096 or a range 64:65536:4 (not with --against).")
@click.option("-s", "--sizes", default="8:64M:8", show_default=True, help="Sizes in bytes: 8:64M[:FACTOR] or 8,4K,1M.")
@click.option("-C", "--collective", "collectives",
              help="Collectives, comma separated (default: every modelled one but the v-collectives).")
@click.option("--counts", help="The v-collectives' count distribution: uniform (default), heavy:F, zipf:S, "
              "moe:E,K,CF[,T][@SEED], weights:W0,W1,... (~ before it: reversed); as sweeps take it.")
def predict_cmd(from_runs, which, against, output, results_dir, alpha, beta, gamma, intra_alpha, intra_beta,
                intra_from, levels_from, ppn, placement, acked_from, ranks, sizes, collectives, counts):
    """Predict every modelled algorithm's time at any rank count and size, and the winner per size.

    With --against RUN: fit on the --from runs, predict RUN (a larger rank count) and compare.
    """
    colls = [c.strip() for c in collectives.split(",") if c.strip()] if collectives else None
    if against:
        from ccbench.present.crossval import print_crossval
        from ccbench.workflow.predict import cross_validation

        if ranks or alpha or beta or gamma or intra_alpha or intra_beta or intra_from or levels_from or ppn \
                or placement:
            raise UsageError("--against takes the rank count and sizes from its run: leave out -n and the "
                             "parameter options")
        if counts:
            raise UsageError("--against prices each case on the counts its run measured: leave out --counts")
        doc, written = cross_validation(from_runs, against, results_dir, which=which, collectives=colls,
                                        output=output)
        print_crossval(doc, new_console(), written)
        return
    from ccbench.analysis.runs import predict_table, prediction_inputs
    from ccbench.core.units import parse_ranks, parse_sizes
    from ccbench.present.model_tables import print_predictions

    if len(from_runs) > 1:
        raise UsageError("several --from runs are for cross-validation: add --against RUN")
    if output:
        raise UsageError("-o FILE writes the cross-validation table: add --against RUN")
    if not ranks:
        raise UsageError("predict needs -n RANKS (or --against RUN)")
    from ccbench.store.run import SWEEP, open_run

    if ppn is not None and ppn < 1:
        raise UsageError(f"--ppn must be at least 1, got {ppn}")
    rank_list, size_list = parse_ranks(ranks), parse_sizes(sizes)
    run, intra_text = None, None
    if levels_from:
        if from_runs or alpha or beta or intra_alpha or intra_beta or intra_from:
            raise UsageError("--levels-from gives both levels: leave out --from, --alpha, --beta and the --intra "
                             "options")
        params, two, source = _level_inputs(levels_from, results_dir, ppn, gamma)
        algorithms = None
    else:
        run = open_run(from_runs[0], results_dir, kinds=(SWEEP,), what="predict --from") if from_runs else None
        params, source, algorithms = prediction_inputs(run, alpha, beta, gamma, which)
        two, intra_text = _two_level(params, intra_from, intra_alpha, intra_beta, ppn, results_dir)
    if counts and (placement or acked_from):
        raise UsageError("--counts sizes the v-collectives' blocks; --placement times the even collectives' "
                         "schedules: leave one out")
    if placement or acked_from:
        _predict_placed(params, source, two, rank_list, size_list, colls, placement, acked_from, run)
        return
    tables = predict_table(params, rank_list, size_list, colls, two_level=two, ranks_per_node=ppn,
                           algorithms=algorithms, counts=counts)
    console = new_console()
    print_predictions(params, source, two, ppn, tables, console)
    if intra_text:
        console.print(intra_text)
    from ccbench.present.model_tables import oversubscribed_note

    note = oversubscribed_note(run)
    if note:
        console.print(note, style="yellow", markup=False, highlight=False)


def _level_inputs(levels_from, results_dir, ppn, gamma) -> tuple:
    """(inter-node parameters, the two-level model, where they come from) of ``--levels-from RUN``."""
    from dataclasses import replace

    from ccbench.analysis.runs import level_params
    from ccbench.core.units import parse_inverse_rate
    from ccbench.store.run import open_run

    params, two, source = level_params(open_run(levels_from, results_dir, what="predict --levels-from"), ppn)
    if gamma is not None:
        g = parse_inverse_rate(gamma, "--gamma")
        params, two = replace(params, gamma_s_per_byte=g), replace(two, gamma_s_per_byte=g)
    return params, two, source


def _two_level(params, intra_from, intra_alpha, intra_beta, ppn, results_dir) -> tuple:
    """(the two-level model or None, where its intra-node level comes from or None) of the --intra options."""
    from ccbench.analysis.predict import TwoLevelParams
    from ccbench.core.units import parse_inverse_rate, parse_time
    from ccbench.store.run import SWEEP, open_run

    if intra_from:
        from ccbench.analysis.runs import intra_node_params

        if intra_alpha is not None or intra_beta is not None:
            raise UsageError("give either --intra-from RUN or --intra-alpha/--intra-beta, not both")
        if ppn is None:
            raise UsageError("--intra-from needs --ppn (the ranks that share a node)")
        ia, ib, text = intra_node_params(open_run(intra_from, results_dir, kinds=(SWEEP,),
                                                  what="predict --intra-from"), ppn)
        return TwoLevelParams(ia, ib, params.alpha_s, params.beta_s_per_byte, ppn,
                              params.gamma_s_per_byte or 0.0), text
    if intra_alpha is None and intra_beta is None:
        return None, None
    if intra_alpha is None or intra_beta is None or ppn is None:
        raise UsageError("the two-level model needs all of --intra-alpha, --intra-beta and --ppn")
    ia, ib = parse_time(intra_alpha, "--intra-alpha"), parse_inverse_rate(intra_beta, "--intra-beta")
    if ia < 0 or ib < 0:
        raise UsageError("--intra-alpha and --intra-beta must be >= 0")
    return TwoLevelParams(ia, ib, params.alpha_s, params.beta_s_per_byte, ppn, params.gamma_s_per_byte or 0.0), None


def _placements(text: str) -> dict:
    """{label: placement} of ``--placement``: a comma list of block, cyclic, random[:SEED], or one FILE or rank list."""
    import re

    from ccbench.core.placement import PLACEMENTS, parse_placement

    parts = [p.strip() for p in text.split(",")]
    if all(p in PLACEMENTS or re.fullmatch(r"random:\d+", p) for p in parts):
        return {p: parse_placement(p) for p in dict.fromkeys(parts)}
    return {text if len(text) <= 24 else "given": parse_placement(text)}


def _predict_placed(params, source, two, rank_list, size_list, colls, placement, acked_from, run) -> None:
    """``predict --placement``: the schedule model (`ccbench.analysis.placed`) per placement, and its answer."""
    from ccbench.analysis.placed import placed_predictions
    from ccbench.core.units import parse_size
    from ccbench.present.model_tables import oversubscribed_note, placed_tables, print_predictions
    from ccbench.present.table import render

    if two is None:
        raise UsageError("--placement prices two levels: give --intra-alpha and --intra-beta (or --intra-from RUN) "
                         "and --ppn")
    if not placement:
        raise UsageError("--acked-from goes with --placement")
    acked = parse_size(acked_from) if acked_from else None
    if acked is not None and acked < 1:
        raise UsageError(f"--acked-from must be at least 1 byte, got {acked_from}")
    places = _placements(placement)
    rows = [r for P in rank_list for r in placed_predictions(two, P, size_list, colls, places, acked_from=acked)]
    if not rows:
        raise UsageError("no hand-written algorithm of these collectives runs at these rank counts")
    console = new_console()
    print_predictions(params, source, two, two.ranks_per_node, [], console)
    note = oversubscribed_note(run)
    if note:
        console.print(note, style="yellow", markup=False, highlight=False)
    render(placed_tables(rows), console)


COMMANDS = [fit, predict_cmd]
