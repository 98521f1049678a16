"""ccbench tune at the launch level, on synthetic launches with known answers: what the file names
(variants against the default as separate launches, Benjamini-Hochberg over the comparisons), the
toss-ups, single-launch sources, and --verify's alternating launches, paired test per size and
Benjamini-Hochberg over the sizes (with a fake job runner in place of MPI)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from runfiles import derived, write_run

from ccbench.analysis.tune import (
    DEFAULT_VERIFY_LAUNCHES,
    check_verify_launches,
    decide_sizes,
    select,
)
from ccbench.cli import main
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.measure.launcher import Job
from ccbench.store.results import Row, RunWriter, new_run_dir
from ccbench.workflow.tune import tune_runs, verify

FILE_VAR = "OMPI_MCA_coll_tuned_dynamic_rules_filename"


def _launches(median: float, factors, n: int = 15, noise: float = 0.01, seed: int = 0) -> list[np.ndarray]:
    """One launch per factor: n samples around median x factor, log-normal noise of `noise` within the launch."""
    rng = np.random.default_rng(seed)
    return [median * f * np.exp(rng.normal(0.0, noise, n)) for f in factors]


def _row(alg: str, nbytes: int, blocks, coll: str = "allreduce", nranks: int = 4, nwrong: int = 0) -> Row:
    """A stored row of these launches (one launch: a row without launch fields, as an older run has)."""
    samples = tuple(float(x) for b in blocks for x in b)
    median = float(np.exp(np.mean([np.log(np.median(b)) for b in blocks])))
    many = len(blocks) > 1
    return Row(collective=coll, algorithm=alg, nbytes=nbytes, count=nbytes // 4, dtype="float32",
               op="sum" if coll == "allreduce" else "none", in_place=False, root=0, nranks=nranks,
               samples=len(samples), min_s=min(samples), median_s=median, mean_s=float(np.mean(samples)),
               p95_s=max(samples), p99_s=max(samples), max_s=max(samples), stddev_s=float(np.std(samples)),
               ci_low_s=median * 0.99, ci_high_s=median * 1.01, algbw_gbs=1.0, busbw_gbs=1.0, msgs_max=None,
               bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None,
               reduced_bytes_max=None, nwrong=nwrong, stop_reason="target_rse", sync="barrier", samples_s=samples,
               launches=tuple(range(1, len(blocks) + 1)) if many else (),
               launch_samples=tuple(len(b) for b in blocks) if many else ())


# ------------------------------------------------------------------- the verdict of a verified size

A_FACTORS = (1.0, 1.1, 0.95)                      # launch effects without the file
B_HALF = (0.5 * 1.05, 0.5 * 0.97, 0.5 * 1.08)     # with it: half the time, other launch effects


def test_a_real_2x_improvement_over_3_pairs_is_moved():
    a, b = _launches(1e-5, A_FACTORS), _launches(1e-5, B_HALF, seed=1)
    (d,) = decide_sizes([(a, b, True)])
    assert d.verdict == "moved" and d.comparison.ratio == pytest.approx(0.51, rel=0.05)
    assert d.comparison.ratio_high < 1 and d.comparison.n_launches_a == 3
    # the same improvement where the file keeps the default is not the file's doing
    assert decide_sizes([(a, b, False)])[0].verdict == "faster, same selection"
    # twice as slow with the file
    assert decide_sizes([(b, a, True)])[0].verdict == "worse"
    assert decide_sizes([(b, a, False)])[0].verdict == "worse"


def test_identical_launches_are_never_worse():
    a = _launches(1e-5, A_FACTORS)
    kept, changed = decide_sizes([(a, [x.copy() for x in a], False), (a, [x.copy() for x in a], True)])
    assert (kept.verdict, changed.verdict) == ("already best", "did not move")
    assert kept.comparison.ratio == 1.0 and kept.q == 1.0


def test_benjamini_hochberg_over_the_sizes_of_one_verification():
    """A 2x improvement with p ~ 0.012 is "moved" alone, not among 11 sizes that did not change
    (q = 12 p > 0.05); a clear one (launches within 2%) is "moved" among them."""
    a, b = _launches(1e-5, A_FACTORS), _launches(1e-5, B_HALF, seed=1)
    (alone,) = decide_sizes([(a, b, True)])
    assert 0.004 < alone.comparison.p_value < 0.05 and alone.verdict == "moved"
    same = _launches(2e-5, (1.0, 1.02, 0.99), seed=3)
    nulls = [(same, [x.copy() for x in same], False)] * 11
    among = decide_sizes([(a, b, True), *nulls])
    assert among[0].q == pytest.approx(min(1.0, 12 * alone.comparison.p_value))
    assert among[0].verdict == "did not move"
    clear = decide_sizes([(_launches(1e-5, (1.0, 1.02, 0.99)), _launches(1e-5, (0.5, 0.51, 0.49), seed=2), True),
                          *nulls])
    assert clear[0].verdict == "moved" and {d.verdict for d in clear[1:]} == {"already best"}


def test_twelve_unchanged_sizes_rarely_give_a_false_verdict():
    """Both sides from one distribution, launch effects of 25% drawn per launch: with BH over the 12
    sizes a verification calls some size "worse" or "moved" about 5% of the time; testing every size at
    0.05 on its own would do so in about one verification in two."""
    rng = np.random.default_rng(11)

    def side():
        return [np.exp(rng.normal(np.log(1e-5), 0.25) + rng.normal(0.0, 0.05, 20)) for _ in range(3)]

    n, false_bh, false_raw = 200, 0, 0
    for _ in range(n):
        decided = decide_sizes([(side(), side(), True) for _ in range(12)])
        false_bh += any(d.verdict in ("worse", "moved") for d in decided)
        false_raw += any(d.comparison.p_value < 0.05 for d in decided)
    assert false_bh / n <= 0.09
    assert false_raw / n >= 0.3


def test_too_few_or_missing_launches():
    a = _launches(1e-5, (1.0,))
    assert decide_sizes([(a, _launches(5e-6, (1.0,)), True)])[0].verdict == "undetermined"
    assert decide_sizes([(None, a, True)])[0].verdict == "not measured"
    assert check_verify_launches(True, None) == DEFAULT_VERIFY_LAUNCHES == 3
    assert check_verify_launches(True, 5) == 5
    with pytest.raises(UsageError, match="3 or more pairs"):
        check_verify_launches(True, 2)
    with pytest.raises(UsageError, match="give --verify too"):
        check_verify_launches(False, 4)


# ------------------------------------------------------------------------- what the file names


def test_overlapping_launches_are_a_toss_up_and_keep_the_default():
    """ring's launches fall among native's: not decidedly faster, so the default stays (and says so)."""
    rows = [_row("native", 4096, _launches(1e-5, (1.0, 1.3, 0.8))),
            _row("native:ring", 4096, _launches(1e-5, (0.9, 1.25, 0.75), seed=1)),
            _row("native:recursive_doubling", 4096, _launches(1e-5, (1.5, 1.6, 1.55), seed=2))]
    (sel,) = select(rows, "mpich")
    (c,) = sel.choices
    assert c.fastest == "native:ring" and c.winner == "native" and c.kept_default and c.within_noise
    assert c.runner_up == "native:ring" and c.vs_runner_up.ratio_low < 1 < c.vs_runner_up.ratio_high
    assert c.vs_runner_up.verdict == "noise" and not c.undetermined
    assert sel.ranges[0].algorithm == "native"
    assert any(n.startswith("toss-up at 4 KiB") for n in sel.notes)
    assert any("the default stays at 4 KiB (native:ring" in n for n in sel.notes)


def test_a_variant_decidedly_faster_than_the_default_is_named():
    rows = [_row("native", 4096, _launches(1e-5, (1.0, 1.03, 0.98))),
            _row("native:ring", 4096, _launches(5e-6, (1.0, 0.97, 1.02), seed=1)),
            _row("native:recursive_doubling", 4096, _launches(2e-5, (1.0, 1.01, 0.99), seed=2))]
    (sel,) = select(rows, "mpich")
    (c,) = sel.choices
    assert c.winner == "native:ring" and not c.within_noise and not c.kept_default
    assert c.runner_up == "native" and c.vs_runner_up.verdict == "slower"
    assert c.challenger == "native:ring" and c.vs_default.ratio == pytest.approx(0.5, rel=0.05) and c.default_q < 0.05
    assert not any("toss-up" in n or "one launch" in n for n in sel.notes)


def test_variants_no_faster_than_the_default_never_replace_it():
    """Eight variants drawn like native at six sizes (25% launch effects): Benjamini-Hochberg over
    the 48 variant-against-default comparisons leaves the default everywhere."""
    rng = np.random.default_rng(5)
    names = ["native", "native:recursive_doubling", "native:recursive_multiplying", "native:reduce_scatter_allgather",
             "native:ring", "native:recexch", "native:k_reduce_scatter_allgather", "native:smp",
             "native:tree"]
    rows = [_row(a, n, [np.exp(rng.normal(np.log(1e-5), 0.25) + rng.normal(0, 0.02, 15)) for _ in range(3)])
            for a in names for n in (8, 64, 512, 4096, 32768, 262144)]
    (sel,) = select(rows, "mpich")
    assert {c.winner for c in sel.choices} == {"native"} and [r.algorithm for r in sel.ranges] == ["native"]


def test_single_launch_sources_are_undetermined_below_what_the_prior_resolves():
    rows = [_row("native", 64, _launches(1.5e-5, (1.0,))), _row("native:ring", 64, _launches(1e-5, (1.0,), seed=1)),
            _row("native", 1 << 20, _launches(1e-3, (1.0,))),
            _row("native:ring", 1 << 20, _launches(1e-4, (1.0,), seed=1))]
    (sel,) = select(rows, "mpich")
    small, large = sel.choices
    assert small.winner == "native" and small.within_noise and small.undetermined and small.kept_default
    assert small.vs_runner_up.verdict == "undetermined" and small.vs_runner_up.method == "prior"
    assert large.winner == "native:ring" and not large.within_noise  # 10x: more than launches could make
    (note,) = [n for n in sel.notes if n.startswith("one launch")]
    m = re.match(r"one launch: launch variation unknown, toss-ups cannot be ruled out below ratio ([0-9.]+)", note)
    assert m and 1.5 < float(m.group(1)) < 10
    assert any(n.startswith("toss-up at 64 B (undetermined)") for n in sel.notes)


def _write_run(path: Path, rows, budget_s=0.3) -> Path:
    return write_run(path, rows, config={"budget_s": budget_s, "max_reps": 300, "min_reps": 10, "order": "shuffled"})


def test_the_toss_up_notes_are_shown(tmp_path, capsys):
    rows = [_row("native", 64, _launches(1.5e-5, (1.0,))), _row("native:ring", 64, _launches(1e-5, (1.0,), seed=1))]
    run = _write_run(tmp_path / "single", rows)
    main([str(x) for x in ("tune", run, "--format", "openmpi-rules")])
    out = " ".join(capsys.readouterr().out.split())  # the notes wrap at the console's width
    assert "note: toss-up at 64 B (undetermined)" in out
    assert "one launch: launch variation unknown, toss-ups cannot be ruled out below ratio" in out
    assert "note: the default stays at 64 B" in out


def test_too_few_verify_launches_are_refused_before_anything_is_written(tmp_path, capsys):
    rows = [_row("native", 64, _launches(1.5e-5, A_FACTORS)), _row("native:ring", 64, _launches(1e-5, A_FACTORS))]
    run = _write_run(tmp_path / "r", rows)
    with pytest.raises(SystemExit) as exc:
        main([str(x) for x in ("tune", run, "--format", "openmpi-rules", "--verify", "--verify-launches", "2")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ccbench: error: --verify-launches 2:")
    assert not any(p.name.startswith("tuning.") for p in run.iterdir()) and not derived(run).exists()


# ------------------------------------------------------------------------- verify, with fake jobs


class FakeJobs:
    """Stands in for `run_job`: records each call and writes the `ccbench run` job's run, with native's
    times per size x `speedup` (with the file) x a launch effect per call."""

    def __init__(self, tuning: Path, speedup: dict[int, float], spread: float = 0.02, seed: int = 0,
                 fail_at: int | None = None):
        self.tuning, self.speedup, self.spread = str(tuning.resolve()), speedup, spread
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[list[str], dict]] = []
        self.fail_at = fail_at

    def __call__(self, cmd, env):
        self.calls.append((list(cmd), dict(env)))
        arg = {k: cmd[i + 1] for i, k in enumerate(cmd[:-1]) if k.startswith("-")}
        with_file = env.get(FILE_VAR) == self.tuning
        path = new_run_dir(arg["--results-dir"], int(arg["-n"]), arg["--tag"])
        w = RunWriter(path, {"launch": int(arg["--launch-index"]), "config": {"launches": int(arg["--launches"])},
                             "mpi_env": {FILE_VAR: env[FILE_VAR]} if with_file else {}})
        effect = float(np.exp(self.rng.normal(0.0, self.spread)))
        for coll in arg["-C"].split(","):
            for n in map(int, arg["-s"].split(",")):
                t = 1e-5 * (1 + n / 4096) * effect * (self.speedup.get(n, 1.0) if with_file else 1.0)
                w.append(_row("native", n, [t * np.exp(self.rng.normal(0.0, 0.01, 15))], coll=coll))
        w.update(status="complete")
        w.close()
        if self.fail_at == len(self.calls):
            return Job(1, path, True, "exit code 1")
        return Job(0, path, False, "exit code 0")

    def order(self) -> list[tuple[int, str]]:
        return [(int(c[c.index("--launch-index") + 1]), "with" if e.get(FILE_VAR) == self.tuning else "without")
                for c, e in self.calls]


@pytest.fixture
def no_mpi(monkeypatch):
    """The launcher as prepare_launcher would find it; the caller's environment already names another rules file."""
    import ccbench.workflow.tune as workflow

    monkeypatch.setattr(workflow, "prepare_launcher",
                        lambda *_, **__: ("mpiexec", "", {"PATH": "/usr/bin", FILE_VAR: "/elsewhere/rules.txt"}, []))


def _source(tmp_path: Path) -> Path:
    """ring decidedly twice as fast as native at 64 KiB only; equal (overlapping launches) at 8 B and 4 KiB."""
    rows = []
    for n, ring in ((8, 1.0), (4096, 1.0), (65536, 0.5)):
        rows.append(_row("native", n, _launches(1e-5, (1.0, 1.02, 0.98), seed=n)))
        rows.append(_row("native:ring", n, _launches(1e-5 * ring, (1.01, 0.99, 1.02), seed=n + 1)))
    return _write_run(tmp_path / "src", rows)


def test_verify_alternates_launches_and_decides_per_size(tmp_path, no_mpi):
    run = _source(tmp_path)
    doc = tune_runs([run], "openmpi-rules")
    assert [c.winner for c in doc.choice.selections[0].choices] == ["native", "native", "native:ring"]
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {65536: 0.5})
    said = []
    result = verify(doc, say=said.append, launches=3, seed=7, job_runner=jobs)
    # A B A B A B: pair k is launch k without the file, then launch k with it
    assert jobs.order() == [(1, "without"), (1, "with"), (2, "without"), (2, "with"), (3, "without"), (3, "with")]
    for cmd, env in jobs.calls:
        assert cmd[:3] == ["mpiexec", "-n", "4"] and cmd[cmd.index("run") - 1] == "ccbench"
        assert cmd[cmd.index("--launches") + 1] == "3" and cmd[cmd.index("--seed") + 1] == "7"
        assert cmd[cmd.index("--budget") + 1] == "0.3" and cmd[cmd.index("-a") + 1] == "native"
        if FILE_VAR in env:
            assert env[FILE_VAR] == jobs.tuning and env["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "1"
    assert sum(FILE_VAR not in e for _, e in jobs.calls) == 3  # the caller's rules file is not read without
    verdicts = {r.nbytes: r.verdict for r in result.rows}
    assert verdicts == {8: "already best", 4096: "already best", 65536: "moved"}
    moved = next(r for r in result.rows if r.nbytes == 65536)
    assert moved.ratio == pytest.approx(0.5, rel=0.05) and moved.ratio_high < 1 and moved.pairs == 3
    # every launch of both sides is stored in one verification directory, named in the record and the output
    (entry,) = result.runs
    where = Path(entry.dir)
    assert where.parent == run.parent and where.name.endswith("verify-openmpi-rules")
    names = [Path(x.run).name.split("_")[-1] for k in range(3) for x in (entry.without[k], entry.with_file[k])]
    assert names == ["L01-without", "L01-with", "L02-without", "L02-with", "L03-without", "L03-with"]
    assert all(Path(x.run).parent == where for x in entry.without + entry.with_file)
    record = json.loads((where / "verification.json").read_text())
    assert result.records == (str(where / "verification.json"),) and record["order"] == list(result.order)
    assert record["seed"] == 7 and [r["verdict"] for r in record["rows"]] == [r.verdict for r in result.rows]
    assert record == result.to_dict()  # the record is the result's JSON, all but where it was written
    assert sum("launch 2/3 with the file" in line for line in said) == 1


def test_a_file_that_keeps_every_default_is_already_best_at_every_size(tmp_path, no_mpi):
    """The Done criterion on 12 sizes: launches of 20% spread, nothing changed by the file."""
    sizes = [8 << (2 * i) for i in range(12)]
    rows = []
    for n in sizes:
        rows.append(_row("native", n, _launches(1e-5, (1.0, 1.2, 0.85), seed=n)))
        rows.append(_row("native:ring", n, _launches(1e-5, (1.1, 0.9, 1.05), seed=n + 1)))
    run = _write_run(tmp_path / "src", rows)
    doc = tune_runs([run], "openmpi-rules")
    assert {c.winner for c in doc.choice.selections[0].choices} == {"native"}
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {}, spread=0.2, seed=4)
    result = verify(doc, say=lambda line: None, seed=3, job_runner=jobs)
    assert len(result.rows) == 12 and {r.verdict for r in result.rows} == {"already best"}


def test_a_failed_launch_stops_the_verification_and_names_its_runs(tmp_path, no_mpi):
    run = _source(tmp_path)
    doc = tune_runs([run], "openmpi-rules")
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {}, fail_at=4)
    with pytest.raises(CCBenchError, match=r"verification launch 2 with the file failed \(exit code 1\).*verify-"):
        verify(doc, say=lambda line: None, job_runner=jobs)
    assert len(jobs.calls) == 4
