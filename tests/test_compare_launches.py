"""`ccbench compare` at the launch level: replicated runs, single-launch runs, --min-effect, --launch-cv.

Synthetic runs with a known launch effect: every launch multiplies all its samples by one factor
drawn log-normally (the launch effect), and its samples scatter little around it (the within-launch
noise), as on the machines measured here (three identical launches of one sweep spread by 15-75%).
A test of one launch's samples against another's calls such launches different although they
measure the same thing; compare must not.  Rows of K launches are pooled the way ``ccbench launch
--launches K`` pools them (``ccbench.store.launches.pool_launches``).
"""

import csv
import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ccbench.analysis.compare import measured_launch_cv, parse_fraction
from ccbench.api import compare as compare_runs  # opens the runs it is given, then compares them
from ccbench.cli import main
from ccbench.core.errors import UsageError
from ccbench.core.replication import DEFAULT_PRIOR_BETWEEN_CV, log_sd_from_cv
from ccbench.core.stats import mann_whitney_u, summarize
from ccbench.store.launches import pool_launches
from ccbench.store.results import SCHEMA, Row
from ccbench.store.run import open_run
from ccbench.workflow.compare import write_comparison

DATA = Path(__file__).resolve().parent / "data"
SIZES = [8 << (2 * i) for i in range(10)]  # 8 B .. 2 MiB, x4


def _row(nbytes: int, samples, collective: str = "allreduce") -> Row:
    s = summarize(samples)
    return Row(collective=collective, algorithm="native", nbytes=nbytes, count=max(nbytes // 4, 0), dtype="float32",
               op="sum", in_place=False, root=0, nranks=2, samples=s.n, min_s=s.min_s, median_s=s.median_s,
               mean_s=s.mean_s, p95_s=s.p95_s, p99_s=s.p99_s, max_s=s.max_s, stddev_s=s.stddev_s,
               ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, algbw_gbs=1.0, busbw_gbs=1.0, msgs_max=None,
               bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None,
               reduced_bytes_max=None, nwrong=0, stop_reason="max_reps", sync="barrier", flags=s.flags,
               samples_s=tuple(float(x) for x in samples))


def _case(rng, nbytes: int, launches: int, factor: float = 1.0, between_cv: float = 0.3, within_cv: float = 0.02,
          n: int = 30, collective: str = "allreduce") -> Row:
    """One case measured in `launches` launches: a log-normal launch effect, small noise within each launch."""
    typical = 1e-6 * (5 + nbytes / 1e3) * factor
    blocks = []
    for k in range(launches):
        effect = math.exp(rng.normal(0.0, log_sd_from_cv(between_cv)))
        blocks.append((k + 1, _row(nbytes, typical * effect * np.exp(rng.normal(0.0, log_sd_from_cv(within_cv), n)),
                                   collective)))
    return blocks[0][1] if launches == 1 else pool_launches(blocks)


def _write(path: Path, rows: list[Row], launches: int = 1) -> Path:
    path.mkdir(parents=True)
    meta = {"schema": SCHEMA, "status": "complete", "mpi_library": "MPICH Version: 5.0.2", "nranks": 2, "nodes": 1,
            "ranks_per_node": 2, "thread_level": "single", "oversubscribed": False, "config": {"sync": "barrier"},
            "mpi_env": {}}
    if launches > 1:
        meta["launches"] = launches
    (path / "run.json").write_text(json.dumps(meta))
    (path / "cases.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    return path


def _run(tmp_path: Path, name: str, rng, launches: int, factor: float = 1.0, **kw) -> Path:
    return _write(tmp_path / name, [_case(rng, n, launches, factor, **kw) for n in SIZES], launches)


def _called(cmp) -> list:
    return [p for p in cmp.pairs if p.verdict in ("faster", "slower")]


def _main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


# --------------------------------------------------------------------------- single-launch A/A


def test_single_launch_aa_runs_are_never_called_different(tmp_path):
    rng = np.random.default_rng(7)
    runs = [_run(tmp_path, f"r{i}", rng, 1) for i in range(3)]
    cmp = compare_runs(runs)
    assert len(cmp.pairs) == 2 * len(SIZES)
    # the within-launch samples differ "significantly" between launches almost everywhere ...
    a, others = open_run(runs[0]).rows, [open_run(r).rows for r in runs[1:]]
    rank_p = [mann_whitney_u(b.samples_s, x.samples_s)[1] for rows in others for x, b in zip(a, rows, strict=True)]
    assert sum(p < 0.05 for p in rank_p) >= 0.8 * len(rank_p)
    # ... but one launch a side says nothing about launch-to-launch variation: nothing is called
    assert _called(cmp) == []
    assert all(p.verdict == "undetermined" and p.method == "prior" for p in cmp.pairs)
    for s in cmp.launch_summary():
        assert (s.launch_level, s.single_launch, s.undetermined) == (0, len(SIZES), len(SIZES))
        # CV 0.35 and 30 samples of 2% noise a launch: exp(1.96 sqrt(2 ln 1.1225 + noise)), just above 2.5656
        assert 2.5656 < s.resolvable_low <= s.resolvable_high < 2.6


def test_single_launch_prior_resolvable_ratio_is_known():
    from ccbench.analysis.compare import test_pairs

    # constant samples: no within-launch noise, so the interval is the prior's alone:
    # ln ratio +- 1.959964 sqrt(2 ln(1 + 0.35^2)) -> resolvable ratio exp(0.94223) = 2.5656
    a = _row(8, [1e-6] * 10)
    b = _row(8, [2e-6] * 10)
    (_, _, t), = test_pairs([(a, b)], 0.05)
    half = 1.959963984540054 * math.sqrt(2 * math.log(1 + DEFAULT_PRIOR_BETWEEN_CV ** 2))
    assert t.resolvable_ratio == pytest.approx(math.exp(half), rel=1e-9)
    assert (t.ratio_low, t.ratio_high) == pytest.approx((2 * math.exp(-half), 2 * math.exp(half)), rel=1e-9)
    assert t.verdict == "undetermined" and t.p_value == pytest.approx(math.erfc(math.log(2) / (half / 1.959963984540054)
                                                                                / math.sqrt(2)))


def test_a_30x_difference_between_single_launch_runs_is_still_called(tmp_path):
    rng = np.random.default_rng(11)
    a = _run(tmp_path, "a", rng, 1)
    b = _run(tmp_path, "b", rng, 1, factor=30.0)
    cmp = compare_runs([a, b])
    assert all(p.verdict == "slower" and p.method == "prior" and p.ratio_low > 2.5 for p in cmp.pairs)
    (s,) = cmp.launch_summary()
    assert (s.called, s.undetermined) == (len(SIZES), 0)
    assert all(p.verdict == "faster" for p in compare_runs([b, a]).pairs)


# --------------------------------------------------------------------------- replicated runs


def test_replicated_aa_runs_stay_within_the_level(tmp_path):
    rng = np.random.default_rng(3)
    runs = [_run(tmp_path, f"r{i}", rng, 5) for i in range(3)]
    cmp = compare_runs(runs)
    assert all(p.method == "welch" and (p.launches_a, p.launches_b) == (5, 5) for p in cmp.pairs)
    assert len(_called(cmp)) <= 0.05 * len(cmp.pairs)
    assert all(p.verdict == "noise" for p in cmp.pairs if p.verdict not in ("faster", "slower"))
    for s in cmp.launch_summary():
        assert s.launch_level == len(SIZES) and s.single_launch == 0 and s.resolvable_low is None
    # the runs measured their spread: pooled between-launch CV near the 0.3 drawn
    assert set(cmp.measured_cv) == {"A", "B", "C"}
    assert all(0.2 < cv < 0.4 and n == len(SIZES) for cv, n in cmp.measured_cv.values())


def test_a_2x_difference_over_5_launches_is_called(tmp_path):
    # launches spread by a CV of 20% (9-30% measured here): 2x is far beyond what 5 + 5 launches resolve
    rng = np.random.default_rng(5)
    a = _run(tmp_path, "a", rng, 5, between_cv=0.2)
    b = _run(tmp_path, "b", rng, 5, factor=2.0, between_cv=0.2)
    cmp = compare_runs([a, b])
    assert all(p.verdict == "slower" and p.method == "welch" and p.ratio_low > 1.0 for p in cmp.pairs)
    # each pooled median is the geometric mean of its launches' medians: the interval surrounds the ratio
    assert all(p.ratio_low < p.ratio < p.ratio_high for p in cmp.pairs)
    (s,) = cmp.launch_summary()
    assert s.launch_level == len(SIZES) and s.launch_level_counts["slower"] == len(SIZES)


def test_replicated_against_single_launch_uses_the_larger_spread(tmp_path):
    rng = np.random.default_rng(9)
    a = _run(tmp_path, "a", rng, 5, between_cv=0.6)
    b = _run(tmp_path, "b", rng, 1, factor=30.0)
    cmp = compare_runs([a, b])
    assert all(p.method == "prior" and (p.launches_a, p.launches_b) == (5, 1) for p in cmp.pairs)
    # var(ln ratio) = sigma_b^2 (1/5 + 1/1) + the medians' own noise, sigma_b^2 the larger of the prior's
    # ln(1 + 0.35^2) and the spread of the replicated side's launch medians (CV about 0.6 drawn)
    rows = {r.nbytes: r for r in open_run(a).rows}
    wider = 0
    for p in cmp.pairs:
        spread = float(np.var(np.log([np.median(x) for _, x in rows[p.nbytes].launch_blocks()]), ddof=1))
        var_b = max(math.log1p(DEFAULT_PRIOR_BETWEEN_CV ** 2), spread)
        assert p.resolvable_ratio > math.exp(1.959963984540054 * math.sqrt(var_b * 1.2))
        wider += spread > math.log1p(DEFAULT_PRIOR_BETWEEN_CV ** 2)
    assert wider >= len(SIZES) // 2
    assert all(p.verdict == "slower" for p in cmp.pairs)


def test_workload_runs_follow_the_same_rules(tmp_path):
    # a stored DDP run, every row given 4 launches of its samples scaled by a launch effect, against itself
    rng = np.random.default_rng(13)
    src = open_run(DATA / "wl-ddp-np2")

    def replicated(rows, factor):
        out = []
        for r in rows:
            x = np.asarray(r.samples_s)
            blocks = [x * factor * math.exp(rng.normal(0.0, 0.2)) for _ in range(4)]
            out.append(dataclasses.replace(r, samples_s=tuple(float(v) for b in blocks for v in b),
                                           samples=sum(b.size for b in blocks),
                                           launches=(1, 2, 3, 4), launch_samples=tuple(b.size for b in blocks),
                                           median_s=float(np.exp(np.mean([np.log(np.median(b)) for b in blocks])))))
        return out

    meta = json.loads((DATA / "wl-ddp-np2" / "run.json").read_text())
    paths = []
    for name, factor in (("a", 1.0), ("b", 1.0), ("c", 3.0)):
        d = tmp_path / name
        d.mkdir()
        (d / "run.json").write_text(json.dumps(meta))
        (d / "cases.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in replicated(src.rows, factor)))
        paths.append(d)
    cmp = compare_runs(paths)
    assert cmp.kind == "workload"
    same = [p for p in cmp.pairs if p.other == "B"]
    tripled = [p for p in cmp.pairs if p.other == "C"]
    assert all(p.method == "welch" and (p.launches_a, p.launches_b) == (4, 4) for p in cmp.pairs)
    assert len([p for p in same if p.verdict != "noise"]) <= 0.05 * len(same)
    assert all(p.verdict == "slower" for p in tripled)
    s = {x.other: x for x in cmp.launch_summary()}
    assert s["C"].launch_level_counts["slower"] == len(tripled)
    # and single-launch workload runs are undetermined below what the prior resolves
    single = compare_runs([DATA / "wl-ddp-np2", DATA / "wl-ddp-np2-single"])
    assert all(p.method == "prior" for p in single.pairs)
    assert all(p.verdict == "undetermined" for p in single.pairs if max(p.ratio, 1 / p.ratio) < 2.5)


# --------------------------------------------------------------------------- --min-effect


def test_min_effect_turns_a_small_significant_difference_into_noise(tmp_path):
    rng = np.random.default_rng(17)
    # tight launches (CV 0.5%), 3% slower: Welch calls it, but a 5% practical threshold makes it noise
    a = _run(tmp_path, "a", rng, 5, between_cv=0.005)
    b = _run(tmp_path, "b", rng, 5, factor=1.03, between_cv=0.005)
    strict = compare_runs([a, b])
    assert all(p.verdict == "slower" and p.significant for p in strict.pairs)
    loose = compare_runs([a, b], min_effect=0.05)
    assert all(p.verdict == "noise" and p.significant and p.ratio_high < 1.05 for p in loose.pairs)
    assert loose.summary()[0].verdicts["noise"] == len(SIZES)
    # a 20% difference is outside the band: still called
    c = _run(tmp_path, "c", rng, 5, factor=1.2, between_cv=0.005)
    assert all(p.verdict == "slower" for p in compare_runs([a, c], min_effect=0.05).pairs)


def test_min_effect_and_launch_cv_from_the_command_line(tmp_path, capsys):
    rng = np.random.default_rng(19)
    a = _run(tmp_path, "a", rng, 1, between_cv=0.05)
    b = _run(tmp_path, "b", rng, 1, factor=1.5, between_cv=0.05)
    # default prior: a 1.5x difference between single launches is undetermined
    main(["compare", str(a), str(b), "--no-plot", "--out", str(tmp_path / "o1")])
    text = " ".join(capsys.readouterr().out.split())
    assert f"0 of {len(SIZES)} cases decided at the launch level; {len(SIZES)} with a single launch on a side" in text
    assert "CV of 35% (default prior)" in text and f"0 called faster or slower, {len(SIZES)} undetermined" in text
    # a between-launch CV of 5% measured earlier on this machine resolves it
    main(["compare", str(a), str(b), "--no-plot", "--launch-cv", "5%", "--out", str(tmp_path / "o2")])
    text = " ".join(capsys.readouterr().out.split())
    assert "CV of 5% (--launch-cv)" in text and f"{len(SIZES)} called faster or slower, 0 undetermined" in text
    with open(tmp_path / "o2" / "compare.csv") as f:
        rows = list(csv.DictReader(f))
    assert all(r["verdict"] == "slower" and r["method"] == "prior" for r in rows)
    # "0.05" is the same as "5%"
    assert compare_runs([a, b], launch_cv=parse_fraction("0.05", "--launch-cv")).pairs == compare_runs(
        [a, b], launch_cv=0.05).pairs
    main(["compare", str(a), str(b), "--no-plot", "--min-effect", "60%", "--launch-cv", "0.05", "--out",
          str(tmp_path / "o3")])
    out = capsys.readouterr().out
    assert "noise also when the whole interval lies within +-60% (--min-effect)" in " ".join(out.split())
    md = (tmp_path / "o3" / "compare.md").read_text()
    assert "noise also when the whole interval lies within +-60%" in " ".join(md.split())


def test_parse_fraction():
    assert parse_fraction("5%", "--min-effect") == pytest.approx(0.05)
    assert parse_fraction(" 0.05 ", "--min-effect") == 0.05
    assert parse_fraction("35 %", "--launch-cv") == pytest.approx(0.35)
    for bad in ("five", "", "%", "nan", "inf%"):
        with pytest.raises(UsageError, match="--min-effect"):
            parse_fraction(bad, "--min-effect")


@pytest.mark.parametrize("option,value,message", [
    ("--min-effect", "abc", "--min-effect 'abc' is not a number"),
    ("--min-effect", "5", "the minimum effect must be at least 0 and below 100%"),
    ("--min-effect", "-1%", "the minimum effect must be at least 0"),
    ("--min-effect", "nan", "is not a finite number"),
    ("--launch-cv", "0", "the between-launch CV must be above 0"),
    ("--launch-cv", "35", "at most 100%"),
    ("--launch-cv", "x%", "--launch-cv 'x%' is not a number"),
])
def test_bad_min_effect_or_launch_cv_is_one_line(tmp_path, capsys, option, value, message):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(DATA / "run-np4", a)
    shutil.copytree(DATA / "run-np4-single", b)
    before = sorted(p.name for p in a.iterdir())
    code, out, err = _main(["compare", str(a), str(b), "--no-plot", option, value], capsys)
    assert code == 2 and err.startswith("ccbench: error:") and err.count("\n") == 1 and message in err
    assert "Traceback" not in out + err
    assert sorted(p.name for p in a.iterdir()) == before


# --------------------------------------------------------------------------- measured CV, files


def test_measured_launch_cv_known_answer():
    # two rows; per-launch medians e^0, e^0.2, e^-0.2 (var 0.04, 2 df) and e^0, e^0.4 (var 0.08, 1 df):
    # pooled (2 * 0.04 + 0.08) / 3, CV sqrt(exp(pooled) - 1)
    def replicated(log_medians):
        blocks = [[math.exp(m)] * 3 for m in log_medians]
        r = _row(8, [v for b in blocks for v in b])
        return dataclasses.replace(r, launches=tuple(range(1, len(blocks) + 1)), launch_samples=(3,) * len(blocks))

    rows = [replicated([0.0, 0.2, -0.2]), replicated([0.0, 0.4]), _row(8, [1.0, 2.0])]
    cv, used = measured_launch_cv(rows)
    pooled = (2 * 0.04 + 0.08) / 3
    assert used == 2 and cv == pytest.approx(math.sqrt(math.expm1(pooled)), rel=1e-12)
    assert measured_launch_cv([_row(8, [1.0, 2.0])]) is None


def test_files_carry_the_launch_level_columns(tmp_path):
    from ccbench.analysis.compare import CSV_COLUMNS, LAUNCH_COLUMNS

    rng = np.random.default_rng(23)
    a = _run(tmp_path, "a", rng, 3)
    b = _run(tmp_path, "b", rng, 1)
    cmp = compare_runs([a, b])
    files = write_comparison(cmp, tmp_path / "out", plot=False)
    with open(files["csv"]) as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS and CSV_COLUMNS[-len(LAUNCH_COLUMNS):] == LAUNCH_COLUMNS
    for r, p in zip(rows, cmp.pairs, strict=True):
        assert (int(r["launches_a"]), int(r["launches_b"])) == (3, 1) and r["method"] == "prior"
        assert float(r["ratio_low"]) == p.ratio_low and float(r["resolvable_ratio"]) == p.resolvable_ratio
    md = " ".join(files["md"].read_text().split())
    assert "| interval | launches | p | p (adj.) | verdict |" in md
    assert "| faster | slower | noise | undetermined | untested |" in md
    assert f"run B vs A: 0 of {len(SIZES)} cases decided at the launch level" in md
    assert "between-launch CV measured (pooled over the cases with 2 or more launches): run A" in md
