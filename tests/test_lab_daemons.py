"""Daemons on the lab, without root: the slurm.conf a lab gets, the tasks' environment, stopping recorded daemons.

The lab's root tier (tests/lab/test_lab_slurm.py) starts Slurm across a real lab.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ccbench.core.errors import CCBenchError
from ccbench.lab import core, slurm

REPO = Path(__file__).resolve().parents[1]
STATE = {"hosts": 3, "ppn": 2, "namespaces": ["ccb-h0", "ccb-h1", "ccb-h2"],
         "addresses": ["10.251.77.1", "10.251.77.2", "10.251.77.3"]}


def test_slurm_conf_has_a_node_per_host_at_its_lab_address():
    lines = slurm.conf_text(STATE, Path("/lab/daemons"), 4242).splitlines()
    assert [x for x in lines if x.startswith("NodeName=")] == [
        "NodeName=ccb-h0 NodeAddr=10.251.77.1 CPUs=2 State=UNKNOWN",
        "NodeName=ccb-h1 NodeAddr=10.251.77.2 CPUs=2 State=UNKNOWN",
        "NodeName=ccb-h2 NodeAddr=10.251.77.3 CPUs=2 State=UNKNOWN"]
    for want in ("SlurmctldHost=ccb-h0(10.251.77.1)", "MpiDefault=pmi2", "FirstJobId=4242",
                 "AuthInfo=socket=/lab/daemons/munge/socket", "TaskProlog=/lab/daemons/task-prolog",
                 "SlurmdSpoolDir=/lab/daemons/slurmd-%n", "SlurmdParameters=config_overrides",
                 "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP"):
        assert want in lines
    assert "CPUs=1" in slurm.conf_text(dict(STATE, ppn=None), Path("/d"), 1)  # a lab made before --ppn


def test_the_tasks_environment_is_one_export_per_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CCBENCH_LAB_DIR", str(tmp_path))
    core.daemon_dir().mkdir()
    path = slurm.write_task_env({"FI_PROVIDER": "tcp", "CCBENCH_LAB": '{"delay_s": 0.001, "order": null}'})
    assert path.read_text() == 'export FI_PROVIDER=tcp\nexport CCBENCH_LAB={"delay_s": 0.001, "order": null}\n'
    for bad in ({"A": "one\ntwo"}, {"NOT A NAME": "x"}):
        with pytest.raises(CCBenchError, match="one-line value"):
            slurm.write_task_env(bad)
    assert path.read_text().startswith("export FI_PROVIDER=tcp\n")  # refused: the file stays as it was


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_stop_daemons_stops_the_recorded_ones_and_nothing_else():
    ours, other = _sleeper(), _sleeper()
    try:
        records = [{"name": "sleep", "pid": ours.pid, "host": "ccb-h1"},
                   {"name": "slurmd", "pid": other.pid, "host": "ccb-h0"},  # its pid now runs another program
                   {"name": "sleep", "pid": 2**22 + 7}]  # long gone
        assert [core.daemon_alive(r) for r in records] == [True, False, False]
        assert core.stop_daemons(records) == [f"sleep on ccb-h1 (pid {ours.pid})"]
        assert ours.wait(timeout=5) == -15  # SIGTERM
        assert other.poll() is None
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()


def test_stop_daemons_kills_what_ignores_sigterm():
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print(flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    try:
        stubborn.stdout.readline()  # SIGTERM is ignored from here on
        name = Path(sys.executable).name
        t0 = time.monotonic()
        assert core.stop_daemons([{"name": name, "pid": stubborn.pid}], timeout_s=0.5) == [
            f"{name} (pid {stubborn.pid})"]
        assert stubborn.wait(timeout=5) == -9 and time.monotonic() - t0 < 5
    finally:
        stubborn.kill()
        stubborn.wait()


def test_lab_slurm_refuses_without_a_lab(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "lab", "slurm", "sinfo"], capture_output=True, text=True,
                       timeout=60, cwd=REPO, env=dict(os.environ, CCBENCH_LAB_DIR=str(tmp_path / "lab")))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "ccbench: error: no lab is up: `ccbench lab up --hosts N --ppn R --slurm` first"]
    assert not (tmp_path / "lab").exists()
