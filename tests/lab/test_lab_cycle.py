"""The lab end to end: fitted delay and rate recover the injected ones; the model orders allreduce right; hosts
with several ranks are nodes to MPI.

One 4-host lab for the module: ping-pong sweeps at (500 us, 1 Gbit/s) and (2 ms,
200 Mbit/s), each against a zero-delay baseline at the same rate; then ring against
recursive doubling at 4 hosts on the slow link; then 2 hosts x 2 ranks at 1 ms, whose
node map (MPI_Comm_split_type) must be the lab's hosts, with a ping-pong inside a host
(shared memory) and across hosts (the link), and a host with a link of its own; then a
crashed lab is cleaned up.
Skipped, with the reason, where namespaces or the queue cannot be made (not root, no iptables).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The lab tier: real namespaces, iptables and the emulator, as root, once per CI run
# (tests/lab/ci_lab.sh sets CCBENCH_LAB_TESTS=1); the plain and MPI tiers skip it.
pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(os.environ.get("CCBENCH_LAB_TESTS") != "1",
                                 reason="lab tier: run with CCBENCH_LAB_TESTS=1 (bash tests/lab/ci_lab.sh)")]

REPO = Path(__file__).resolve().parents[2]
# The fitted delay is the run's alpha minus the baseline's, and the two come from separate
# launches: their launch-to-launch spread, not the fit, bounds how close it can get. Over seven
# CI runs on the 2-core machine the baseline alpha alone ranged 60-99 us and the delay error
# -39..+55 us (+55 under load); so the check allows 60 us or 10% of the delay.
DELAY_TOL_S = 60e-6
DELAY_TOL_REL = 0.10
RATE_TOL = 0.05


def ccb(*args, check=True, timeout=300):
    r = subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=timeout,
                       cwd=REPO, env=dict(os.environ, COLUMNS="200"))
    if check:
        assert r.returncode == 0, f"ccbench {' '.join(args)}: {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def newest_run(root: Path) -> Path:
    runs = sorted(d for d in root.iterdir() if d.is_dir() and "lab-baseline" not in d.name)
    return runs[-1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from ccbench.lab import core

    why = core.preflight()
    if why:
        pytest.skip(why)
    if core.load_state() is not None or core.lab_namespaces():
        pytest.skip("a lab is already up on this machine; not touching it")
    results = tmp_path_factory.mktemp("lab-runs")
    try:
        ccb("lab", "up", "--hosts", "4", "--delay", "500us", "--rate", "1gbit", "--results-dir", str(results))
        yield results
    finally:
        ccb("lab", "down", check=False)
        assert core.lab_namespaces() == [] and core.load_state() is None


@pytest.mark.parametrize("delay,rate,delay_s,rate_bps", [("500us", "1gbit", 500e-6, 1e9),
                                                          ("2ms", "200mbit", 2e-3, 200e6)])
def test_fits_recover_injected_delay_and_rate(lab, delay, rate, delay_s, rate_bps):
    from ccbench.analysis.runs import fit_run
    from ccbench.measure.lab import SWEEP_ARGS
    from ccbench.store.run import open_run

    ccb("lab", "set", "--delay", delay, "--rate", rate, "--results-dir", str(lab))
    status = ccb("lab", "status").stdout
    assert "running" in status and "baseline: alpha" in status
    r = ccb("lab", "run", "-n", "2", "--", *SWEEP_ARGS, "--results-dir", str(lab), "--no-show")
    assert "traffic over the emulated links" in r.stdout
    run = newest_run(lab)
    meta = json.loads((run / "run.json").read_text())
    assert meta["lab"]["delay_s"] == delay_s and meta["lab"]["rate_bps"] == rate_bps
    assert meta["lab"]["baseline"]["rate_bps"] == rate_bps  # measured at this rate, zero delay
    traffic = json.loads((run / "lab-traffic.json").read_text())
    rows = [json.loads(line) for line in (run / "cases.jsonl").read_text().splitlines()]
    one_way = sum(r["nbytes"] * (len(r["samples_s"]) + 2) for r in rows)  # samples + warm-up, one direction
    assert traffic["crossed_links"]
    for ns in ("ccb-h0", "ccb-h1"):  # every message went through the emulated link, both ways
        assert traffic["links"][ns]["rx_bytes"] >= one_way
        assert traffic["links"][ns]["emulated_bytes"] >= one_way
    lab_fit = fit_run(open_run(run)).lab
    print(f"\n{delay} {rate}: alpha {lab_fit['fitted']['alpha_s'] * 1e6:.1f} us, baseline "
          f"{lab_fit['baseline']['alpha_s'] * 1e6:.1f} us, fitted delay {lab_fit['fitted_delay_s'] * 1e6:.1f} us "
          f"(error {lab_fit['delay_error_s'] * 1e6:+.1f} us), fitted rate {lab_fit['fitted']['rate_bps'] / 1e6:.1f} "
          f"Mbit/s (error {lab_fit['rate_error']:+.2%}); run {run}")
    assert abs(lab_fit["rate_error"]) < RATE_TOL
    assert abs(lab_fit["delay_error_s"]) < max(DELAY_TOL_S, DELAY_TOL_REL * delay_s)
    shown = ccb("fit", str(run)).stdout  # the report shows fitted against injected
    assert "injected" in shown and "delay = alpha - baseline" in shown


def test_allreduce_order_follows_the_model_on_the_slow_link(lab):
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import predict

    ccb("lab", "set", "--delay", "2ms", "--rate", "200mbit", "--results-dir", str(lab))
    sizes = (8, 4 << 20)
    algs = ("ring", "recursive_doubling")
    ccb("lab", "run", "--", "-C", "allreduce", "-a", ",".join(algs), "-s", ",".join(map(str, sizes)),
        "--budget", "0.3", "--warmup", "1", "--min-reps", "3", "--results-dir", str(lab), "--no-show")
    run = newest_run(lab)
    meta = json.loads((run / "run.json").read_text())
    assert meta["nranks"] == 4 and meta["lab"]["hosts"] == 4
    traffic = json.loads((run / "lab-traffic.json").read_text())
    assert traffic["crossed_links"] and len(traffic["links"]) == 4
    rows = {(r["algorithm"], r["nbytes"]): r for r in map(json.loads, (run / "cases.jsonl").read_text().splitlines())}
    state = json.loads((Path(os.environ.get("CCBENCH_LAB_DIR", "/run/ccbench-lab")) / "state.json").read_text())
    params = NetworkParams(alpha_s=state["delay_s"] + state["baseline"]["alpha_s"],
                           beta_s_per_byte=8.0 / state["rate_bps"], gamma_s_per_byte=None)
    # recursive doubling / ring, predicted and measured, at each size
    pred, meas = [], []
    for n in sizes:
        predicted = {a: predict(REGISTRY["allreduce"][a], 4, n, params) for a in algs}
        measured = {a: rows[(a, n)]["median_s"] for a in algs}
        print(f"\nallreduce {n} B at 4 hosts: predicted {predicted}, measured median {measured}")
        pred.append(predicted["recursive_doubling"] / predicted["ring"])
        meas.append(measured["recursive_doubling"] / measured["ring"])
    # the model predicts a crossover between the two sizes (RD 3x faster at 8 B, 1.3x slower at 4 MiB); on 2
    # shared cores the 4 MiB pair measured within 1-4% of each other, either way round, so what is checked is
    # the crossover's direction with margins a quiet or a busy machine both keep: RD clearly wins at 8 B, and
    # ring gains at least 1.5x on it by 4 MiB, ending faster or at most 10% slower
    assert pred[0] < 1 < pred[1]
    assert meas[0] < 0.8, f"recursive doubling should win at 8 B: RD / ring = {meas[0]:.2f}"
    assert meas[1] / meas[0] >= 1.5 and meas[1] >= 1 / 1.1, f"RD / ring: {meas[0]:.2f} at 8 B, {meas[1]:.2f} at 4 MiB"


def _pingpong(lab, *lab_args, run_args=()):
    """One lab run of an 8 B ping-pong between ranks 0 and 1; (run.json, the case row)."""
    ccb("lab", "run", *lab_args, "--", "-C", "pingpong", "-s", "8", "--budget", "0.2", "--warmup", "2",
        "--min-reps", "20", "--max-reps", "60", "--results-dir", str(lab), "--no-show", *run_args)
    run = newest_run(lab)
    meta = json.loads((run / "run.json").read_text())
    (row,) = [json.loads(line) for line in (run / "cases.jsonl").read_text().splitlines()]
    print(f"\nlab run {' '.join(lab_args)}: 8 B ping-pong min {row['min_s'] * 1e6:.1f} us, median "
          f"{row['median_s'] * 1e6:.1f} us; node of each rank {meta['topology']['node_of_rank']}; run {run}")
    return meta, row


def test_hosts_of_two_ranks_are_nodes_to_mpi(lab):
    """2 hosts x 2 ranks, 1 ms links: Split_type(COMM_TYPE_SHARED) finds the lab's hosts, ranks of a host share
    memory (far below the link's delay), ranks of different hosts pay the link; a host's own link is applied."""
    ccb("lab", "set", "--delay", "1ms", "--no-baseline")
    for order, nodes_of_rank in (("block", [0, 0, 1, 1]), ("cyclic", [0, 1, 0, 1])):
        meta, row = _pingpong(lab, "-n", "4", "--ppn", "2", "--order", order)
        topo = meta["topology"]
        assert topo["source"] == "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)"
        assert topo["nodes"] == 2 and topo["node_names"] == ["ccb-h0", "ccb-h1"] and topo["hostnames_agree"]
        assert topo["node_of_rank"] == nodes_of_rank == meta["lab"]["host_of_rank"] and topo["order"] == order
        assert topo["local_rank"] == ([0, 1, 0, 1] if order == "block" else [0, 0, 1, 1])
        assert topo["machines"] == 1  # two nodes to MPI, one machine
        assert meta["nodes"] == 2 and meta["ranks_per_node"] == 2 and meta["hosts"] == {"ccb-h0": 2, "ccb-h1": 2}
        assert meta["oversubscribed"] and meta["thread_level"] == "multiple"  # 4 ranks on 2 cores, on purpose
        assert "MPIR_CVAR_NOLOCAL" not in meta["mpi_env"]
        assert (meta["lab"]["hosts"], meta["lab"]["ppn"], meta["lab"]["order"]) == (2, 2, order)
        if order == "block":  # ranks 0 and 1 on ccb-h0: shared memory, nothing near the 1 ms link
            assert row["min_s"] < 300e-6
        else:  # ranks 0 and 1 on different hosts: one link delay each way, plus the software's own cost
            assert 1e-3 <= row["min_s"] < 1e-3 + 400e-6
    ccb("lab", "set", "--host", "1", "--delay", "3ms", "--no-baseline")
    meta, row = _pingpong(lab, "-n", "2", "--ppn", "1")
    assert meta["lab"]["links"]["ccb-h1"]["delay_s"] == 3e-3 and meta["lab"]["links"]["ccb-h0"]["delay_s"] == 1e-3
    assert meta["lab"]["delay_s"] is None  # no single injected delay on the hosts used
    assert 2e-3 <= row["min_s"] < 2e-3 + 400e-6  # (1 ms + 3 ms) / 2 one way
    assert "ccb-h1: delay 3ms" in ccb("lab", "status").stdout


def test_a_pair_of_hosts_with_a_slower_link_of_its_own(lab):
    """Links at 1 ms, the pair of hosts 0 and 2 at 3 ms (both ways): a ping-pong between hosts 0 and 1 pays 1 ms,
    one between hosts 0 and 2 (ranks 0 and 1 after --placement 0,2,1) 3 ms; the run records the pair's link."""
    ccb("lab", "set", "--delay", "1ms", "--no-baseline")
    ccb("lab", "set", "--pair", "0,2", "--delay", "3ms", "--no-baseline")
    assert "pair ccb-h0-ccb-h2: delay 3ms" in ccb("lab", "status").stdout
    meta, row = _pingpong(lab, "-n", "3", "--ppn", "1")
    assert meta["lab"]["pairs"] == {"ccb-h0,ccb-h2": {"delay_s": 3e-3, "rate_bps": meta["lab"]["links"]["ccb-h0"]
                                                      ["rate_bps"]}} and meta["lab"]["delay_s"] is None
    fast = row["min_s"]
    meta, row = _pingpong(lab, "-n", "3", "--ppn", "1", run_args=("--placement", "0,2,1"))
    topo = meta["topology"]
    assert topo["placement"]["original_rank"] == [0, 2, 1] and topo["node_names"] == ["ccb-h0", "ccb-h2", "ccb-h1"]
    slow = row["min_s"]  # ranks 0 and 1 now on hosts 0 and 2: the pair's own link
    # each pays its own link's delay plus the software's cost (which other work on the 2 cores inflates): each is
    # held to its own injected delay; their difference would add the two minima's noise (a 0-1 minimum of 1.49 ms
    # beside a 0-2 one of 3.07 ms was seen once on an idle machine)
    assert 1e-3 <= fast < 1e-3 + 600e-6, f"0-1 ping-pong {fast * 1e6:.0f} us"
    assert 3e-3 <= slow < 3e-3 + 600e-6, f"0-2 ping-pong {slow * 1e6:.0f} us"


def test_placement_re_ranks_the_lab_hosts_ranks(lab):
    """2 hosts x 2 ranks launched block, run with --placement cyclic: the sweep's ranks alternate between the hosts,
    the hierarchical allreduce finds the two nodes and is exact; on one rank per host it is refused."""
    ccb("lab", "set", "--delay", "1ms", "--no-baseline")
    ccb("lab", "run", "-n", "4", "--ppn", "2", "--", "-C", "allreduce", "-a", "ring,hierarchical", "-s", "8,64K",
        "--budget", "0.2", "--min-reps", "3", "--max-reps", "10", "--placement", "cyclic", "--results-dir", str(lab),
        "--no-show")
    run = newest_run(lab)
    topo = json.loads((run / "run.json").read_text())["topology"]
    assert topo["node_of_rank"] == [0, 1, 0, 1] and topo["order"] == "cyclic" and topo["nodes"] == 2
    assert topo["placement"] == {"placement": "cyclic", "seed": None, "original_rank": [0, 2, 1, 3],
                                 "launch_order": "block"}
    rows = [json.loads(line) for line in (run / "cases.jsonl").read_text().splitlines()]
    assert sorted((r["algorithm"], r["nbytes"]) for r in rows) == [("hierarchical", 8), ("hierarchical", 65536),
                                                                   ("ring", 8), ("ring", 65536)]
    assert all(r["nwrong"] == 0 for r in rows)
    assert "--placement cyclic re-ranked the launch's block order" in ccb("show", str(run)).stdout
    before = set(lab.iterdir())
    r = ccb("lab", "run", "-n", "2", "--ppn", "1", "--", "-C", "allreduce", "-a", "hierarchical", "-s", "8",
            "--results-dir", str(lab), check=False)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ccbench: error: allreduce/hierarchical cannot run here: no node hierarchy: one rank on each of the 2 nodes"]
    assert set(lab.iterdir()) == before


def test_doctor_finds_the_two_link_levels_and_names_a_slow_host(lab):
    """ccbench doctor on the lab, from the pair times alone: 2 hosts x 2 ranks at 1 ms give two levels that agree
    with the node map, the one between hosts at the injected delay, the one inside a host 10x faster or more; then
    4 hosts x 1 rank with host 2's link 3 ms slower: the diagnosis names host ccb-h2 and exits 4."""
    from ccbench.analysis.doctor import diagnose
    from ccbench.analysis.levels import pair_levels
    from ccbench.store.run import open_run

    ccb("lab", "set", "--delay", "1ms", "--no-baseline")
    ccb("lab", "run", "-n", "4", "--ppn", "2", "--", "doctor", "--sizes", "8,1M", "--results-dir", str(lab),
        "--no-show", "--allow-load", "1")  # levels and naming are tested here, not the load rule
    lv = pair_levels(open_run(newest_run(lab)).rows)
    inside, between = lv.levels
    print(f"\ndoctor levels: inside alpha {inside.alpha_s * 1e6:.1f} us, between alpha {between.alpha_s * 1e6:.1f} us, "
          f"{between.bandwidth_gbs:.3g} GB/s")
    assert (inside.where, between.where, lv.disagree) == ("inside nodes", "between nodes", [])
    assert 1e-3 <= between.alpha_s < 1e-3 + 400e-6 and inside.alpha_s * 10 <= between.alpha_s
    ccb("lab", "set", "--host", "2", "--delay", "4ms", "--no-baseline")
    r = ccb("lab", "run", "-n", "4", "--ppn", "1", "--", "doctor", "--sizes", "8", "--results-dir", str(lab),
            "--no-show", "--allow-load", "1", check=False)
    run = open_run(newest_run(lab))
    d = diagnose(run.rows, run.meta)
    assert r.returncode == 4, r.stderr[-2000:]
    assert [(s.kind, s.name) for s in d.suspects] == [("host", "ccb-h2")] and d.exclude == ["ccb-h2"]


def test_lab_launch_merges_launches_run_on_the_lab_hosts(lab, tmp_path):
    """`lab launch`: `ccbench launch --launches 2` whose every job is a `lab run` at the shape asked (2 hosts x 1),
    merged into one run of two launches; each part on the lab's hosts, with its traffic file."""
    from ccbench.store.run import open_run

    ccb("lab", "set", "--delay", "500us", "--rate", "1gbit", "--no-baseline")
    ccb("lab", "launch", "-n", "2", "--ppn", "1", "--", "-C", "pingpong", "-s", "8", "--launches", "2", "--budget",
        "0.05", "--results-dir", str(tmp_path), "--no-show")
    (merged,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    run = open_run(merged)
    (row,) = run.rows
    assert row.n_launches == 2 and row.min_s >= 500e-6
    parts = sorted((merged / "parts").iterdir())
    assert len(parts) == 2 and all((p / "lab-traffic.json").is_file() for p in parts)
    assert {open_run(p).meta["lab"]["hosts"] for p in parts} == {2}


def test_down_cleans_up_after_a_crash(lab):
    from ccbench.lab import core

    state = core.load_state()
    os.kill(state["emulator"]["pid"], signal.SIGKILL)  # the emulator dies: traffic must stop, not bypass
    deadline = time.monotonic() + 5
    while core.emulator_alive(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    st = ccb("lab", "status", check=False)
    assert st.returncode == 1 and "NOT RUNNING" in st.stdout
    r = ccb("lab", "run", "--", "-C", "barrier", check=False)
    assert r.returncode == 1 and "emulator is not running" in r.stderr
    (core.state_dir() / "state.json").unlink()  # and the state file is lost as well
    removed = ccb("lab", "down").stdout
    assert "namespace ccb-h0" in removed and "namespace ccb-sw" in removed and "UTS namespace ccb-h3" in removed
    assert core.lab_namespaces() == [] and not (core.state_dir() / "uts").exists()
    # a fresh lab comes up afterwards (nothing left bound to the queues), with its shape
    ccb("lab", "up", "--hosts", "2", "--ppn", "2", "--no-baseline", "--results-dir", str(lab))
    assert "2 hosts x 2 ranks (ccb-h0, ccb-h1" in ccb("lab", "status").stdout
