"""Workloads, pure tier: model size lists, schedules, bucketing, counted traffic, predictions, config, CLI."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.simcomm import simulate
from ccbench.analysis.fit import NetworkParams
from ccbench.analysis.predict import predict
from ccbench.analysis.workload_predict import predict_workload
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.errors import UsageError
from ccbench.measure.workload_config import KEYS, load_workload_config, resolve_workload
from ccbench.measure.workload_engine import StepBuffers, step_calls
from ccbench.store.workload_rows import WorkloadRow
from ccbench.workloads.models import BUILTIN, Model, Tensor, load_model
from ccbench.workloads.schedule import (
    ddp_buckets,
    ddp_schedule,
    moe_block_tokens,
    moe_schedule,
    predict_step_s,
    straggler_slowdown,
    zero_schedule,
)

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def small_model() -> Model:
    sizes = [(5, "a"), (300, "a"), (7, "b"), (1000, "b"), (33, "c"), (64, "c"), (2, "d")]
    return Model("small", tuple(Tensor(f"t{i}", n, (n,), layer) for i, (n, layer) in enumerate(sizes)))


# -- models -------------------------------------------------------------------------


@pytest.mark.parametrize("name,total,ntensors", [
    ("resnet50", 25_557_032, 161),     # torchvision's documented count; 161 parameter tensors
    ("bert-base", 109_482_240, 199),   # ~109.48M (BertModel with pooler)
    ("gpt2", 124_439_808, 148),        # GPT-2 124M, LM head tied
])
def test_shipped_models_match_published_counts(name, total, ntensors):
    m = load_model(name)
    assert m.numel == total
    assert len(m.tensors) == ntensors
    assert m.source


def test_shipped_files_are_what_the_generator_makes():
    for name, make in BUILTIN.items():
        stored = json.loads((ROOT / "ccbench" / "data" / "models" / f"{name}.json").read_text())
        assert stored == make().to_dict(), f"regenerate with python -m ccbench.workloads.models ({name})"


def test_architecture_details():
    gpt2 = load_model("gpt2")
    assert gpt2.tensors[0].shape == (50257, 768) and gpt2.tensors[1].shape == (1024, 768)
    assert not any("lm_head" in t.name for t in gpt2.tensors)  # tied to wte
    assert [name for name, _ in gpt2.layers()] == ["embeddings", *[f"h.{i}" for i in range(12)], "ln_f"]
    r = load_model("resnet50")
    assert r.tensors[0].shape == (64, 3, 7, 7) and r.tensors[-2].shape == (1000, 2048)
    assert sum(1 for t in r.tensors if "downsample.0" in t.name) == 4
    b = load_model("bert-base")
    assert b.tensors[0].shape == (30522, 768) and b.tensors[2].shape == (2, 768)


def test_user_lists(tmp_path):
    txt = tmp_path / "sizes.txt"
    txt.write_text("# my model\n100 layer0\n\n20   # a bias\n3000 layer1\n")
    m = load_model(str(txt))
    assert [t.numel for t in m.tensors] == [100, 20, 3000]
    assert [t.layer for t in m.tensors] == ["layer0", "t1", "layer1"]
    js = tmp_path / "sizes.json"
    js.write_text("[4, 5, 6]")
    assert [t.numel for t in load_model(str(js)).tensors] == [4, 5, 6]
    obj = tmp_path / "obj.json"
    obj.write_text(json.dumps({"name": "x", "tensors": [{"shape": [3, 4], "layer": "L"}, {"numel": 7}]}))
    m = load_model(str(obj))
    assert m.name == "x" and [t.numel for t in m.tensors] == [12, 7] and m.tensors[0].layer == "L"


@pytest.mark.parametrize("text,why", [
    ("12\nabc\n", "not a whole number"),
    ("12\n0\n", "must be >= 1"),
    ("# nothing\n", "lists no tensors"),
    ("[1, 2", "not valid JSON"),
    ('{"tensors": [{"shape": [2, 2], "numel": 5}]}', "does not match"),
    ('{"tensors": [3], "total_params": 4}', "total_params"),
    ("1 a b\n", "SIZE [LAYER]"),
])
def test_bad_user_lists(tmp_path, text, why):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(UsageError, match=re_escape(why)):
        load_model(str(p))


def re_escape(s):
    import re

    return re.escape(s)


def test_unknown_model():
    with pytest.raises(UsageError, match="unknown model 'gpt3'"):
        load_model("gpt3")


# -- DDP bucketing ------------------------------------------------------------------


def test_buckets_reverse_order_first_cap_and_overshoot():
    # sizes in parameter order; walked backwards: 256 closes the 100-byte first bucket,
    # then 132 + 4000 >= 1000 closes the next (overshooting by its last tensor), ...
    sizes = [20, 1200, 28, 4000, 132, 256]
    assert ddp_buckets(sizes, 1000, 100) == [[5], [4, 3], [2, 1], [0]]
    # without a first-bucket cap every bucket uses the main cap
    assert ddp_buckets(sizes, 1000) == [[5, 4, 3], [2, 1], [0]]
    # a cap larger than the model: one bucket with everything, reversed
    assert ddp_buckets(sizes, 10**9) == [[5, 4, 3, 2, 1, 0]]
    # every tensor in its own bucket when the cap is one byte
    assert ddp_buckets(sizes, 1, 1) == [[i] for i in reversed(range(6))]


def test_bucket_cover_every_tensor_once_in_reverse_order():
    rng = np.random.default_rng(1)
    for _ in range(50):
        sizes = [int(x) for x in rng.integers(1, 5000, size=int(rng.integers(1, 40)))]
        buckets = ddp_buckets(sizes, int(rng.integers(1, 20000)), int(rng.integers(1, 5000)))
        flat = [i for b in buckets for i in b]
        assert flat == list(reversed(range(len(sizes))))
        assert all(b for b in buckets)


def test_gpt2_default_buckets():
    m = load_model("gpt2")
    sch = ddp_schedule(m, 4, "bucketed")
    sizes = [c.count * 4 for c in sch.calls]
    assert sum(c.count for c in sch.calls) == m.numel
    assert sizes[0] >= MIB  # the first bucket closes once it reaches 1 MiB
    # every bucket but the last reached its cap, and without its last tensor it was below it
    caps = [MIB] + [25 * MIB] * (len(sizes) - 1)
    for c, cap in zip(sch.calls[:-1], caps, strict=False):
        assert c.count * 4 >= cap
        assert (c.count - m.tensors[c.tensors[-1]].numel) * 4 < cap
    assert sch.calls[0].tensors[0] == len(m.tensors) - 1  # starts from the last parameter


def test_per_tensor_schedule():
    m = small_model()
    sch = ddp_schedule(m, 4, "per_tensor")
    assert [c.count for c in sch.calls] == [t.numel for t in reversed(m.tensors)]
    with pytest.raises(UsageError):
        ddp_schedule(m, 4, "sideways")


# -- ZeRO / FSDP and MoE ------------------------------------------------------------


@pytest.mark.parametrize("P", [1, 3, 4, 7])
def test_zero_padding_and_calls(P):
    m = small_model()
    n = m.numel
    z2 = zero_schedule(m, P, "zero2")
    assert [c.collective for c in z2.calls] == ["reduce_scatter", "allgather"]
    assert all(c.count == math.ceil(n / P) for c in z2.calls)
    flat = zero_schedule(m, P, "ddp_flat")
    assert flat.calls[0].count == math.ceil(n / P) * P and flat.calls[0].count % P == 0
    z3 = zero_schedule(m, P, "zero3")
    units = m.layers()
    assert len(z3.calls) == 3 * len(units)
    fwd = z3.calls[:len(units)]
    assert [c.label for c in fwd] == [f"{u} forward" for u, _ in units]
    assert [c.collective for c in z3.calls[len(units):]] == ["allgather", "reduce_scatter"] * len(units)
    assert sum(c.payload for c in fwd) == n
    layer = zero_schedule(m, P, "ddp_layer")
    assert [c.count for c in layer.calls] == [math.ceil(sum(m.tensors[i].numel for i in idx) / P) * P
                                              for _, idx in reversed(units)]


def test_moe_block_tokens():
    # 1024 tokens, top-2, 2 experts per rank on 4 ranks: capacity ceil(2048 / 8) = 256 per expert
    assert moe_block_tokens(1024, 2, 4, 2, 1.0) == 512
    assert moe_block_tokens(1024, 2, 4, 2, 1.25) == 2 * 320
    assert moe_block_tokens(10, 3, 4, 1, 1.0) == 3  # ceil(10 / 12) = 1 per expert
    sch = moe_schedule(1024, 768, 2, 4, 2)
    assert [c.label for c in sch.calls] == ["dispatch", "combine"]
    assert sch.group_ranks == 4 and sch.calls[0].count == 512 * 768
    assert sch.nbytes(2, 4) == 2 * 4 * 512 * 768 * 2
    with pytest.raises(ValueError):
        moe_block_tokens(0, 1, 1)


# -- counted traffic on the simulated communicator ----------------------------------


def _simulate(schedule, P, algs, dtype="float32"):
    G = schedule.group_ranks or P

    def body(comm):
        sub = comm if G == P else comm.Split(comm.rank // G, comm.rank)
        cc = CountedComm(sub)
        bufs = StepBuffers(schedule, G, sub.Get_rank(), dtype)
        bufs.fill()
        for call in step_calls(cc, schedule, algs, bufs):
            call()
        return bufs.nwrong(), cc.counts.bytes_sent

    results, _ = simulate(P, body)
    return sum(r[0] for r in results), sum(r[1] for r in results)


@pytest.mark.parametrize("P", [2, 3, 4, 5])
def test_ddp_sends_exactly_the_model_bytes(P):
    m = small_model()
    ring = {"allreduce": get("allreduce", "ring")}
    for sch in (ddp_schedule(m, 4, "bucketed", 1000 / MIB, 100 / MIB), ddp_schedule(m, 4, "per_tensor")):
        wrong, sent = _simulate(sch, P, ring)
        assert wrong == 0
        # a ring allreduce sends every element 2(P-1) times in all: once per step of each phase
        assert sent == 2 * (P - 1) * m.numel * 4
        assert sum(c.count for c in sch.calls) == m.numel


@pytest.mark.parametrize("P", [3, 5])
def test_a_half_precision_step_is_judged_within_its_bound_and_a_wrong_element_is_caught(P):
    """bfloat16 sums of 3 or more ranks round (integers above 256 are not bfloat16 numbers): every call is held to
    its bound, as a sweep's case is, not compared exactly; an element off by far more is still wrong."""
    pytest.importorskip("ml_dtypes")
    m = small_model()
    algs = {"allreduce": get("allreduce", "ring"), "reduce_scatter": get("reduce_scatter", "pairwise"),
            "allgather": get("allgather", "ring")}
    for sch in (ddp_schedule(m, 4, "per_tensor"), zero_schedule(m, P, "zero2")):
        rounded: list = []

        def body(comm, sch=sch, rounded=rounded):
            cc = CountedComm(comm)
            bufs = StepBuffers(sch, P, comm.rank, "bfloat16")
            bufs.fill()
            for call in step_calls(cc, sch, algs, bufs):
                call()
            exact = [bufs.nwrong_call(i) for i in range(len(sch.calls))]
            for i, c in enumerate(sch.calls):  # the exact results, from the collective's own buffer hook
                exp = COLLECTIVES[c.collective].buffers(c.count, P, comm.rank, bufs.dtype).outputs[0][1]
                rounded.append(int(np.count_nonzero(bufs.views(i)[1] != exp)))
            bufs.recv[0] = bufs.recv[0] * 2 + 64
            return exact, bufs.nwrong_call(0)

        results, _ = simulate(P, body)
        assert sum(rounded) > 0  # the sums did round: the check is not exact comparison in disguise
        assert all(sum(exact) == 0 for exact, _ in results)
        assert all(first == 1 for _, first in results)


@pytest.mark.parametrize("P", [2, 3, 4])
def test_zero_sends_exactly_the_padded_bytes(P):
    m = small_model()
    algs = {"reduce_scatter": get("reduce_scatter", "pairwise"), "allgather": get("allgather", "ring"),
            "allreduce": get("allreduce", "ring")}
    for variant in ("zero2", "zero3", "ddp_flat", "ddp_layer"):
        sch = zero_schedule(m, P, variant)
        wrong, sent = _simulate(sch, P, algs, "int32")
        assert wrong == 0
        # pairwise RS and ring AG: every rank sends P-1 blocks; ring AR: 2(P-1) x the buffer
        expect = sum((P * (P - 1) * c.count if c.collective != "allreduce" else 2 * (P - 1) * c.count)
                     for c in sch.calls) * 4
        assert sent == expect
        padded = sum(c.count * (P if c.collective != "allreduce" else 1) for c in sch.calls)
        per_unit = 3 if variant == "zero3" else 2 if variant == "zero2" else 1
        assert padded >= per_unit * m.numel and padded - per_unit * m.numel < per_unit * P * len(m.tensors)


@pytest.mark.parametrize("P,ep", [(4, 2), (4, 4), (6, 3)])
def test_moe_sends_exactly_the_token_bytes(P, ep):
    sch = moe_schedule(10, 6, 2, ep, top_k=2)
    wrong, sent = _simulate(sch, P, {"alltoall": get("alltoall", "pairwise")}, "float64")
    assert wrong == 0
    block = moe_block_tokens(10, 2, ep, 2) * 6
    assert sent == 2 * P * (ep - 1) * block * 8  # dispatch + combine, P-1 blocks per rank of its group


# -- measures and predictions -------------------------------------------------------


def test_straggler_formula():
    assert straggler_slowdown(6e-3, 1e-3, 5e-3) == pytest.approx(1.0)
    assert straggler_slowdown(1e-3, 1e-3, 5e-3) == 0.0
    with pytest.raises(ValueError):
        straggler_slowdown(1.0, 1.0, 0.0)


def test_predicted_step_is_the_sum_of_its_calls():
    params = NetworkParams(5e-6, 1e-10, 1e-10)
    m = load_model("gpt2")
    ring = get("allreduce", "ring")
    sch = ddp_schedule(m, 4, "bucketed")
    want = sum(predict(ring, 1024, c.count * 4, params) for c in sch.calls)
    assert predict_step_s(sch, {"allreduce": ring}, 1024, 4, params) == pytest.approx(want)
    # per tensor pays 2(P-1) latencies per tensor: slower than bucketed for a ring
    per = predict_step_s(ddp_schedule(m, 4, "per_tensor"), {"allreduce": ring}, 1024, 4, params)
    assert per > want
    rows = predict_workload("ddp", [1024], params, model="gpt2")
    got = {(r["variant"], r["algorithm"]): r["time_s"] for r in rows}
    assert got[(sch.variant, "allreduce=ring")] == pytest.approx(want)


def test_predict_zero_and_moe():
    params = NetworkParams(1e-6, 1e-9)
    rows = predict_workload("zero", [16], params, model="resnet50")
    assert {r["variant"] for r in rows} == {"zero2", "zero3", "ddp_flat", "ddp_layer"}
    rows = predict_workload("moe", [64], params, eps=[8, 64])
    assert {r["group_ranks"] for r in rows} == {8, 64}
    with pytest.raises(UsageError):
        predict_workload("ddp", [4], NetworkParams(None, 1e-9), model="gpt2")


# -- records and configuration ------------------------------------------------------


def _row(**kw):
    base = dict(workload="ddp", variant="per_tensor", model="m", algorithm="allreduce=ring", nranks=4,
                group_ranks=4, dtype="float32", part=-1, label="step", collective="step", ncalls=2, ntensors=2,
                payload_elems=10, nbytes=40, samples=2, median_s=1e-3, min_s=1e-3, mean_s=1e-3,
                ci_low_s=1e-3, ci_high_s=1e-3, samples_s=(1e-3, 1e-3))
    base.update(kw)
    return WorkloadRow(**base)


def test_row_validation_and_round_trip():
    r = _row(overlap_pct=50.0)
    assert WorkloadRow.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    for bad in (dict(workload="train"), dict(nbytes=-1), dict(overlap_pct=101.0), dict(samples=3),
                dict(median_s=-1.0), dict(part=-2)):
        with pytest.raises(ValueError):
            _row(**bad)
    with pytest.raises(ValueError, match="missing"):
        WorkloadRow.from_dict({"workload": "ddp"})


def test_config_keys_are_strict():
    with pytest.raises(UsageError, match="unknown ddp key 'bucket_mib' \\(did you mean 'bucket_mb'\\?\\)"):
        resolve_workload("ddp", {"bucket_mib": 25})
    with pytest.raises(UsageError, match="unknown moe key 'model'"):
        resolve_workload("moe", {"model": "gpt2"})
    with pytest.raises(UsageError, match="for workload 'zero', not 'ddp'"):
        resolve_workload("ddp", {"workload": "zero"})
    with pytest.raises(UsageError, match="expected an integer"):
        resolve_workload("moe", {"tokens": "many"})
    with pytest.raises(UsageError, match="unknown 'warp'"):
        resolve_workload("ddp", {"algorithms": ["warp"]})
    with pytest.raises(UsageError, match="delay > 0"):
        resolve_workload("straggler", {"delay_s": 0})
    with pytest.raises(UsageError, match="one collective"):
        resolve_workload("straggler", {"collectives": "allreduce,bcast"})
    assert resolve_workload("ddp", {"modes": "both"}).modes == ("bucketed", "per_tensor")
    cfg = resolve_workload("ddp", {"algorithms": "all"})
    assert "ring" in cfg.algorithms and "native" in cfg.algorithms
    assert resolve_workload("straggler", {"delay_s": "2ms"}).delay_s == pytest.approx(2e-3)
    assert set(cfg.to_dict()) == {"workload", *KEYS["ddp"]}


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("workload-*.toml")), ids=lambda p: p.name)
def test_shipped_configs_load(path):
    kind = path.stem.split("-", 1)[1]
    cfg = load_workload_config(kind, path)
    assert cfg.workload == kind


def test_config_file_errors(tmp_path):
    bad = tmp_path / "w.toml"
    bad.write_text('model = "gpt2"\nbuckets = 3\n')
    with pytest.raises(UsageError, match="unknown ddp key 'buckets'"):
        load_workload_config("ddp", bad)
    bad.write_text("[table]\nx = 1\n")
    with pytest.raises(UsageError, match="unexpected table"):
        load_workload_config("ddp", bad)


# -- command line -------------------------------------------------------------------


def test_cli_predict_gpt2_at_1024():
    from ccbench.cli import cli

    res = CliRunner().invoke(cli, ["workload", "predict", "ddp", "-m", "gpt2", "-n", "1024", "--alpha", "5us",
                                   "--beta", "10GB/s"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "predicted step communication at 1024 ranks" in res.output
    assert "allreduce=ring" in res.output and "per_tensor" in res.output


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    from ccbench.cli import main

    cfg = tmp_path / "w.toml"
    cfg.write_text("bogus = 1\n")
    for argv, why in ((["workload", "ddp", "-c", str(cfg)], "unknown ddp key 'bogus'"),
                      (["workload", "ddp", "-m", "nope"], "unknown model 'nope'"),
                      (["workload", "zero", "--rs", "ring"], "unknown 'ring'"),
                      (["workload", "straggler", "--delay", "soon"], "bad delay_s"),
                      (["workload", "predict", "ddp", "-n", "8"], "needs --from RUN")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ccbench: error: ") and why in err, err
    assert not (tmp_path / "results").exists()


def test_show_a_workload_run(tmp_path):
    from ccbench.cli import cli
    from ccbench.store.results import RunWriter
    from ccbench.store.run import open_run
    from ccbench.store.workload_rows import KIND, WORKLOAD_COLUMNS

    run = tmp_path / "run1"
    run.mkdir()
    w = RunWriter(run, {"kind": KIND, "workload": "ddp", "nranks": 4}, columns=WORKLOAD_COLUMNS)
    w.append(_row())
    w.append(_row(part=0, label="bucket 0", collective="allreduce", ncalls=1))
    w.update(status="complete")
    w.close()
    res = CliRunner().invoke(cli, ["show", str(run)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "bucket 0" in res.output and "all correct" in res.output
    header = (run / "cases.csv").read_text().splitlines()[0].split(",")
    assert header == WORKLOAD_COLUMNS
    with pytest.raises(UsageError, match="is a 'workload' run; fit reads collective sweeps only"):
        open_run(run, kinds=("sweep",), what="fit")  # a sweep reader refuses it with a message, not a corrupt line


def test_launch_end_to_end_then_show(tmp_path):
    """--launch starts the launcher (ccbench launch's helpers), the run lands on disk, show reads it."""
    import subprocess
    import sys

    from ccbench.store.run import open_run

    model = tmp_path / "m.txt"
    model.write_text("300 a\n20 a\n5000 b\n")
    r = subprocess.run([sys.executable, "-m", "ccbench", "workload", "ddp", "-m", str(model), "-a", "native,ring",
                        "--bucket-mb", "0.01", "--first-bucket-mb", "0", "--warmup", "1", "--min-reps", "2",
                        "--max-reps", "3", "--launch", "2", "--results-dir", str(tmp_path / "res"), "--no-show"],
                       capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert meta["nranks"] == 2 and meta["kind"] == "workload" and meta["model"]["params"] == 5320
    assert "--launch" not in meta["argv"] and all(r.ok for r in rows)
    assert {r.variant for r in rows} == {"bucketed 0.01 MiB", "per_tensor"}
    shown = subprocess.run([sys.executable, "-m", "ccbench", "show", str(run)], capture_output=True, text=True,
                           env={**__import__("os").environ, "COLUMNS": "200"})
    assert shown.returncode == 0 and "all correct" in shown.stdout


def test_views_of_overlap_and_straggler_rows():
    from rich.console import Console

    from ccbench.present.table import render
    from ccbench.present.workload_views import workload_tables

    ov = _row(workload="overlap", variant="Iallreduce", part=0, label="1 MiB", collective="allreduce", ncalls=1,
              comm_s=1e-3, compute_s=2e-3, total_s=2.5e-3, overlap_pct=50.0)
    st = _row(workload="straggler", variant="rank 3 late by 2 ms", part=0, label="1 KiB", collective="bcast",
              ncalls=1, delay_s=2e-3, delayed_rank=3, baseline_s=1e-5, slowdown=-0.001)
    console = Console(width=200, record=True)
    for rows in ([ov], [st]):
        render(workload_tables({}, rows), console)
    text = console.export_text()
    assert "50%" in text and "OSU = max(0, 100 - (overall" in text and "IMB = 100 max(0" in text
    assert "rank 3 late by 2 ms" in text and " 0.00 " in text and "-0.00" not in text


# -- the session layer: --watchdog, --resume, CCBENCH_FAULT, SIGTERM ----------------


MLP = ROOT / "tests" / "data" / "mlp-sizes.txt"


def test_watchdog_is_a_config_key_of_every_workload():
    assert all("watchdog_s" in keys for keys in KEYS.values())
    assert resolve_workload("ddp", {}).watchdog_s == 300.0
    assert resolve_workload("straggler", {"watchdog_s": 0}).watchdog_s == 0.0
    with pytest.raises(UsageError, match="config key 'watchdog_s': -1 is outside"):
        resolve_workload("moe", {"watchdog_s": -1})


@pytest.mark.parametrize("kind,values", [
    ("ddp", {"model": str(MLP), "algorithms": "native,ring", "first_bucket_mb": 0}),
    ("zero", {"model": "bert-base", "rs_algorithms": "all"}),
    ("moe", {}), ("moe", {"ep": "2,4"}),
    ("overlap", {"sizes": "4K,64K", "compute_s": "200us", "test_calls": 3}), ("overlap", {"model": "resnet50"}),
    ("straggler", {"delay_s": "2ms", "algorithms": "all", "watchdog_s": 0}),
])
def test_a_stored_configuration_resolves_to_itself(kind, values):
    from ccbench.measure.workload_config import stored_workload

    cfg = resolve_workload(kind, values)
    stored = json.loads(json.dumps(cfg.to_dict()))  # as run.json keeps it
    assert stored_workload(kind, stored) == cfg
    if "watchdog_s" not in values:  # a run made before the key existed: the default
        assert stored_workload(kind, {k: v for k, v in stored.items() if k != "watchdog_s"}) == cfg


def test_resume_keeps_the_run_s_configuration_and_refuses_another(tmp_path):
    from ccbench.measure.workload_config import resume_workload

    cfg = resolve_workload("ddp", {"model": str(MLP), "budget_s": 0.5, "results_dir": "elsewhere"})
    meta = {"workload": "ddp", "config": json.loads(json.dumps(cfg.to_dict()))}
    assert resume_workload("ddp", meta, "RUN") == cfg
    assert resume_workload("ddp", meta, "RUN", None, {"budget_s": 0.5, "results_dir": "here"}) == cfg
    with pytest.raises(UsageError, match="cannot resume RUN: it is a ddp workload run, not zero"):
        resume_workload("zero", meta, "RUN")
    with pytest.raises(UsageError, match="its configuration differs in budget_s, watchdog_s; resume with the same"):
        resume_workload("ddp", meta, "RUN", None, {"budget_s": 1.0, "watchdog_s": 5.0})
    toml = tmp_path / "w.toml"
    toml.write_text(f'model = "{MLP}"\nbudget_s = 0.5\n')
    assert resume_workload("ddp", meta, "RUN", toml) == cfg
    toml.write_text(f'model = "{MLP}"\n')  # a file restates the whole workload: budget_s is its default here
    with pytest.raises(UsageError, match="differs in budget_s"):
        resume_workload("ddp", meta, "RUN", toml)


def test_resume_cuts_the_rows_of_an_unfinished_item():
    from ccbench.measure.workload import WorkloadItem, complete_items

    items = [WorkloadItem(("a", "allreduce=ring"), "a", 1.0, 3, None, None),
             WorkloadItem(("b", "allreduce=ring"), "b", 1.0, 2, None, None)]
    keep = complete_items(items)
    a = [_row(variant="a", part=p) for p in (-1, 0, 1)]
    b = [_row(variant="b", part=p) for p in (-1, 0)]
    assert keep(a + b) == a + b
    assert keep(a + b[:1]) == a  # the crash came between b's rows
    assert keep(a[:2]) == []


def test_cli_resume_refuses_what_it_cannot_continue(capsys):
    from ccbench.cli import main

    for argv, why in ((["workload", "ddp", "--resume", str(ROOT / "nosuchrun")], "no run at"),
                      (["workload", "ddp", "--resume", str(ROOT / "tests" / "data" / "run-np2")],
                       "is a 'sweep' run; workload --resume reads training-workload runs only"),
                      (["workload", "moe", "--resume", str(ROOT / "tests" / "data" / "wl-ddp-np2")],
                       "it is a ddp workload run, not moe")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err


def _workload(tmp_path, *args, env=None, timeout=240):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "ccbench", "workload", *args, "--launch", "2", "--no-show"],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def _stored(run):
    from ccbench.store.run import open_run

    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    return meta, rows


def test_sigterm_stops_a_workload_between_items_then_resume_completes(tmp_path):
    """SIGTERM to `ccbench workload --launch` (forwarded to the ranks) keeps every finished row;
    --resume measures the rest, and the run has the items of an uninterrupted one."""
    import signal
    import subprocess
    import sys
    import time

    algs = ["native", "ring", "rabenseifner"]
    args = ["ddp", "-m", str(MLP), "-a", ",".join(algs), "--warmup", "1", "--budget", "0.5",
            "--target-rse", "0.00001", "--results-dir", "res"]
    proc = subprocess.Popen([sys.executable, "-m", "ccbench", "workload", *args, "--launch", "2", "--no-show"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 60
    jsonl = None
    while time.time() < deadline:  # wait until the first item's rows are on disk
        found = list(tmp_path.glob("res/*/cases.jsonl"))
        if found and found[0].read_text().count("\n") >= 2:
            jsonl = found[0]
            break
        time.sleep(0.05)
    assert jsonl is not None, "no rows appeared"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    run = jsonl.parent
    meta, rows = _stored(run)
    assert meta["status"] == "interrupted" and meta["signal"] == "SIGTERM", err
    assert "ccbench: stopped by SIGTERM" in err and meta["finished_cases"] == len(rows)
    assert err.splitlines()[-1] == ("ccbench: stopped by SIGTERM; continue it with: ccbench workload ddp --launch 2 "
                                    f"--resume {run.relative_to(tmp_path)}")
    steps = [r for r in rows if r.part == -1]
    assert 1 <= len(steps) < 2 * len(algs) and all(r.ok for r in rows)
    assert len(rows) == sum(1 + r.ncalls for r in steps)  # whole items only

    r = _workload(tmp_path, "ddp", "--resume", str(run), "--budget", "1")
    assert r.returncode == 2 and "differs in budget_s" in r.stderr  # refused, untouched
    assert _stored(run)[1] == rows
    r = _workload(tmp_path, "ddp", "--resume", str(run))
    assert r.returncode == 0, r.stderr
    meta, rows = _stored(run)
    assert meta["status"] == "complete" and "signal" not in meta and meta["finished_cases"] == len(rows)
    assert meta["resumed"][0]["signal_before"] == "SIGTERM" and meta["resumed"][0]["finished_before"] == len(
        [x for s in steps for x in range(1 + s.ncalls)])
    # the items of an uninterrupted run: every mode with every algorithm, each step with its calls, once
    model = load_model(str(MLP))
    want = {(sch.variant, f"allreduce={a}", p) for mode in ("bucketed", "per_tensor")
            for sch in [ddp_schedule(model, 4, mode)] for a in algs for p in range(-1, len(sch.calls))}
    got = [(x.variant, f"{x.algorithm}", x.part) for x in rows]
    assert len(got) == len(set(got)) and set(got) == want
    assert (run / "cases.csv").read_text().count("\n") == len(rows) + 1


def test_watchdog_ends_a_hung_workload_item_then_resume_finishes(tmp_path):
    """A rank stuck before the second item: the job ends in seconds naming it (--watchdog passed
    through --launch); the first item's row stays, run.json says failed, --resume finishes."""
    args = ["straggler", "-a", "native,ring", "-s", "1K", "--delay", "1ms", "--warmup", "1", "--min-reps", "2",
            "--max-reps", "3", "--budget", "0.1", "--results-dir", "res"]
    r = _workload(tmp_path, *args, "--watchdog", "1", env={"CCBENCH_FAULT": "hang:1:straggler:2"}, timeout=120)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    (run,) = (tmp_path / "res").iterdir()
    at = run.relative_to(tmp_path)
    assert lines == ["ccbench: error: watchdog: straggler allreduce/ring 1 KiB at 2 ranks did not finish within "
                     "1 s past its budget; ending the job",
                     f"ccbench: error: 1 finished row kept in {at}, marked failed; continue it with --resume {at}"], \
        r.stderr
    meta, rows = _stored(run)
    assert meta["status"] == "failed" and "watchdog" in meta["failure"]
    assert [x.algorithm for x in rows] == ["allreduce=native"]
    r = _workload(tmp_path, *args, "--watchdog", "1", "--resume", str(run), timeout=120)
    assert r.returncode == 0, r.stderr
    meta, rows = _stored(run)
    assert meta["status"] == "complete" and "failure" not in meta
    assert [(x.algorithm, x.part) for x in rows] == [("allreduce=native", 0), ("allreduce=ring", 1)]


def test_a_rank_that_dies_mid_workload_leaves_it_failed_then_resume_finishes(tmp_path):
    """Rank 1 dies before item 2: the job ends, the run is failed with the first item's row, the last line says
    how to continue, and --resume finishes.

    Who ends it: hydra ends rank 0 and the launcher marks the run failed -- or, where hydra misses the death
    (now and then here: rank 0 waited in item 2's collective until the test's timeout), rank 0's watchdog
    sees its peer gone and ends the job itself, naming the rank."""
    args = ["overlap", "-s", "1K,4K", "--compute", "1ms", "--warmup", "1", "--min-reps", "2", "--max-reps", "3",
            "--budget", "0.1", "--results-dir", "res"]
    r = _workload(tmp_path, *args, env={"CCBENCH_FAULT": "exit:1:overlap:2"}, timeout=120)
    assert r.returncode != 0
    (run,) = (tmp_path / "res").iterdir()
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    meta, rows = _stored(run)
    assert meta["status"] == "failed" and len(rows) == 1
    assert "1 finished row kept" in lines[-1] and lines[-1].endswith(f"--resume {run.relative_to(tmp_path)}")
    assert meta["finished_cases"] == 1 and "a rank crashed, was killed or aborted" in meta["failure"]
    if meta["failure"].startswith("rank 1 (process"):  # the peer check ended it
        assert re.fullmatch(r"ccbench: error: rank 1 \(process \d+\) ended during overlap Iallreduce 4 KiB: a rank "
                            r"crashed, was killed or aborted, leaving the others waiting; ending the job", lines[0]), \
            r.stderr
    else:
        assert len(lines) == 1 and "before the workload finished" in lines[0], r.stderr
    r = _workload(tmp_path, "overlap", "--resume", str(run), timeout=120)
    assert r.returncode == 0, r.stderr
    meta, rows = _stored(run)
    assert meta["status"] == "complete" and meta["resumed"][0]["status_before"] == "failed"
    assert [(x.label, x.part) for x in rows] == [("1 KiB", 0), ("4 KiB", 1)] and all(x.ok for x in rows)


class _Param:
    """What ccbench reads of a torch.nn.Parameter: its shape and whether it needs a gradient."""

    def __init__(self, *shape, requires_grad=True):
        self.shape, self.requires_grad = shape, requires_grad


class _Module:
    """A stand-in for a torch.nn.Module: named_parameters() in registration order (no torch needed)."""

    def named_parameters(self):
        return iter([("embed.weight", _Param(1000, 64)), ("blocks.0.attn.weight", _Param(64, 64)),
                     ("blocks.0.attn.bias", _Param(64)), ("blocks.0.norm.weight", _Param(64, requires_grad=False)),
                     ("blocks.1.mlp.weight", _Param(256, 64)), ("head.weight", _Param(10, 64))])


def test_a_pytorch_module_s_parameters_become_a_model_file_ccbench_reads(tmp_path):
    from ccbench.workloads.models import from_named_parameters, save_model

    model = from_named_parameters(_Module().named_parameters(), "tiny")
    assert [(t.name, t.numel, t.layer) for t in model.tensors] == [
        ("embed.weight", 64000, "embed"), ("blocks.0.attn.weight", 4096, "blocks.0"),
        ("blocks.0.attn.bias", 64, "blocks.0"), ("blocks.1.mlp.weight", 16384, "blocks.1"),
        ("head.weight", 640, "head")]  # the frozen norm weight is not reduced by DDP: left out
    path = save_model(model, tmp_path / "tiny.json")
    again = load_model(str(path))
    assert again.tensors == model.tensors and again.name == "tiny"
    # DDP's buckets of it, in reverse order: head.weight (2,560 B) closes the 1 KiB first bucket, mlp.weight
    # (65,536 B) reaches the 64 KiB cap alone, the rest (256 + 16,384 + 256,000 B) is the last
    sch = ddp_schedule(again, 4, "bucketed", 64 / 1024, 1 / 1024)
    assert [c.tensors for c in sch.calls] == [(4,), (3,), (2, 1, 0)]
    with pytest.raises(UsageError, match="exists; model files are never overwritten"):
        save_model(model, path)
    with pytest.raises(UsageError, match="no parameter needs a gradient"):
        from_named_parameters([("w", _Param(3, requires_grad=False))], "frozen")
