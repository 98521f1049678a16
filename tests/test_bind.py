"""Binding of ranks: each launcher's syntax, the auto choice, the record in run.json and its line in `show`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.core import hardware as record
from ccbench.core.errors import UsageError
from ccbench.measure import provenance
from ccbench.measure.config import load_config
from ccbench.measure.lab import lab_command
from ccbench.measure.launcher import (
    bind_flags,
    choose_binding,
    launcher_kind,
    prepare_launcher,
    require_launched,
)
from ccbench.measure.workload_config import resolve_workload

REPO = Path(__file__).resolve().parent.parent
HYDRA = "HYDRA build details:\n    Version:                                 5.0.2\n"
OMPI4 = "mpirun (Open MPI) 4.1.6\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
OMPI5 = "mpirun (Open MPI) 5.0.7\n"


def test_launcher_kind_from_name_and_version():
    assert launcher_kind("/usr/bin/mpiexec", HYDRA) == "hydra"
    assert launcher_kind("/opt/ompi/bin/mpirun", OMPI4) == "openmpi"
    assert launcher_kind("mpiexec", "mpiexec (OpenRTE) 2.1.1\n") == "openmpi"
    assert launcher_kind("/usr/bin/srun", "slurm 23.02.7\n") == "srun"
    assert launcher_kind("/site/bin/launch", "slurm-wlm 21.08.5\n") == "srun"
    assert launcher_kind("/opt/intel/mpiexec.hydra", "Intel(R) MPI Library for Linux* OS, Version 2021.10") == "other"


@pytest.mark.parametrize("kind, version, bind, over, want", [
    ("hydra", HYDRA, "core", False, ["-bind-to", "core"]),
    ("hydra", HYDRA, "socket", False, ["-bind-to", "socket"]),
    ("hydra", HYDRA, "none", True, ["-bind-to", "none"]),
    ("openmpi", OMPI4, "core", False, ["--bind-to", "core"]),
    ("openmpi", OMPI4, "socket", False, ["--bind-to", "socket"]),
    ("openmpi", OMPI5, "socket", False, ["--bind-to", "package"]),
    ("openmpi", OMPI5, "core", True, ["--bind-to", "core:overload-allowed"]),
    ("openmpi", OMPI5, "none", True, ["--bind-to", "none"]),
    ("srun", "slurm 23.02.7", "core", False, ["--cpu-bind=cores"]),
    ("srun", "slurm 23.02.7", "socket", False, ["--cpu-bind=sockets"]),
    ("srun", "slurm 23.02.7", "none", False, ["--cpu-bind=none"]),
])
def test_each_launcher_is_told_in_its_own_syntax(kind, version, bind, over, want):
    assert bind_flags(kind, bind, version, oversubscribed=over) == want


def test_bind_flags_refuse_what_they_cannot_say():
    with pytest.raises(ValueError):
        bind_flags("other", "core")
    with pytest.raises(ValueError):
        bind_flags("hydra", "auto")


def test_auto_binds_to_core_when_the_ranks_fit_and_to_nothing_when_they_oversubscribe():
    b = choose_binding("auto", 4, "hydra", HYDRA, cores=4, nodes=1)
    assert (b.chosen, b.flags, b.why, b.ranks_per_node, b.cores) == ("core", ("-bind-to", "core"),
                                                                     "4 ranks on 4 cores", 4, 4)
    b = choose_binding("auto", 5, "hydra", HYDRA, cores=4, nodes=1)
    assert b.chosen == "none" and b.flags == ("-bind-to", "none") and "oversubscribed" in b.why
    # in a Slurm allocation of 2 nodes the ranks are spread over both: 128 ranks fit 64 cores a node
    b = choose_binding("auto", 128, "srun", cores=64, nodes=2)
    assert b.chosen == "core" and b.flags == ("--cpu-bind=cores",) and b.why == "64 ranks on 64 cores per node, 2 nodes"
    assert b.to_dict() == {"requested": "auto", "chosen": "core", "why": b.why, "flags": ["--cpu-bind=cores"],
                           "launcher": "srun", "ranks_per_node": 64, "cores": 64}


def test_a_requested_binding_is_given_even_when_ranks_share_cores():
    b = choose_binding("core", 3, "openmpi", OMPI5, cores=2, nodes=1)
    assert b.chosen == "core" and b.flags == ("--bind-to", "core:overload-allowed")
    assert b.why == "requested; 3 ranks on 2 cores: ranks share cores"
    assert choose_binding("none", 1, "hydra", cores=8, nodes=1).why == "requested"
    assert choose_binding("socket", 2, "hydra", cores=8, nodes=1).flags == ("-bind-to", "socket")


def test_the_user_s_own_launcher_binding_is_left_alone_and_not_doubled():
    b = choose_binding("auto", 2, "hydra", cores=2, nodes=1, launcher_args=["-bind-to", "numa", "-v"])
    assert b.chosen is None and b.flags == () and b.why == "left to the launcher options given: -bind-to numa"
    b = choose_binding("auto", 2, "srun", cores=2, nodes=1, launcher_args=["--mpi=pmi2", "--cpu-bind=map_cpu:0,1"])
    assert b.chosen is None and "--cpu-bind=map_cpu:0,1" in b.why
    with pytest.raises(UsageError, match="--bind core and the launcher option --bind-to both bind the ranks"):
        choose_binding("core", 2, "openmpi", cores=2, nodes=1, launcher_args=["--bind-to", "socket"])


def test_an_unknown_launcher_gets_no_binding_and_an_explicit_one_is_refused():
    b = choose_binding("auto", 2, "other", cores=2, nodes=1)
    assert b.chosen is None and b.flags == () and "does not know" in b.why
    with pytest.raises(UsageError, match="knows the binding options of MPICH's hydra, Open MPI's mpirun and srun"):
        choose_binding("core", 2, "other", cores=2, nodes=1)
    with pytest.raises(UsageError, match="choose from auto, core, socket, none"):
        choose_binding("numa", 2, "hydra", cores=2, nodes=1)


def test_prepare_launcher_adds_the_flags_and_tells_the_ranks(monkeypatch):
    monkeypatch.setenv(provenance.BIND_ENV, '{"stale": true}')  # a value from outside is never passed on
    exe, version, env, extra = prepare_launcher(None)
    assert provenance.BIND_ENV not in env and not any("bind" in x for x in extra)
    if launcher_kind(exe, version) != "hydra":
        pytest.skip("the flags checked here are hydra's")
    exe, version, env, extra = prepare_launcher(None, 1, "auto")
    assert extra[-2:] == ["-bind-to", "core"]
    record = json.loads(env[provenance.BIND_ENV])
    assert record["chosen"] == "core" and record["ranks_per_node"] == 1 and record["cores"] >= 1
    _, _, env, extra = prepare_launcher(None, 100_000, "auto")
    assert extra[-2:] == ["-bind-to", "none"] and json.loads(env[provenance.BIND_ENV])["chosen"] == "none"


def test_the_lab_s_hydra_command_carries_the_binding():
    """The lab starts one hydra proxy per lab host; the binding flags follow the host list."""
    from ccbench.lab.shape import Shape

    cmd = lab_command(Shape(2, 1), ["-C", "pingpong"], "mpiexec", "py", bind_flags=("-bind-to", "socket"))
    assert cmd[cmd.index("-hosts") + 2:][:2] == ["-bind-to", "socket"]
    assert lab_command(Shape(2, 1), [], "mpiexec", "py")[cmd.index("-hosts") + 2:][:2] == ["-bind-to", "none"]


def test_bind_is_a_config_key_of_sweeps_and_workloads():
    assert load_config(None, {}).bind == "auto" and load_config(None, {"bind": "none"}).bind == "none"
    assert load_config(None, {"bind": "core"}).to_dict()["bind"] == "core"
    with pytest.raises(UsageError, match="config key 'bind': 'numa'; choose from auto, core, socket, none"):
        load_config(None, {"bind": "numa"})
    for kind in ("ddp", "moe", "straggler"):
        assert resolve_workload(kind, {"bind": "socket"}).bind == "socket"
    with pytest.raises(UsageError, match="config key 'bind'"):
        resolve_workload("moe", {"bind": True})


def test_a_binding_needs_ccbench_to_start_the_launcher(monkeypatch):
    monkeypatch.delenv(provenance.BIND_ENV, raising=False)
    require_launched("auto", "add --launch N")
    with pytest.raises(UsageError, match="bind = core is applied by the launcher, so ccbench must start it: "
                                         "add --launch N"):
        require_launched("core", "add --launch N")
    monkeypatch.setenv(provenance.BIND_ENV, json.dumps({"requested": "core", "chosen": "core"}))
    require_launched("core", "add --launch N")


def test_bound_ranks_count_the_launcher_s_cores(monkeypatch):
    monkeypatch.delenv(provenance.BIND_ENV, raising=False)
    assert provenance.launch_binding() is None and provenance.usable_cores() == provenance.own_cores()
    monkeypatch.setenv(provenance.BIND_ENV, json.dumps({"chosen": "core", "cores": 64}))
    assert provenance.usable_cores() == 64  # a rank bound to one core still shares the launcher's 64
    monkeypatch.setenv(provenance.BIND_ENV, "not json")
    assert provenance.launch_binding() == {"error": "unreadable CCBENCH_BIND: 'not json'"}
    assert provenance.usable_cores() == provenance.own_cores()


def test_oversubscription_from_the_ranks_cpus():
    over = provenance.oversubscribed
    assert not over(["a", "a"], ["0", "1"], {"a": 1})            # pinned one per core: nothing shared
    assert over(["a", "a", "a"], ["0", "1", "0"], {"a": 8})      # two ranks bound to core 0
    assert over(["a", "a", "a"], ["0-1", "0-1", "0-1"], {"a": 2})  # unbound, 3 ranks on 2 CPUs
    assert not over(["a", "b"], ["0", "0"], {"a": 1, "b": 1})    # one rank a node
    assert over(["a", "a"], [None, None], {"a": 1}) and not over(["a", "a"], [None, "0"], {"a": 2})


def _hw(binding, cpus, hosts=None, threads=2, cores=2):
    hosts = hosts or ["n1"] * len(cpus)
    node = {"cpu": {"model": "CPU X", "sockets": 1, "cores": cores, "threads": threads}}
    out = {"nodes": {h: node for h in dict.fromkeys(hosts)},
           "ranks": [{"rank": i, "host": h, "cpus": c} for i, (h, c) in enumerate(zip(hosts, cpus, strict=True))]}
    if binding != "absent":
        out["binding"] = binding
    return out


def test_binding_summary_lines():
    auto = choose_binding("auto", 2, "hydra", cores=2, nodes=1).to_dict()
    assert record.binding_summary(_hw(auto, ["0", "1"])) == "bound to core (auto: 2 ranks on 2 cores), rank CPUs 0, 1"
    none = choose_binding("none", 2, "hydra", cores=2, nodes=1).to_dict()
    assert record.binding_summary(_hw(none, ["0-1", "0-1"])) == "unbound (bind none), all 2 ranks on CPUs 0-1"
    shared = choose_binding("core", 3, "hydra", cores=2, nodes=1).to_dict()
    assert record.binding_summary(_hw(shared, ["0", "1", "0"])) == (
        "bound to core (bind core; 3 ranks on 2 cores: ranks share cores), rank CPUs 0, 1, 0")
    assert record.binding_summary(_hw(auto, ["0", "0"], hosts=["n1", "n2"])) == (
        "bound to core (auto: 2 ranks on 2 cores), rank CPUs n1:0, n2:0")
    # asked to bind to a core, yet a rank may run on more CPUs than a core has: said so
    assert "(not applied?)" in record.binding_summary(_hw(auto, ["0-1", "0-1"], threads=2, cores=2))
    assert "(not applied?)" not in record.binding_summary(_hw(auto, ["0-1", "2-3"], threads=4, cores=2))  # SMT pairs
    own = choose_binding("auto", 2, "hydra", cores=2, nodes=1, launcher_args=["-bind-to", "numa"]).to_dict()
    assert record.binding_summary(_hw(own, ["0-1", "0-1"])).startswith(
        "binding left to the launcher options given: -bind-to numa, all 2 ranks")
    assert record.binding_summary(_hw(None, ["0", "1"])) == (
        "binding not set by ccbench (its own launcher), rank CPUs 0, 1")
    assert record.binding_summary(_hw(auto, [None, "1"])).endswith("rank CPUs unknown")


def test_many_ranks_are_summarised():
    auto = choose_binding("auto", 16, "hydra", cores=16, nodes=1).to_dict()
    line = record.binding_summary(_hw(auto, [str(i) for i in range(16)], threads=16, cores=16))
    assert line == "bound to core (auto: 16 ranks on 16 cores), 16 ranks, 1 CPU(s) each, none shared"
    line = record.binding_summary(_hw(auto, [str(i % 8) for i in range(16)], threads=16, cores=16))
    assert line.endswith("16 ranks, 1 CPU(s) each, 8 distinct sets")
    assert record.binding_summary(_hw(auto, ["0-15"] * 16, threads=16, cores=16)).endswith(
        "all 16 ranks on CPUs 0-15")


def test_the_summary_line_shows_the_binding_only_where_it_was_recorded():
    auto = choose_binding("auto", 2, "hydra", cores=2, nodes=1).to_dict()
    old = _hw("absent", ["0", "1"])
    assert record.binding_summary(old) is None and "bound" not in record.summary(old)  # runs made before: unchanged
    assert record.summary(_hw(auto, ["0", "1"])).endswith(" | bound to core (auto: 2 ranks on 2 cores), rank CPUs 0, 1")


def _ccbench(*args, env=None, timeout=240, cwd=None):
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or REPO, env={**os.environ, "COLUMNS": "250", **(env or {})})


def _vendor() -> str:
    return subprocess.run([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False; "
                           "from mpi4py import MPI; print(MPI.get_vendor()[0])"],
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("bind", ["core", "none"])
def test_launch_binds_the_ranks_records_their_cpus_and_show_says_so(tmp_path, bind):
    if _vendor() != "MPICH":
        pytest.skip("checks hydra's binding")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores to bind 2 ranks one per core")
    r = _ccbench("launch", "-n", "2", "-C", "allreduce", "-s", "8", "--min-reps", "3", "--max-reps", "5",
                 "--budget", "0.05", "--bind", bind, "--results-dir", str(tmp_path), "--no-show")
    assert r.returncode == 0, r.stderr
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    rec, ranks = meta["hardware"]["binding"], meta["hardware"]["ranks"]
    assert meta["config"]["bind"] == bind and rec["requested"] == bind and rec["chosen"] == bind
    assert rec["flags"] == ["-bind-to", bind] and rec["launcher"] == "hydra"
    cpus = [record.parse_cpu_list(x["cpus"]) for x in ranks]
    if bind == "core":
        assert all(len(c) == 1 for c in cpus) and cpus[0] != cpus[1]
    else:
        assert cpus[0] == cpus[1] == sorted(os.sched_getaffinity(0))
    assert not meta["oversubscribed"] and meta["thread_level"] == "single"  # a bound rank sees one core, not 2
    shown = _ccbench("show", str(run))
    assert shown.returncode == 0 and ("bound to core" if bind == "core" else "unbound (bind none)") in shown.stdout


def test_a_binding_under_someone_else_s_launcher_is_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != provenance.BIND_ENV}
    mpiexec = Path(sys.executable).parent / "mpiexec"
    r = subprocess.run([str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", "2", sys.executable, "-m", "mpi4py",
                        "-m", "ccbench", "run", "-C", "allreduce", "-s", "8", "--bind", "core", "--results-dir",
                        str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "ccbench: error: bind = core is applied by the launcher, so ccbench must start it: start the sweep with "
        "ccbench launch -n N (under your own launcher give it its binding option and leave bind out)"]
    assert not list(tmp_path.iterdir())
    r = _ccbench("launch", "-n", "2", "-C", "allreduce", "-s", "8", "--bind", "core", "--results-dir",
                 str(tmp_path), "--", "-bind-to", "socket")
    assert r.returncode == 2 and "both bind the ranks" in r.stderr and not list(tmp_path.iterdir())


def test_compare_names_a_different_binding_only_where_both_runs_recorded_one():
    core = choose_binding("core", 2, "hydra", cores=2, nodes=1).to_dict()
    none = choose_binding("none", 2, "hydra", cores=2, nodes=1).to_dict()
    assert record.differences(_hw(core, ["0", "1"]), _hw(none, ["0-1", "0-1"])) == [("rank binding", "core", "none")]
    assert record.differences(_hw(core, ["0", "1"]), _hw(None, ["0-1", "0-1"])) == [
        ("rank binding", "core", "not set by ccbench")]
    assert record.differences(_hw(core, ["0", "1"]), _hw(core, ["0", "1"])) == []
    assert record.differences(_hw(core, ["0", "1"]), _hw("absent", ["0", "1"])) == []  # a run made before says nothing
