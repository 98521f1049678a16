"""`ccbench workload ddp|zero|moe|overlap|straggler|predict`: training steps' collectives, measured or predicted."""

import sys

import click

from ccbench.commands.common import launching_options
from ccbench.commands.options import network_options, run_options
from ccbench.core.errors import UsageError

__all__ = ["COMMANDS", "launch_options", "overrides"]


@click.group("workload")
def workload():
    """Training workloads: DDP, ZeRO/FSDP and MoE collective schedules, overlap, stragglers.

    Run under a launcher (mpiexec -n 4 python -m mpi4py -m ccbench workload ddp ...) or add
    --launch N to start one; `ccbench workload predict` prices a step at any scale.
    """


_RUN = run_options("item", "MPI thread level; auto = multiple when ranks oversubscribe the cores.",
                   "Continue an interrupted or failed run in its directory, skipping its finished items "
                   "(same workload, configuration, ranks and MPI library; its options may be left out).")
_COMMON = [
    click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False),
                 help="TOML workload file (see configs/workload-*.toml); flags override its keys."),
    click.option("-t", "--dtype", help="Element type of the buffers (default float32)."),
    click.option("--warmup", type=int, help="Untimed steps before sampling (default 3)."),
    click.option("--min-reps", "min_reps", type=int, help="Steps before the RSE rule may stop (default 10)."),
    click.option("--max-reps", "max_reps", type=int, help="Most timed steps (default 200)."),
    click.option("--target-rse", "target_rse", type=float, help="Stop when the RSE of the mean is below this."),
    click.option("--budget", "budget_s", type=float, help="Time budget per measurement in seconds (default 2)."),
    click.option("--loop", type=click.Choice(["python", "compiled", "auto"]),
                 help="What times the native blocking calls: python (default), compiled (a C loop built with the "
                      "MPI's mpicc on first use; an error without one) or auto (compiled where it builds). "
                      "Hand-written algorithms and overlap's non-blocking calls stay in Python."),
    *_RUN.values(),
    *launching_options("the whole workload", "steps"),
]
_NOT_KEYS = ("config_file", "tag", "resume", "launch", "launcher", "show", "launch_index", "oversubscribe")
_RENAME = {"algorithm": "algorithms", "mode": "modes", "variant": "variants", "rs": "rs_algorithms",
           "ag": "ag_algorithms", "collective": "collectives", "compute": "compute_s", "delay": "delay_s"}


def _common(fn):
    for opt in reversed(_COMMON):
        fn = opt(fn)
    return fn


def _model_option(fn):
    return click.option("-m", "--model", help="resnet50, bert-base, gpt2, or a file of tensor sizes "
                                              "(one per line, or JSON).")(fn)


def overrides(kw: dict) -> dict:
    """The configuration keys a workload command's options give (`kw`: click's parameters by name), for
    ``ccbench.measure.workload_config.load_workload_config``: options renamed to their keys (``algorithm`` ->
    ``algorithms``, ``delay`` -> ``delay_s``, ...), those left out (None) and those that are no key (``--config``,
    ``--launch``, ``--resume``, ...) dropped.  The inverse of `launch_options`."""
    return {_RENAME.get(k, k): v for k, v in kw.items() if k not in _NOT_KEYS and v is not None}


def _resolve(kind: str, kw: dict):
    """(configuration, run directory to resume or None); a resumed run keeps its own configuration."""
    from ccbench.measure.workload_config import load_workload_config, resume_workload

    if not kw.get("resume"):
        return load_workload_config(kind, kw.get("config_file"), overrides(kw)), None
    from ccbench.commands.common import nothing_to_resume
    from ccbench.store.results import resolve_run
    from ccbench.store.run import WORKLOAD, open_run

    path = resolve_run(kw["resume"], kw.get("results_dir") or "results")
    meta = open_run(path, kinds=(WORKLOAD,), what="workload --resume").meta
    cfg = resume_workload(kind, meta, path, kw.get("config_file"), overrides(kw))  # the same workload and settings
    nothing_to_resume(path, meta)
    return cfg, path


def launch_options(cfg) -> dict:
    """The options, by parameter name, that restate `cfg` (a ``WorkloadConfig``) on a launch's command line
    (`multilaunch.Replication`): every key of ``cfg.to_dict()`` under its option's name, a tuple as its values
    comma separated (None when empty).  ``overrides(launch_options(cfg))`` resolves to `cfg` again."""
    param = {key: name for name, key in _RENAME.items()}
    out = {}
    for key, value in cfg.to_dict().items():
        if key == "workload" or (key == "model" and cfg.workload == "overlap" and cfg.sizes):
            continue  # overlap with sizes stored the default model, unused (and refused beside sizes)
        if isinstance(value, tuple):
            value = ",".join(str(v) for v in value) or None
        out[param.get(key, key)] = value
    return out


def _measure(kind: str, kw: dict) -> None:
    from ccbench.commands.common import measure_or_launch

    cfg, resume = _resolve(kind, kw)  # refuse bad input first

    def replication(n: int):
        from ccbench.measure.workload import workload_replication

        return workload_replication(cfg, n, lambda part: launch_options(cfg))

    def measure(thread, console):
        from ccbench.measure.workload import run_workload

        return run_workload(cfg, thread=thread, argv=sys.argv, tag=kw.get("tag") or "", resume=resume,
                            console=console, launch=kw.get("launch_index"))

    measure_or_launch(click.get_current_context(), kw, cfg, resume, command=["workload", kind],
                      replication=replication, measure=measure)


@workload.command()
@_model_option
@click.option("-a", "--algorithm", help="Allreduce algorithms, comma separated (native, ring, ...) or all.")
@click.option("--mode", help="bucketed, per_tensor or both (default both).")
@click.option("--bucket-mb", "bucket_mb", help="DDP bucket caps in MiB, e.g. 25 (PyTorch's default) or 5,25,100: "
              "each a bucketed variant; the fastest per algorithm is named.")
@click.option("--first-bucket-mb", "first_bucket_mb", type=float,
              help="Cap of the first bucket in MiB (PyTorch: 1; 0 = same as the others).")
@_common
def ddp(**kw):
    """DDP: gradient allreduce per bucket (PyTorch's bucketing) versus one allreduce per tensor."""
    _measure("ddp", kw)


@workload.command()
@_model_option
@click.option("--variant", help="zero2, zero3, ddp_flat, ddp_layer (default all four).")
@click.option("--rs", help="Reduce-scatter algorithms for zero2/zero3 (default native).")
@click.option("--ag", help="Allgather algorithms for zero2/zero3 (default native).")
@click.option("-a", "--algorithm", help="Allreduce algorithms for the ddp_* baselines (default native).")
@_common
def zero(**kw):
    """ZeRO/FSDP: reduce-scatter + allgather per step (zero2) or per layer (zero3) vs allreduce."""
    _measure("zero", kw)


@workload.command()
@click.option("-a", "--algorithm", help="Alltoall algorithms (native, pairwise, bruck, linear) or all.")
@click.option("--ep", help="Expert-parallel degrees, comma separated (default every divisor of P from 2).")
@click.option("--tokens", type=int, help="Tokens per rank (default 1024).")
@click.option("--hidden", type=int, help="Hidden size (default 1024).")
@click.option("--experts-per-rank", "experts_per_rank", type=int, help="Experts per rank (default 2).")
@click.option("--top-k", "top_k", type=int, help="Experts per token (default 2).")
@click.option("--capacity-factor", "capacity_factor", type=float, help="Expert capacity factor (default 1).")
@click.option("--dispatch", help="padded (alltoalls of capacity-padded blocks), routed (alltoallvs of the tokens the "
                                 "gate routes: the moe count distribution), or padded,routed (default).")
@_common
def moe(**kw):
    """MoE: all-to-all dispatch and combine of tokens, padded and routed, per expert-parallel degree."""
    _measure("moe", kw)


@workload.command()
@_model_option
@click.option("-C", "--collective", help="Non-blocking collectives: allreduce, reduce_scatter, allgather, "
                                         "alltoall, bcast, reduce, gather, scatter (default allreduce).")
@click.option("-a", "--algorithm", help="native (MPI_I<coll>), the hand-written schedules (ring, binomial), "
                                        "comma separated, or all (default native).")
@click.option("-s", "--sizes", help="Sizes (8:1M, 64K,1M); default: the model's DDP bucket sizes.")
@click.option("--bucket-mb", "bucket_mb", help="Bucket caps in MiB when sizes come from the model (5,25: both).")
@click.option("--first-bucket-mb", "first_bucket_mb", type=float, help="First bucket's cap in MiB.")
@click.option("--compute", help="Compute time per call (5ms); default: --compute-factor x the collective alone.")
@click.option("--compute-factor", "compute_factor", type=float,
              help="Compute as a multiple of the collective alone (default 1, as OSU).")
@click.option("--test-calls", "test_calls", type=int, help="MPI_Test calls spread over the compute (default 0).")
@click.option("--async-progress", "async_progress", type=click.Choice(["off", "on", "both"]),
              help="MPICH's asynchronous progress thread (MPIR_CVAR_ASYNC_PROGRESS=1): off (default), on, or both "
                   "(a launch of each); needs --launch N.")
@_common
def overlap(**kw):
    """Overlap of non-blocking collectives with a calibrated compute kernel (OSU's and IMB-NBC's definitions)."""
    _measure("overlap", kw)


@workload.command()
@click.option("-C", "--collective", help="The collective (default allreduce).")
@click.option("-a", "--algorithm", help="Algorithms, comma separated, or all.")
@click.option("-s", "--sizes", help="Sizes (default 1M).")
@click.option("--delay", help="How late the straggler is before each call (default 1ms).")
@click.option("--delayed-rank", "delayed_rank", type=int, help="Which rank is late (default the last).")
@_common
def straggler(**kw):
    """Stragglers: one rank late before each call; how much of its delay each algorithm passes on."""
    _measure("straggler", kw)


@workload.command("predict")
@click.argument("kind", type=click.Choice(["ddp", "zero", "moe"]))
@_model_option
@click.option("-n", "ranks", required=True, help="Rank counts: 1024 or 64,1024 or a range 64:65536:4.")
@network_options
@click.option("-t", "--dtype", default="float32", show_default=True)
@click.option("--bucket-mb", "bucket_mb", type=float, default=25.0, show_default=True)
@click.option("--first-bucket-mb", "first_bucket_mb", type=float, default=1.0, show_default=True)
@click.option("--ep", help="MoE expert-parallel degrees (default: 8 and every rank count).")
@click.option("--tokens", type=int, default=1024, show_default=True)
@click.option("--hidden", type=int, default=1024, show_default=True)
@click.option("--experts-per-rank", "experts_per_rank", type=int, default=2, show_default=True)
@click.option("--top-k", "top_k", type=int, default=2, show_default=True)
@click.option("--capacity-factor", "capacity_factor", type=float, default=1.0, show_default=True)
def predict_cmd(kind, model, ranks, from_run, results_dir, alpha, beta, gamma, dtype, bucket_mb, first_bucket_mb,
                ep, tokens, hidden, experts_per_rank, top_k, capacity_factor):
    """Predict a workload's step communication time at any scale from the alpha-beta-gamma model."""
    from ccbench.analysis.runs import given_params
    from ccbench.analysis.workload_predict import predict_workload
    from ccbench.commands.common import new_console
    from ccbench.core.dtypes import dtype_of
    from ccbench.core.units import parse_ranks
    from ccbench.present.model_tables import oversubscribed_note, params_line, prediction_tables
    from ccbench.present.table import render
    from ccbench.store.run import SWEEP, open_run

    run = open_run(from_run, results_dir, kinds=(SWEEP,), what="workload predict --from") if from_run else None
    params, source = given_params(run, alpha, beta, gamma, "workload predict")
    itemsize = dtype_of(dtype).itemsize
    rank_list = parse_ranks(ranks)
    eps = None
    if ep:
        try:
            eps = sorted({int(x) for x in ep.split(",")})
        except ValueError:
            raise UsageError(f"bad --ep {ep!r}: expected degrees such as 8,64") from None
        if min(eps) < 1:
            raise UsageError("--ep degrees must be >= 1")
    result = predict_workload(kind, rank_list, params, itemsize=itemsize, model=model or "gpt2",
                              bucket_mb=bucket_mb, first_bucket_mb=first_bucket_mb, eps=eps, tokens=tokens,
                              hidden=hidden, experts_per_rank=experts_per_rank, top_k=top_k,
                              capacity_factor=capacity_factor)
    console = new_console()
    console.print(params_line(params, source))
    render(prediction_tables(result), console)
    note = oversubscribed_note(run)
    if note:
        console.print(note, style="yellow", markup=False, highlight=False)


COMMANDS = [workload]
