"""The diagnosis, pure: the pair schedule (every pair once, disjoint rounds, node-aware, linear in P), the robust
rule and the decision on synthetic matrices with known answers, and the fault that slows a rank in a diagnosis."""

import itertools
import math

import numpy as np
import pytest

from ccbench.analysis.doctor import SUSPECTS_FOUND, WITHHELD, diagnose, exit_code, out_of_line, split_effects
from ccbench.core.errors import UsageError
from ccbench.core.pairs import pair_rounds, rank_groups, round_robin
from ccbench.measure.session import read_fault
from ccbench.present.doctor import answer_line
from ccbench.store.doctor_rows import LINK, DoctorRow

# -- the schedule ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(2, 34))
def test_a_round_robin_meets_every_pair_once_in_disjoint_rounds(n):
    rounds = round_robin(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    met = [tuple(p) for r in rounds for p in r.tolist()]
    assert sorted(met) == list(itertools.combinations(range(n), 2))
    assert all(len(set(r.ravel().tolist())) == r.size for r in rounds)  # nobody twice in a round
    assert all(len(r) == n // 2 for r in rounds)  # odd n: exactly one player sits out


def _layout(ranks_per_node):
    return [node for node, k in enumerate(ranks_per_node) for _ in range(k)]


@pytest.mark.parametrize("ranks_per_node", [[4, 4, 4], [3, 3, 3, 3], [2] * 5, [6], [1] * 6, [2, 3, 1], [1, 4]])
def test_node_aware_rounds_pair_one_rank_per_node_between_nodes_and_every_pair_inside(ranks_per_node):
    node_of = _layout(ranks_per_node)
    local = [sum(1 for m in node_of[:r] if m == node_of[r]) for r in range(len(node_of))]
    rounds = pair_rounds(node_of)
    between, inside = [], []
    for rnd in rounds:
        ranks = rnd.pairs.ravel().tolist()
        assert len(set(ranks)) == len(ranks)
        for a, b in rnd.pairs.tolist():
            assert a < b
            if rnd.between:
                assert node_of[a] != node_of[b] and local[a] == local[b]
                between.append((a, b))
            else:
                assert node_of[a] == node_of[b]
                inside.append((a, b))
        if rnd.between:  # one rank per node in a round between nodes: no two pairs share a node's links
            nodes = [node_of[r] for r in ranks]
            assert len(set(nodes)) == len(nodes)
    assert [r.between for r in rounds] == sorted((r.between for r in rounds), reverse=True)
    pairs = list(itertools.combinations(range(len(node_of)), 2))
    assert sorted(between) == [(a, b) for a, b in pairs if node_of[a] != node_of[b] and local[a] == local[b]]
    assert sorted(inside) == [(a, b) for a, b in pairs if node_of[a] == node_of[b]]


def test_rounds_are_p_minus_1_for_even_layouts():
    for nodes, k in ((4, 4), (2, 2), (8, 1), (1, 8), (6, 2)):
        assert len(pair_rounds(_layout([k] * nodes))) == nodes * k - 1


@pytest.mark.parametrize("ranks_per_node", [1, 64, 4096])
def test_the_number_of_rounds_grows_linearly_up_to_4096_ranks(ranks_per_node):
    counts = {}
    for p in (64, 256, 1024, 4096):
        k = min(ranks_per_node, p)
        rounds = pair_rounds([r // k for r in range(p)])
        counts[p] = len(rounds)
        assert sum(len(r.pairs) for r in rounds) == (p * (p - 1) // 2 if k == p else
                                                      (p // k) * (p // k - 1) // 2 * k + (p // k) * k * (k - 1) // 2)
    assert all(p - 1 <= c <= p for p, c in counts.items())  # P-1 rounds, never P^2 tests
    last = pair_rounds([r // min(ranks_per_node, 4096) for r in range(4096)])[-1].pairs
    assert len(np.unique(last)) == last.size


def test_groups_split_the_ranks_by_node_and_must_divide_them():
    assert rank_groups(_layout([2, 2, 2, 2]), 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert rank_groups([1, 0, 1, 0], 2) == [[1, 3], [0, 2]]  # node 0's ranks first, whatever the rank order
    for bad in (3, 0, 9):
        with pytest.raises(UsageError, match=f"--groups {bad}: the 8 ranks cannot be split"):
            rank_groups(_layout([2, 2, 2, 2]), bad)


# -- the rule --------------------------------------------------------------------------------------------------


def test_out_of_line_needs_the_minimum_effect_and_the_modified_z_score():
    tight = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    # peers identical: the scale is the floor (5% of log time): 1.3x has z = 0.6745 ln 1.3 / 0.05 = 3.54
    assert set(out_of_line({**tight, "x": 1.3})) == {"x"}
    assert out_of_line({**tight, "x": 1.29}) == {}
    # peers spread: with x the log median is 0.1 and the MAD 0.2, above the floor; 3x (2.7x the median) has
    # z = 0.6745 (ln 3 - 0.1) / 0.2 = 3.37: not named; 4x has z = 4.34: named
    spread = {"a": math.exp(-0.2), "b": math.exp(0.2), "c": 1.0, "d": math.exp(-0.2), "e": math.exp(0.2)}
    assert out_of_line({**spread, "x": 3.0}) == {}
    assert set(out_of_line({**spread, "x": 4.0})) == {"x"}
    # the median and MAD are the whole level's: among 4, a noisy peer (4x) beside a slow one (200x) is not named
    assert set(out_of_line({"a": 1.0, "b": 4.0, "c": 1.0, "x": 200.0})) == {"x"}
    assert out_of_line({**tight, "x": 0.2}) == {}  # faster is never a suspect
    assert out_of_line({"a": 1.0, "x": 9.0}) == {}  # fewer than 3: no peers to speak of
    assert out_of_line({**tight, "x": 2.0})["x"] == pytest.approx(2.0)


def test_split_effects_gives_a_slow_end_to_its_end_and_a_slow_link_to_its_link():
    ends = "abcd"
    links = {(x, y): 1.0 for x, y in itertools.combinations(ends, 2)}
    score, resid = split_effects({k: (3.0 if "c" in k else 1.0) for k in links})
    assert score["c"] == pytest.approx(3.0) and score["a"] == pytest.approx(1.0)
    assert all(v == pytest.approx(1.0) for v in resid.values())
    score, resid = split_effects({k: (3.0 if k == ("a", "b") else 1.0) for k in links})
    assert all(v == pytest.approx(1.0) for v in score.values())
    assert resid[("a", "b")] == pytest.approx(3.0) and resid[("c", "d")] == pytest.approx(1.0)


# -- the decision on synthetic runs --------------------------------------------------------------------------

RNG = np.random.default_rng(29)


def _row(test, subject, nbytes, per_launch, noise=0.02):
    """A row whose launch L's samples sit around per_launch[L] (multiplicative noise, 12 samples a launch)."""
    samples = [t * math.exp(RNG.normal(0, noise)) for t in per_launch for _ in range(12)]
    k = len(per_launch)
    return DoctorRow(test=test, subject=subject, nbytes=nbytes, ranks="0,1", nranks=2, samples=len(samples),
                     median_s=float(np.median(samples)), min_s=min(samples), mean_s=float(np.mean(samples)),
                     ci_low_s=min(samples), ci_high_s=max(samples), samples_s=tuple(samples),
                     launches=tuple(range(1, k + 1)) if k > 1 else (), launch_samples=(12,) * k if k > 1 else ())


def _machine(hosts, ranks_per_host, pair_time, launches=3, noise=0.02, sizes=(8,)):
    """Rows of a diagnosis of `hosts` x `ranks_per_host`: every pair the schedule measures, its time per launch
    `pair_time(a, b, launch)` (a, b as "host:l"), 20 us healthy; each node alone and all ranks at 50 us."""
    labels = [f"{h}:{i}" for h in hosts for i in range(ranks_per_host)]
    node_of = [i // ranks_per_host for i in range(len(labels))]
    rows = []
    for n in sizes:
        for rnd in pair_rounds(node_of):
            for a, b in rnd.pairs.tolist():
                rows.append(_row("pair", labels[a] + LINK + labels[b], n,
                                 [pair_time(labels[a], labels[b], launch) for launch in range(launches)], noise))
        if ranks_per_host > 1:
            rows += [_row("node", h, n, [50e-6] * launches, noise) for h in hosts]
        rows += [_row("all", "all", n, [50e-6] * launches, noise)]
        rows += [_row("rank", lab, n, [50e-6] * launches, noise) for lab in labels]
    return rows


def _named(rows, meta=None):
    return {(s.kind, s.name) for s in diagnose(rows, meta).suspects}


def _slow(*who, factor=3.0, launches=range(99)):
    """A pair time: slower by `factor` where any end's host (or "host:l" rank) is in `who` (a link: a tuple)."""
    def time(a, b, launch):
        hit = any(w in (a, b, a.split(":")[0], b.split(":")[0]) for w in who if isinstance(w, str))
        hit |= any({a.split(":")[0], b.split(":")[0]} == set(w) for w in who if isinstance(w, tuple))
        return 20e-6 * (factor if hit and launch in launches else 1.0)
    return time


def test_a_healthy_machine_names_nobody():
    rows = _machine(["h0", "h1", "h2", "h3"], 2, _slow())
    d = diagnose(rows, {"nranks": 8})
    assert d.suspects == [] and d.exclude == [] and d.launches == 3
    assert exit_code(type("R", (), {"rows": rows, "meta": {}})()) == 0


def test_a_noisy_but_healthy_machine_names_nobody():
    """Every pair 1.0-1.25x from launch to launch and pair to pair: within the 1.3x minimum effect, so nobody."""
    jitter = {}

    def time(a, b, launch):
        return 20e-6 * jitter.setdefault((a, b, launch), RNG.uniform(1.0, 1.25))

    assert _named(_machine([f"h{i}" for i in range(6)], 1, time, noise=0.08)) == set()


def test_a_slow_host_is_named_as_the_host_and_no_link():
    rows = _machine(["h0", "h1", "h2", "h3"], 1, _slow("h2"))
    d = diagnose(rows, {"nranks": 4})
    assert _named(rows) == {("host", "h2")}
    (s,) = d.suspects
    assert s.effect == pytest.approx(3.0, rel=0.05) and (s.launches, s.of) == (3, 3)
    assert d.exclude == ["h2"] and "--exclude h2" in s.confirm
    assert [e.split(": ")[0] for e in s.evidence] == ["pairs between nodes, 8 B"]
    assert s.evidence[0].endswith("x its peers' median (3 of 3 launches)")
    assert d.to_dict()["exclude"] == "h2"


def test_a_slow_link_is_named_as_that_link_not_as_either_host():
    for hosts in (["h0", "h1", "h2", "h3"], ["h0", "h1", "h2", "h3", "h4"], ["h0", "h1", "h2"]):
        rows = _machine(hosts, 2, _slow(("h0", "h1")))
        assert _named(rows) == {("link", "h0 <> h1")}, hosts
        d = diagnose(rows)
        assert d.exclude == [] and "pingpong" in d.suspects[0].confirm


def test_three_hosts_still_tell_a_slow_host_from_a_slow_link():
    assert _named(_machine(["a", "b", "c"], 1, _slow("b"))) == {("host", "b")}
    assert _named(_machine(["a", "b", "c"], 1, _slow(("a", "c")))) == {("link", "a <> c")}


def test_two_hosts_cannot_tell_a_slow_host_from_a_slow_link_and_say_so():
    for who in ("h1", ("h0", "h1")):
        d = diagnose(_machine(["h0", "h1"], 2, _slow(who)))
        assert d.suspects == []
        assert any("cannot be told apart" in n for n in d.notes)


def test_a_slow_rank_is_named_as_the_rank_not_its_host():
    rows = _machine(["h0", "h1", "h2", "h3"], 3, _slow("h1:2"))
    assert _named(rows) == {("rank", "h1:2")}
    (s,) = diagnose(rows).suspects
    assert {e.split(",")[0] for e in s.evidence} >= {"pairs between nodes", "pairs inside its node"}


def test_one_host_names_the_slow_rank_among_its_ranks():
    rows = _machine(["vm"], 4, _slow("vm:2", factor=2.0), launches=1)
    d = diagnose(rows)
    assert _named(rows) == {("rank", "vm:2")} and d.launches == 1
    assert any("one launch" in n for n in d.notes) and any("one host" in n for n in d.notes)


def test_one_slow_pair_is_no_suspect_unless_it_is_a_link_between_hosts():
    """Inside a host one slow pair of ranks names nobody; between hosts, one slow pair of ranks (node-local rank 0
    only, of 2) is not the whole link: nobody; every pair of the two hosts slow: the link."""
    assert _named(_machine(["vm"], 4, _slow(("vm:1", "vm:3")))) == set()

    def rank_zero_only(a, b, launch):
        return 20e-6 * (3.0 if {a, b} == {"h0:0", "h1:0"} else 1.0)

    assert _named(_machine(["h0", "h1", "h2", "h3"], 2, rank_zero_only)) == set()
    assert _named(_machine(["h0", "h1", "h2", "h3"], 2, _slow(("h0", "h1")))) == {("link", "h0 <> h1")}


def test_a_suspect_must_be_seen_in_most_launches():
    assert _named(_machine(["h0", "h1", "h2", "h3"], 1, _slow("h3", launches={1}))) == set()
    assert _named(_machine(["h0", "h1", "h2", "h3"], 1, _slow("h3", launches={0, 2}))) == {("host", "h3")}
    (s,) = diagnose(_machine(["h0", "h1", "h2", "h3"], 1, _slow("h3", launches={0, 2}))).suspects
    assert (s.launches, s.of) == (2, 3)
    # named in 2 of 3 launches, but by a different test each time (8 B in one, 1 MiB in the other): nobody

    def by_size(a, b, launch, n):
        return 20e-6 * (3.0 if "h3" in a + b and (launch, n) in ((0, 8), (2, 1 << 20)) else 1.0)

    rows = [r for n in (8, 1 << 20) for r in _machine(["h0", "h1", "h2", "h3"], 1,
                                                      lambda a, b, launch, n=n: by_size(a, b, launch, n), sizes=(n,))]
    assert _named(rows) == set()


def test_a_host_slow_on_its_own_is_named_by_its_collective_alone():
    rows = [r if not (r.test == "node" and r.subject == "h1") else _row("node", "h1", 8, [150e-6] * 3)
            for r in _machine(["h0", "h1", "h2", "h3"], 2, _slow())]
    (s,) = diagnose(rows).suspects
    assert (s.kind, s.name) == ("host", "h1") and s.evidence[0].startswith("each node alone, allreduce 8 B: ")
    assert exit_code(type("R", (), {"rows": rows, "meta": {}})()) == SUSPECTS_FOUND


def test_the_pair_matrix_and_per_host_figures_come_from_the_rows():
    d = diagnose(_machine(["h0", "h1", "h2"], 2, _slow("h2")))
    labels, m = d.pair_matrix[8]
    assert labels == ["h0:0", "h0:1", "h1:0", "h1:1", "h2:0", "h2:1"]
    assert np.isnan(m[0, 0]) and np.isnan(m[0, 3])  # h0:0 - h1:1: not measured (one rank per node, same l)
    assert m[0, 4] == pytest.approx(60e-6, rel=0.1) and m[0, 2] == pytest.approx(20e-6, rel=0.1)
    assert d.per_host["pairs between nodes, 8 B"]["h2"] == pytest.approx(60e-6, rel=0.1)


def _load(*others):
    """run.json's pooled ``load``: launch L's other processes' share others[L - 1] (the worst on top)."""
    per = {str(i): {"other_fraction": o} for i, o in enumerate(others, 1)}
    return {"load": {"other_fraction": max(others), "launches": per}} if len(others) > 1 else \
        {"load": {"other_fraction": others[0]}}


def test_a_diagnosis_under_load_is_withheld_and_its_loaded_launches_left_out():
    """The rule of compare: more than 20% of the CPU to other processes while a launch measured, and that launch
    decides nothing; every launch loaded: no decision (its own exit code, the reason and the rerun)."""
    rows = _machine(["h0", "h1", "h2", "h3"], 1, _slow("h2"))
    run = type("R", (), {"rows": rows, "meta": {**_load(0.2, 0.2, 0.2), "argv": ["x", "doctor", "--launch", "4"]}})
    assert exit_code(run()) == SUSPECTS_FOUND and _named(rows, run.meta) == {("host", "h2")}  # 20%: not above
    run.meta = {**run.meta, **_load(0.21, 0.5, 0.9)}
    d = diagnose(rows, run.meta)
    assert d.suspects == [] and exit_code(run()) == WITHHELD
    assert "90%" in d.withheld and d.withheld.endswith("rerun on a quiet machine: ccbench doctor --launch 4")
    assert answer_line(d).startswith("no decision: other processes used up to 90%")
    assert diagnose(rows, {**_load(0.9), "lab": {"hosts": 4}}).withheld.endswith("ccbench lab run -- doctor")
    ranks_argv = {**_load(0.9), "argv": ["x", "doctor", "--sizes", "8,1M"], "nranks": 4, "oversubscribed": True}
    assert diagnose(rows, ranks_argv).withheld.endswith(  # started by --launch or mpiexec: the ranks' argv lacks it
        "ccbench doctor --launch 4 --oversubscribe --sizes 8,1M")
    assert diagnose(rows, {**ranks_argv, "slurm": {"job_id": "7"}}).withheld.endswith(
        "srun python -m mpi4py -m ccbench doctor --sizes 8,1M")
    allowed = {**_load(0.9), "config": {"params": {"allow_load": 0.95}}}  # --allow-load: decide up to that share
    assert _named(rows, allowed) == {("host", "h2")}
    assert diagnose(rows, {**_load(0.3), "config": {"params": {"allow_load": 0.1}}}).withheld.startswith(
        "other processes used up to 30% of the machine's CPU time while it measured (more than 10%)")
    # one loaded launch of 3 is left out: the other two decide (a host slow in launches 1 and 3 only)
    rows = _machine(["h0", "h1", "h2", "h3"], 1, _slow("h3", launches={0, 2}))
    (s,) = diagnose(rows, _load(0.05, 0.6, 0.1)).suspects
    assert (s.name, s.launches, s.of) == ("h3", 2, 2)
    assert any("launch(es) 2 left out" in n for n in diagnose(rows, _load(0.05, 0.6, 0.1)).notes)
    assert _named(rows, _load(0.6, 0.05, 0.1)) == set()  # launch 1 out: named in 1 of the 2 left


def test_the_note_on_ranks_per_host_counts_ranks_not_sizes():
    rows = _machine(["h0", "h1", "h2", "h3"], 1, _slow(), sizes=(8, 1 << 20))
    assert not any("2 ranks per host" in n for n in diagnose(rows).notes)
    two = diagnose(_machine(["h0", "h1"], 2, _slow("h1:1", factor=3.0)))
    assert two.suspects == [] and any("2 ranks per host" in n and "nobody can be named" in n for n in two.notes)
    assert not any("nobody can be named" in n for n in diagnose(_machine(["h0", "h1", "h2"], 2, _slow())).notes)


def test_a_diagnosis_visits_every_measurement_three_times_unless_told_otherwise():
    """The doctor kind's own default rounds: a pair's samples from 3 visits spread over the run, so that a burst of
    other load during one visit does not make its link look slow; what the user gives still wins."""
    from ccbench.measure.kind_run import resolve_kind_config
    from ccbench.store.kinds import kind_named

    doctor = kind_named("doctor")
    assert resolve_kind_config(doctor, {"rounds": None}, {}).rounds == 3
    assert resolve_kind_config(doctor, {"rounds": 1}, {}).rounds == 1
    assert resolve_kind_config(doctor, {}, {"allow_load": 1}).params["allow_load"] == 1.0
    with pytest.raises(UsageError, match="--allow-load: expected a share of the CPU from 0 to 1"):
        resolve_kind_config(doctor, {}, {"allow_load": -0.1})


# -- the fault -------------------------------------------------------------------------------------------------


def test_a_diagnosis_fault_slows_one_rank_or_one_link(monkeypatch):
    monkeypatch.setenv("CCBENCH_FAULT", "slow:2:doctor:300us")
    rank = read_fault(4)
    assert rank.delay_s == pytest.approx(300e-6)
    assert rank.slows_exchange(2, 0) and rank.slows_exchange(2, None) and not rank.slows_exchange(1, 2)
    assert not rank.slows("allreduce", "native", 8)
    monkeypatch.setenv("CCBENCH_FAULT", "slow:2:doctor/3:1ms")
    link = read_fault(4)
    assert link.slows_exchange(2, 3) and not link.slows_exchange(2, 0) and not link.slows_exchange(2, None)
    for bad in ("slow:2:doctor/x:1ms", "slow:2:doctor:8:1ms", "slow:2:doctor"):
        monkeypatch.setenv("CCBENCH_FAULT", bad)
        with pytest.raises(UsageError):
            read_fault(4)
    monkeypatch.setenv("CCBENCH_FAULT", "slow:1:allreduce/ring:5us")
    assert not read_fault(4).slows_exchange(1, None)
