"""Sizes, configs and the plan (pure, no MPI)."""

from pathlib import Path

import pytest

from ccbench.core.errors import UsageError
from ccbench.core.units import format_size, parse_size, parse_sizes
from ccbench.measure.config import Config, load_config, plan

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("text,expected", [
    ("8", 8), ("4K", 4096), ("4k", 4096), ("1M", 1 << 20), ("2G", 2 << 30), ("1.5K", 1536),
    ("64KiB", 65536), ("16B", 16), (0, 0), (12, 12), (" 8 ", 8),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "-8", "8X", "1.3", "K", "0.5", "abc", True, "2T", "99999G"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError):
        parse_size(text)


def test_parse_sizes_range_and_list():
    assert parse_sizes("8:64") == [8, 16, 32, 64]
    assert parse_sizes("8:1K:4") == [8, 32, 128, 512]
    assert parse_sizes("0:4") == [0, 1, 2, 4]
    assert parse_sizes("4K,8,4K") == [8, 4096]
    assert parse_sizes(["1M", 8]) == [8, 1 << 20]
    for bad in ("64:8", "8:1K:1", "8:1K:x", "1:2:3:4", ","):
        with pytest.raises(UsageError):
            parse_sizes(bad)


def test_format_size():
    assert [format_size(n) for n in (8, 1024, 1536, 1 << 20, 3 << 30)] == [
        "8 B", "1 KiB", "1.5 KiB", "1 MiB", "3 GiB"]


@pytest.mark.parametrize("name", ["quick.toml", "default.toml", "full.toml", "algorithms.toml"])
def test_shipped_configs_load(name):
    cfg = load_config(CONFIGS / name)
    cases, _ = plan(cfg, 4)
    assert cases


def test_quick_covers_every_collective_8b_to_1m():
    cfg = load_config(CONFIGS / "quick.toml")
    cases, _ = plan(cfg, 4)
    assert {c.collective for c in cases} == set(cfg.collectives)
    assert min(cfg.sizes) == 8 and max(cfg.sizes) == 1 << 20


@pytest.mark.parametrize("values,message", [
    ({"colectives": "all"}, "unknown config key 'colectives' (did you mean 'collectives'?)"),
    ({"collectives": "allreduc"}, "collective: unknown 'allreduc'"),
    ({"algorithms": "rign"}, "algorithm: unknown 'rign'"),
    ({"dtypes": "float8"}, "dtype: unknown 'float8'"),
    ({"ops": "avg"}, "op: unknown 'avg'"),
    ({"min_reps": "ten"}, "config key 'min_reps': expected an integer"),
    ({"min_reps": 1.5}, "config key 'min_reps': expected an integer"),
    ({"warmup": -1}, "config key 'warmup': -1 is outside"),
    ({"target_rse": 2}, "config key 'target_rse': 2 is outside"),
    ({"budget_s": 0}, "config key 'budget_s': 0 is outside"),
    ({"in_place": "maybe"}, "config key 'in_place'"),
    ({"root": -1}, "config key 'root'"),
    ({"sync": "clock"}, "config key 'sync'"),
    ({"thread_level": "many"}, "config key 'thread_level'"),
    ({"watchdog_s": -1}, "config key 'watchdog_s': -1 is outside"),
    ({"sizes": "-8"}, "sizes cannot be negative"),
    ({"collectives": 3}, "expected a list of names"),
    ({"min_reps": 50, "max_reps": 10}, "max_reps (10) is below min_reps (50)"),
])
def test_bad_values_name_the_key(values, message):
    with pytest.raises(UsageError) as err:
        load_config(None, values)
    assert message in str(err.value)


def test_bad_files(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("collectives = [\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_config(bad)
    nested = tmp_path / "nested.toml"
    nested.write_text("[sweep]\nsizes = '8'\n")
    with pytest.raises(UsageError, match=r"unexpected table \[sweep\]"):
        load_config(nested)


def test_flags_override_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('sizes = "8:64"\ndtypes = ["int32"]\n')
    cfg = load_config(f, {"dtypes": "float64", "sizes": None})
    assert cfg.dtypes == ("float64",) and cfg.sizes == (8, 16, 32, 64)


def test_plan_sizes_follow_nccl_tests_definitions():
    cfg = load_config(None, {"collectives": "allreduce,allgather,alltoall,barrier",
                             "sizes": "8,64", "dtypes": "float32"})
    cases, _ = plan(cfg, 4)
    got = {(c.collective, c.nbytes, c.count) for c in cases}
    # allreduce: the buffer; allgather/alltoall: P blocks of at least one element
    assert ("allreduce", 8, 2) in got and ("allreduce", 64, 16) in got
    assert ("allgather", 16, 1) in got and ("allgather", 64, 4) in got
    assert ("alltoall", 16, 1) in got
    assert ("barrier", 0, 0) in got
    assert len([c for c in cases if c.collective == "barrier"]) == 1


def test_plan_roots_in_place_and_ops():
    cfg = load_config(None, {"collectives": "reduce,bcast", "sizes": "64", "ops": "all",
                             "in_place": "both", "root": "rotate"})
    cases, _ = plan(cfg, 3)
    reduce = [c for c in cases if c.collective == "reduce"]
    assert len(reduce) == 4 * 2 * 3
    bcast = [c for c in cases if c.collective == "bcast"]
    assert {c.root for c in bcast} == {0, 1, 2} and not any(c.in_place for c in bcast)


def test_plan_rejects_missing_root_and_skips_pingpong_alone():
    with pytest.raises(UsageError, match="root 4 does not exist with 2 ranks"):
        plan(load_config(None, {"collectives": "bcast", "root": 4}), 2)
    cases, skipped = plan(Config(), 1)
    assert not any(c.collective == "pingpong" for c in cases)
    assert skipped and skipped[0][0] == "pingpong/native"


def test_timing_defaults_are_the_config_defaults():
    from ccbench.measure.timing import TimingSettings

    assert TimingSettings() == TimingSettings.from_config(Config())


def test_timing_modes_and_a_fixed_count():
    from ccbench.core.errors import UsageError
    from ccbench.measure.config import load_config

    cfg = load_config(None, {"timing": "batched:8", "iterations": 100, "launches": 3})
    assert (cfg.timing, cfg.iterations) == ("batched:8", 100)
    assert cfg.per_launch().iterations == 34  # split across launches like max_reps, rounded up
    assert load_config(None, {}).timing == "per-call" and load_config(None, {}).iterations is None
    for bad, msg in (({"timing": "batched:0"}, "choose per-call, batched or batched:K"),
                     ({"timing": "burst"}, "choose per-call"), ({"timing": 4}, "choose per-call"),
                     ({"iterations": 0}, "outside 1..10000000"), ({"iterations": 2.5}, "an integer")):
        with pytest.raises(UsageError, match=msg):
            load_config(None, bad)


def test_rounds_split_a_launch_s_samples_and_budget_between_the_visits():
    """--rounds R: each visit of a case gets 1/R of the launch's budget and sample counts (rounded up)."""
    cfg = load_config(None, {"rounds": 4, "launches": 2, "budget_s": 2.0, "min_reps": 20, "max_reps": 1000})
    assert cfg.rounds == 4 and cfg.to_dict()["rounds"] == 4
    visit = cfg.per_launch().per_round()
    assert (visit.budget_s, visit.min_reps, visit.max_reps) == (0.25, 5, 125)
    assert load_config(None, {"rounds": 3, "min_reps": 20, "max_reps": 20}).per_round().max_reps == 7
    assert load_config(None, {"rounds": 3, "iterations": 100}).per_round().iterations == 34
    one = load_config(None, {})
    assert one.rounds == 1 and one.per_round() is one
    for bad, msg in (({"rounds": 0}, "outside 1..100"), ({"rounds": 101}, "outside 1..100"),
                     ({"rounds": 1.5}, "an integer")):
        with pytest.raises(UsageError, match=msg):
            load_config(None, bad)


def test_all_beside_named_algorithms_is_every_unforced_one_plus_those():
    """`-a all,native:all`: every algorithm but the forced variants, plus the variants; `all` keeps skipping
    what cannot run at this rank count instead of refusing it."""
    from ccbench.algorithms import REGISTRY
    from ccbench.measure.multilaunch import plan_parts

    cfg = load_config(None, {"collectives": ["allreduce"], "algorithms": ["all", "native:all"], "sizes": [8]})
    variants = [a for a, x in REGISTRY["allreduce"].items() if x.settings]
    assert cfg.algorithms == ("all", *variants)
    cases, skipped = plan(cfg, 3)  # 3 ranks: an algorithm that needs a power of two is skipped, not refused
    unforced = {a for a, x in REGISTRY["allreduce"].items() if x.in_all}  # nor the persistent forms
    ran = {c.algorithm for c in cases}
    assert ran - set(variants) == {a for a in unforced if not REGISTRY["allreduce"][a].unsupported(3, "sum")}
    assert set(variants) <= ran and all(w.startswith("allreduce/") for w, _ in skipped)
    parts, skips = plan_parts(cfg, "mpich")
    assert parts[0].label == "unforced" and parts[0].algorithms == ("all",)
    mpich = [v for v in variants if "mpich" in REGISTRY["allreduce"][v].settings]
    assert {p.algorithms for p in parts[1:]} == {(v,) for v in mpich}
    assert {w for w, _ in skips} == {f"allreduce/{v}" for v in variants if v not in mpich}
    named = load_config(None, {"collectives": ["allreduce"], "algorithms": ["all", "ring"]})
    assert named.algorithms == ("all", "ring")
    with pytest.raises(UsageError, match="unknown 'rign'"):
        load_config(None, {"collectives": ["allreduce"], "algorithms": ["all", "rign"]})


def test_a_collective_without_a_persistent_form_is_refused_when_named_and_all_leaves_persistent_forms_out(
        monkeypatch):
    """native-persistent where the library lacks <Method>_init: one line when named.  `all` never takes a persistent
    form (the set a stored run was planned with stays the same), so it neither plans nor skips one."""
    import dataclasses

    from ccbench.algorithms import REGISTRY

    old = REGISTRY["allreduce"]["native-persistent"]  # what it says under an MPI-3 library
    monkeypatch.setitem(REGISTRY["allreduce"], "native-persistent", dataclasses.replace(
        old, supports=lambda P, op: "the MPI library (MPI 3.1) has no MPI_Allreduce_init"))
    with pytest.raises(UsageError, match="allreduce/native-persistent cannot run here: .*MPI_Allreduce_init"):
        plan(load_config(None, {"collectives": "allreduce", "algorithms": "native-persistent", "sizes": "8"}), 2)
    cases, skipped = plan(load_config(None, {"collectives": "allreduce,bcast", "algorithms": "all", "sizes": "8"}), 2)
    assert not any("persistent" in what for what, _ in skipped)
    algs = {(c.collective, c.algorithm) for c in cases}
    assert ("allreduce", "native") in algs and not any(a.endswith("-persistent") for _, a in algs)
    cases, _ = plan(load_config(None, {"collectives": "bcast", "algorithms": "native-persistent", "sizes": "8"}), 2)
    assert [c.algorithm for c in cases] == ["native-persistent"]
