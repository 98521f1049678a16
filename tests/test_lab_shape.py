"""The lab's shape, pure: hosts x ranks per host, its options, the launcher's arguments, the binding, the node map.

No root, no MPI: the lab's root tier (tests/lab/) runs the same shapes for real.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.core.errors import UsageError
from ccbench.lab import hostexec
from ccbench.lab.link import link_params
from ccbench.lab.shape import (
    MAX_RANKS_PER_CORE,
    RANK_MEMORY_BYTES,
    Shape,
    capacity,
    check_fits,
    check_ppn_divides,
    resolve,
)
from ccbench.measure.provenance import node_map, rank_order

REPO = Path(__file__).resolve().parents[1]
GIB = 1 << 30

# ------------------------------------------------------------------ shapes


def test_block_and_cyclic_place_ranks_as_hydra_does():
    assert Shape(2, 2).host_of_rank() == [0, 0, 1, 1]
    assert Shape(2, 2, "cyclic").host_of_rank() == [0, 1, 0, 1]
    assert Shape(3, 1).host_of_rank() == [0, 1, 2] == Shape(3, 1, "cyclic").host_of_rank()
    names = ["ccb-h0", "ccb-h1", "ccb-h2"]
    assert Shape(2, 2).hydra_hosts(names) == "ccb-h0:2,ccb-h1:2"  # host:R takes R consecutive ranks
    assert Shape(3, 2, "cyclic").hydra_hosts(names) == "ccb-h0:1,ccb-h1:1,ccb-h2:1"  # round robin past the list
    assert Shape(2, 2).ranks == 4 and Shape(2, 2).describe() == "2 hosts x 2 ranks"
    assert Shape(4, 1).describe() == "4 hosts x 1 rank"


@pytest.mark.parametrize("nranks,ppn,lab_hosts,lab_ppn,want", [
    (None, None, 4, 1, (4, 1)),      # every host, the lab's ppn
    (None, None, 2, 2, (2, 2)),
    (2, None, 4, 1, (2, 1)),         # -n alone keeps meaning "hosts" at one rank per host
    (4, 2, 4, 1, (2, 2)),            # --ppn overrides the lab's
    (None, 2, 3, 1, (3, 2)),
    (8, 4, 2, 1, (2, 4)),
])
def test_resolve(nranks, ppn, lab_hosts, lab_ppn, want):
    s = resolve(nranks, ppn, lab_hosts, lab_ppn)
    assert (s.hosts, s.ppn) == want


@pytest.mark.parametrize("nranks,ppn,lab_hosts,match", [
    (4, 3, 4, "--ppn 3 does not divide -n 4: every host gets 3 ranks, so give -n 3 or 6"),
    (5, 2, 4, "--ppn 2 does not divide -n 5"),
    (1, 2, 4, "give -n 2 "),
    (2, 2, 4, "-n 2 at --ppn 2 needs 1 host: a lab run uses 2 to the lab's 4 hosts, so give -n between 4 and 8 in "
              "steps of 2"),
    (6, 2, 2, "needs 3 hosts: a lab run uses 2 to the lab's 2 hosts, so give -n 4$"),
    (4, 0, 4, "--ppn must be at least 1"),
])
def test_resolve_refuses_shapes_the_lab_cannot_lay_out(nranks, ppn, lab_hosts, match):
    with pytest.raises(UsageError, match=match.replace("(", r"\(").replace(")", r"\)")):
        resolve(nranks, ppn, lab_hosts, 1)
    if ppn and nranks % ppn:
        with pytest.raises(UsageError, match="does not divide"):
            check_ppn_divides(nranks, ppn)


def test_resolve_refuses_an_unknown_order():
    with pytest.raises(UsageError, match="--order 'random'"):
        resolve(4, 2, 2, 1, "random")


def test_capacity_counts_cores_and_memory():
    assert capacity(2, 20 * GIB) == (2 * MAX_RANKS_PER_CORE, "2 usable cores x 4 ranks per core; the free memory "
                                                             "would hold 80")
    most, why = capacity(64, 4 * GIB)  # memory is the limit
    assert most == 4 * GIB // RANK_MEMORY_BYTES == 16 and why.startswith("4.0 GiB free memory at 256 MiB a rank")
    assert capacity(2, None) == (8, "2 usable cores x 4 ranks per core")


def test_check_fits_says_what_fits():
    check_fits(2, 2, cores=2, free_memory_bytes=20 * GIB)  # the test shape: 4 ranks on 2 cores, on purpose
    check_fits(4, 2, cores=2, free_memory_bytes=20 * GIB)  # 8 ranks: the most 2 cores take
    with pytest.raises(UsageError) as e:
        check_fits(8, 4, cores=2, free_memory_bytes=20 * GIB)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("a lab of 8 hosts x 4 ranks (32 ranks) is more than this machine holds: at most 8 ranks "
                          "(2 usable cores x 4 ranks per core")
    assert msg.endswith("what fits: --hosts 2 --ppn 4 or --hosts 8 --ppn 1")
    with pytest.raises(UsageError, match="what fits: --hosts 2 --ppn 3 or --hosts 3 --ppn 2$"):
        check_fits(3, 3, cores=2, free_memory_bytes=None)
    with pytest.raises(UsageError, match="--hosts must be between 2 and 64"):
        check_fits(65, 1, cores=1024, free_memory_bytes=None)
    tight = r"a lab of 2 hosts x 1 rank \(2 ranks\) .* at most 1 rank \(0.3 GiB free memory .*not even 2 hosts of 1"
    with pytest.raises(UsageError, match=tight):
        check_fits(2, 1, cores=8, free_memory_bytes=300 << 20)


# ------------------------------------------------------------------ the command line: bad input, nothing written

def _ccbench(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env=dict(os.environ, COLUMNS="200", **(env or {})))


def test_lab_run_refuses_a_ppn_that_does_not_divide_the_ranks(tmp_path):
    results = tmp_path / "results"
    r = _ccbench("lab", "run", "-n", "4", "--ppn", "3", "--", "-C", "barrier", "--results-dir", str(results),
                 env={"CCBENCH_LAB_DIR": str(tmp_path / "lab")})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["ccbench: error: --ppn 3 does not divide -n 4: every host gets 3 ranks, "
                                             "so give -n 3 or 6 (or a --ppn that divides 4)"]
    assert not results.exists() and not (tmp_path / "lab").exists()


def test_lab_up_refuses_a_shape_larger_than_the_machine(tmp_path):
    lab_dir = tmp_path / "lab"
    r = _ccbench("lab", "up", "--hosts", "64", "--ppn", "64", "--results-dir", str(tmp_path / "results"),
                 env={"CCBENCH_LAB_DIR": str(lab_dir)})
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("ccbench: error: a lab of 64 hosts x 64 ranks (4096 ranks) is more than this machine "
                           "holds: at most ") and "what fits: --hosts " in line
    assert not lab_dir.exists() and not (tmp_path / "results").exists()


def test_lab_set_refuses_a_host_without_a_link(tmp_path):
    r = _ccbench("lab", "set", "--host", "1", env={"CCBENCH_LAB_DIR": str(tmp_path / "lab")})
    assert r.returncode == 2 and "--host needs --delay or --rate" in r.stderr


# ------------------------------------------------------------------ the launcher hydra runs for each host

def test_hostexec_parses_what_hydra_passes():
    # rsh: HOST "PROXY" ARGS; ssh adds -x first; the proxy's path comes quoted for a remote shell
    assert hostexec.parse(["ccb-h1", '"/venv/bin/hydra_pmi_proxy"', "--control-port", "10.251.77.1:4242",
                           "--proxy-id", "1"]) == ("ccb-h1", ["/venv/bin/hydra_pmi_proxy", "--control-port",
                                                              "10.251.77.1:4242", "--proxy-id", "1"])
    assert hostexec.parse(["-x", "root@ccb-h0", "/bin/true"]) == ("ccb-h0", ["/bin/true"])
    for bad in (["ccb-h1"], [], ["otherhost", "/bin/true"], ["ccb-sw", "/bin/true"]):
        with pytest.raises(ValueError):
            hostexec.parse(bad)


def test_hostexec_says_why_it_cannot_enter(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CCBENCH_LAB_DIR", str(tmp_path))
    assert hostexec.main(["ccb-h63", "/bin/true"]) == 127
    err = capsys.readouterr().err
    assert err.startswith("ccbench lab launcher: ") and "is the lab up" in err


# ------------------------------------------------------------------ links per host, the binding, the lab block

STATE = {"hosts": 3, "delay_s": 1e-3, "rate_bps": 1e9, "namespaces": ["ccb-h0", "ccb-h1", "ccb-h2"],
         "hostnames": ["ccb-h0", "ccb-h1", "ccb-h2"], "subnet": "10.251.77.0/24", "ppn": 2,
         "links": {"ccb-h2": {"delay_s": 3e-3, "rate_bps": 1e8}}, "emulator": {"kind": "k", "priority": "p"},
         "baseline": {"alpha_s": 5e-5}}


def test_link_params_per_host():
    assert link_params(STATE, "ccb-h0") == (1e-3, 1e9)
    assert link_params(STATE, "ccb-h2") == (3e-3, 1e8)


def test_lab_block_records_shape_and_links():
    from ccbench.measure.lab import lab_block

    two = lab_block(STATE, Shape(2, 2, "cyclic"))
    assert (two["hosts"], two["ppn"], two["ranks"], two["order"], two["machine_ranks"]) == (2, 2, 4, "cyclic", 4)
    assert two["host_of_rank"] == [0, 1, 0, 1] and two["hostnames"] == ["ccb-h0", "ccb-h1"]
    assert two["delay_s"] == 1e-3 and two["rate_bps"] == 1e9  # the two hosts used share the lab's links
    assert set(two["links"]) == {"ccb-h0", "ccb-h1"} and two["baseline"] == {"alpha_s": 5e-5}
    three = lab_block(STATE, Shape(3, 1))
    assert three["links"]["ccb-h2"] == {"delay_s": 3e-3, "rate_bps": 1e8}
    assert three["delay_s"] is None and three["rate_bps"] is None  # no one injected value to fit against
    assert lab_block(STATE, Shape(2, 1), role="baseline")["baseline"] is None


PAIRED = dict(STATE, pairs={"ccb-h0,ccb-h2": {"delay_s": 5e-3, "rate_bps": 3e8}})


def test_a_pair_with_a_link_of_its_own_replaces_the_hosts_links_between_them():
    from ccbench.lab.link import host_queues, pair_links

    # both directions of the pair take its link; other traffic to those hosts keeps the host's ingress
    assert link_params(PAIRED, "ccb-h2", "ccb-h0") == link_params(PAIRED, "ccb-h0", "ccb-h2") == (5e-3, 3e8)
    assert link_params(PAIRED, "ccb-h2", "ccb-h1") == (3e-3, 1e8) and link_params(PAIRED, "ccb-h0", "ccb-h1") == \
        (1e-3, 1e9)
    # its packets have a queue of their own in each host, matched before the host's queue for every other packet
    assert host_queues(PAIRED, "ccb-h0") == [(3, "ccb-h2"), (0, None)]
    assert host_queues(PAIRED, "ccb-h2") == [(1, "ccb-h0"), (0, None)]
    assert host_queues(PAIRED, "ccb-h1") == [(0, None)] and host_queues(STATE, "ccb-h0") == [(0, None)]
    assert pair_links(PAIRED, ["ccb-h2", "ccb-h0"]) == {"ccb-h2,ccb-h0": {"delay_s": 5e-3, "rate_bps": 3e8}}
    assert pair_links(PAIRED, ["ccb-h0", "ccb-h1"]) == {}


def test_lab_block_records_the_pairs_links_among_the_hosts_used():
    from ccbench.measure.lab import lab_block

    same = dict(PAIRED, links={}, pairs={"ccb-h0,ccb-h1": {"delay_s": 1e-3, "rate_bps": 1e9}})
    two = lab_block(same, Shape(2, 1))
    assert two["pairs"] == {"ccb-h0,ccb-h1": {"delay_s": 1e-3, "rate_bps": 1e9}} and two["delay_s"] == 1e-3
    slow = lab_block(dict(same, pairs={"ccb-h1,ccb-h0": {"delay_s": 4e-3, "rate_bps": 1e9}}), Shape(2, 1))
    assert slow["pairs"] == {"ccb-h0,ccb-h1": {"delay_s": 4e-3, "rate_bps": 1e9}}
    assert slow["delay_s"] is None and slow["rate_bps"] == 1e9  # two delays on the hosts used: none to fit against
    assert lab_block(PAIRED, Shape(2, 1))["pairs"] == {}  # the pair's hosts 0 and 2 are not both used


@pytest.mark.parametrize("pair,line", [
    ("1,1", "--pair 1,1: a pair is two different hosts (a host's own link is --host 1)"),
    ("0,7", "--pair 0,7: the lab's hosts are 0 to 2"),
    ("0-1", "--pair '0-1': expected two host numbers, e.g. --pair 0,1"),
    ("0,1,2", "--pair '0,1,2': expected two host numbers, e.g. --pair 0,1"),
])
def test_lab_set_refuses_a_bad_pair_and_changes_nothing(tmp_path, pair, line):
    lab_dir = tmp_path / "lab"
    lab_dir.mkdir()
    state = lab_dir / "state.json"
    state.write_text(json.dumps(dict(STATE, status="up", emulator={"pid": None, "kind": "userspace"})))
    before = state.read_text()
    r = _ccbench("lab", "set", "--pair", "0,2", "--pair", pair, "--delay", "3ms",
                 env={"CCBENCH_LAB_DIR": str(lab_dir)})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"ccbench: error: {line}"]
    assert state.read_text() == before and sorted(p.name for p in lab_dir.iterdir()) == ["state.json"]


@pytest.mark.parametrize("bind,shape,cores,chosen,cpus", [
    ("auto", Shape(2, 1), [0, 1], "core", {"ccb-h0": [0], "ccb-h1": [1]}),  # one core each: as before
    ("auto", Shape(2, 2), [0, 1], "none", {}),  # 4 ranks on 2 cores: nobody pinned
    ("auto", Shape(2, 2), [0, 1, 2, 3], "host", {"ccb-h0": [0, 1], "ccb-h1": [2, 3]}),
    ("core", Shape(2, 2), [4, 5], "host", {"ccb-h0": [4, 5], "ccb-h1": [4, 5]}),
    ("none", Shape(2, 1), [0, 1], "none", {}),
    ("socket", Shape(2, 1), [0, 1], "socket", {}),
])
def test_lab_binding_gives_each_host_its_own_cores(bind, shape, cores, chosen, cpus):
    from ccbench.measure.lab import lab_binding

    binding, got = lab_binding(bind, shape, cores)
    assert binding.chosen == chosen and got == cpus
    assert binding.flags == (("-bind-to", "socket") if bind == "socket" else ("-bind-to", "none"))
    assert binding.ranks_per_node == shape.ranks and binding.cores == len(cores)  # every host shares the machine
    with pytest.raises(UsageError, match="--bind 'tight'"):
        lab_binding("tight", shape, cores)


# ------------------------------------------------------------------ the node map (provenance's topology record)

def test_node_map_block():
    t = node_map([0, 0, 2, 2], [0, 1, 0, 1], ["ccb-h0", "ccb-h0", "ccb-h1", "ccb-h1"], ["m", "m", "m", "m"])
    assert t["nodes"] == 2 and t["ranks_per_node"] == [2, 2] and t["node_names"] == ["ccb-h0", "ccb-h1"]
    assert t["node_of_rank"] == [0, 0, 1, 1] and t["local_rank"] == [0, 1, 0, 1]
    assert t["ranks_of_node"] == [[0, 1], [2, 3]] and t["order"] == "block" and t["hostnames_agree"]
    assert t["machines"] == 1 and t["machine_of_rank"] == [0, 0, 0, 0]
    assert t["source"] == "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)"
    json.dumps(t)  # stored in run.json as it is


def test_node_map_cyclic_and_irregular():
    t = node_map([0, 1, 0, 1], [0, 0, 1, 1], ["a", "b", "a", "b"])
    assert t["node_of_rank"] == [0, 1, 0, 1] and t["ranks_of_node"] == [[0, 2], [1, 3]] and t["order"] == "cyclic"
    assert "machines" not in t
    assert node_map([0, 1, 1, 0], [0, 0, 1, 1], ["a", "b", "b", "a"])["order"] == "irregular"
    assert rank_order([0]) == rank_order([0, 1, 2]) == rank_order([0, 0, 0]) == "block"


def test_node_map_says_when_hostnames_disagree_with_the_library():
    # the old lab: one hostname, every rank its own node (MPIR_CVAR_NOLOCAL); or two nodes sharing a name
    t = node_map([0, 1], [0, 0], ["vm", "vm"])
    assert t["nodes"] == 2 and t["node_names"] == ["vm", "vm"] and not t["hostnames_agree"]
    t = node_map([0, 0], [0, 1], ["x", "y"])
    assert t["nodes"] == 1 and t["node_names"] == ["x+y"] and not t["hostnames_agree"]


@pytest.mark.parametrize("leaders,local,hosts", [
    ([0, 0], [0], ["a", "a"]),        # lengths differ
    ([1, 1], [0, 1], ["a", "a"]),     # a leader after its rank
    ([0, 0, 1], [0, 1, 0], ["a"] * 3),  # rank 1 is no leader
    ([0, 0], [0, 0], ["a", "a"]),     # node-local ranks not 0..k-1
])
def test_node_map_refuses_inconsistent_reports(leaders, local, hosts):
    with pytest.raises(ValueError, match="node map"):
        node_map(leaders, local, hosts)


def test_older_runs_without_a_node_map_still_load():
    from ccbench.store.run import open_run

    run = open_run(REPO / "tests" / "data" / "run-np2")
    assert "topology" not in run.meta and run.meta["nodes"] == 1 and run.rows


# ------------------------------------------------------------------ the thread level of an oversubscribed lab

def test_auto_thread_level_counts_every_lab_hosts_ranks(monkeypatch):
    from ccbench.measure.provenance import BIND_ENV, choose_thread_level

    monkeypatch.setenv("MPI_LOCALNRANKS", "2")  # hydra: 2 ranks on this proxy, i.e. this lab host
    monkeypatch.setenv(BIND_ENV, json.dumps({"chosen": "none", "cores": 2}))
    monkeypatch.delenv("CCBENCH_LAB", raising=False)
    assert choose_thread_level("auto")[0] == "single"  # 2 ranks, 2 cores: as far as the proxy knows
    monkeypatch.setenv("CCBENCH_LAB", json.dumps({"machine_ranks": 4}))  # but 2 hosts x 2 share the 2 cores
    level, why = choose_thread_level("auto")
    assert level == "multiple" and why == ("4 ranks (every lab host's, all on this machine) on 2 cores "
                                           "(oversubscribed: single busy-polls)")
    monkeypatch.setenv("CCBENCH_LAB", json.dumps({"machine_ranks": 2}))
    assert choose_thread_level("auto")[0] == "single"
    assert choose_thread_level("single") == ("single", "requested")


def test_show_draws_the_node_map_of_a_run_on_several_nodes():
    """Two lab hosts of two ranks each, block or cyclic: show's header names each node's ranks and the order; one
    node says nothing more; hostnames that disagree with the library's map are named."""
    from ccbench.present.views import topology_line

    block = {"topology": {"node_names": ["ccb-h0", "ccb-h1"], "ranks_of_node": [[0, 1], [2, 3]], "order": "block",
                          "hostnames_agree": True}}
    assert topology_line(block) == ("node map (the MPI library's shared-memory split): ccb-h0: ranks 0-1; "
                                    "ccb-h1: ranks 2-3 (block order)")
    cyclic = {"topology": {"node_names": ["a", "b"], "ranks_of_node": [[0, 2, 4], [1, 3, 5]], "order": "cyclic"}}
    assert "a: ranks 0, 2, 4; b: ranks 1, 3, 5 (cyclic order)" in topology_line(cyclic)
    assert topology_line({"topology": {"node_names": ["vm"], "ranks_of_node": [[0, 1]]}}) == ""
    assert topology_line({}) == ""
    odd = {"topology": {"node_names": ["vm"], "ranks_of_node": [[0, 1]], "hostnames_agree": False}}
    assert "the hostnames do not say the same" in topology_line(odd)
