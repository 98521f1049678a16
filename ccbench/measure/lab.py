"""Run a ccbench sweep on the lab: one rank per host namespace, every byte over the emulated links.

The launcher is hydra's ``mpiexec -launcher fork`` with one MPMD section per host,
``-n 1 ip netns exec ccb-hI python -m mpi4py -m ccbench run ...``.  The environment makes
MPICH use the network even though every namespace has the same hostname:
``MPIR_CVAR_NOLOCAL=1`` (no shared memory between "local" ranks),
``MPIR_CVAR_CH4_NETMOD=ofi`` with ``FI_PROVIDER=tcp`` (the PyPI wheel's default UCX netmod
uses shared memory regardless) and ``FI_TCP_IFACE`` = the host's lab interface.
``CCBENCH_LAB`` carries the injected parameters into the run's provenance.  Interface
counters and the emulator's counters before and after prove the traffic crossed the links;
they are written beside the run as ``lab-traffic.json``.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.lab import core
from ccbench.store.results import free_path

__all__ = ["LAB_ENV", "SWEEP_ARGS", "interface_counters", "lab_block", "lab_command", "measure_baseline", "run_on_lab"]

#: The environment every rank gets (see the module docstring for why).
LAB_ENV = {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp",
           "FI_TCP_IFACE": core.HOST_IF}


def _mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    import shutil

    found = shutil.which("mpiexec")
    if not found:
        raise CCBenchError("no mpiexec found: the lab uses MPICH's hydra (pip install 'ccbench[mpich]')")
    return found


def lab_command(nranks: int, run_args: list[str], mpiexec: str = "mpiexec",
                python: str = sys.executable, bind_flags=()) -> list[str]:
    """The MPMD hydra command: one section per host namespace, each one rank (bound by `bind_flags`)."""
    cmd = [mpiexec, "-launcher", "fork", *bind_flags]
    for i in range(nranks):
        if i:
            cmd.append(":")
        cmd += ["-n", "1", "ip", "netns", "exec", core.host_ns(i), python, "-m", "mpi4py", "-m", "ccbench", "run",
                *run_args]
    return cmd


def lab_block(state: dict, nranks: int, role: str = "measurement") -> dict:
    """The ``lab`` block of a run's provenance: what was injected, by what, the baseline."""
    base = state.get("baseline")
    return {"hosts": nranks, "lab_hosts": state["hosts"], "role": role, "delay_s": state["delay_s"],
            "rate_bps": state["rate_bps"], "emulator": (state.get("emulator") or {}).get("kind"),
            "emulator_priority": (state.get("emulator") or {}).get("priority"),
            "shaper_choice": state.get("shaper_choice"), "subnet": state["subnet"],
            "namespaces": state["namespaces"][:nranks],
            "baseline": None if base is None or role == "baseline" else base, "env": LAB_ENV}


def interface_counters(nranks: int) -> dict:
    """rx/tx bytes and packets of each host's lab interface (``ip -s -j link``)."""
    out = {}
    for i in range(nranks):
        r = subprocess.run(["ip", "-n", core.host_ns(i), "-s", "-j", "link", "show", "dev", core.HOST_IF],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise CCBenchError(f"cannot read the counters of {core.host_ns(i)}: {r.stderr.strip()}")
        s = json.loads(r.stdout)[0]["stats64"]
        out[core.host_ns(i)] = {"rx_bytes": s["rx"]["bytes"], "rx_packets": s["rx"]["packets"],
                                "tx_bytes": s["tx"]["bytes"], "tx_packets": s["tx"]["packets"]}
    return out


def _emulator_counts(state: dict) -> dict:
    if (state.get("emulator") or {}).get("kind") == core.NETEM_NAME:
        return {"links": core.netem_counters(state), "lateness_counts": None, "written_at": math.inf, "pid": None}
    s = core.read_stats() or {}
    return {"links": s.get("links", {}), "lateness_counts": s.get("lateness_counts"),
            "written_at": s.get("written_at", 0.0), "pid": s.get("pid")}


def _fresh_emulator_counts(state: dict, after: float, timeout_s: float = 3.0) -> dict:
    """The emulator's counters written after `after` (it writes them about once a second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        c = _emulator_counts(state)
        if c["written_at"] > after or time.monotonic() > deadline:
            return c
        time.sleep(0.05)


def _traffic(nranks: int, before: dict, after: dict, emu0: dict, emu1: dict) -> dict:
    links = {}
    for ns in before:
        d = {k: after[ns][k] - before[ns][k] for k in before[ns]}
        e0, e1 = emu0["links"].get(ns, {}), emu1["links"].get(ns, {})
        d["emulated_packets"] = e1.get("released", 0) - e0.get("released", 0)
        d["emulated_bytes"] = e1.get("bytes", 0) - e0.get("bytes", 0)
        links[ns] = d
    lat0, lat1 = emu0.get("lateness_counts") or [], emu1.get("lateness_counts") or []
    lateness = [b - a for a, b in zip(lat0, lat1, strict=False)] if lat0 and lat1 else None
    crossed = all(v["rx_bytes"] > 0 and v["emulated_packets"] > 0 for v in links.values())
    return {"links": links, "emulator_lateness_counts": lateness,
            "emulator_lateness_edges_s": (core.read_stats() or {}).get("lateness_edges_s"),
            "same_emulator": emu0.get("pid") == emu1.get("pid"), "crossed_links": crossed}


def _new_dirs(root: Path, before: set) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and d not in before)


def _results_root(run_args: list[str]) -> Path:
    for i, a in enumerate(run_args):
        if a == "--results-dir" and i + 1 < len(run_args):
            return Path(run_args[i + 1])
        if a.startswith("--results-dir="):
            return Path(a.split("=", 1)[1])
    return Path("results")


def run_on_lab(run_args: list[str], nranks: int | None = None, role: str = "measurement",
               quiet: bool = False, bind: str = "auto") -> tuple[int, Path | None, dict]:
    """Run ``ccbench run RUN_ARGS`` with one rank on each of the first `nranks` hosts, bound as `bind` says
    (``ccbench.measure.launcher.choose_binding``: the namespaces share this machine's cores).

    Returns (exit code, run directory or None, traffic).  Refuses when the lab is down or
    its emulator is dead (traffic would stop: the queues fail closed).
    """
    state = core.load_state()
    if state is None or state.get("status") != "up":
        raise CCBenchError("no lab is up: start one with `ccbench lab up --hosts N --delay 500us --rate 1gbit`")
    if not core.emulator_alive(state):
        raise CCBenchError("the lab's link emulator is not running (traffic is blocked): "
                           "`ccbench lab down` and `ccbench lab up` again")
    n = state["hosts"] if nranks is None else nranks
    if not 2 <= n <= state["hosts"]:
        raise UsageError(f"-n must be between 2 and the lab's {state['hosts']} hosts, got {n}")
    if any(a in ("--resume",) or a.startswith("--resume=") for a in run_args):
        raise UsageError("--resume is not supported on the lab; start a new run")
    from ccbench.measure.launcher import choose_binding, run_job
    from ccbench.measure.provenance import BIND_ENV

    binding = choose_binding(bind, n, "hydra")
    env = dict(os.environ, **LAB_ENV, CCBENCH_LAB=json.dumps(lab_block(state, n, role)),
               **{BIND_ENV: json.dumps(binding.to_dict())})
    root = _results_root(run_args)
    existing = set(root.iterdir()) if root.is_dir() else set()
    before, emu0 = interface_counters(n), _emulator_counts(state)
    job = run_job(lab_command(n, run_args, _mpiexec(), bind_flags=binding.flags), env,
                  stdout=subprocess.DEVNULL if quiet else None)
    code = job.code
    ended = time.time()
    after = interface_counters(n)
    traffic = _traffic(n, before, after, emu0, _fresh_emulator_counts(state, ended))
    run_dir = job.run_dir
    if run_dir is None:
        new = _new_dirs(root, existing)
        run_dir = new[-1] if len(new) == 1 else None
    if run_dir is not None and run_dir.is_dir():
        with open(free_path(run_dir, "lab-traffic", ".json"), "x") as f:
            json.dump(dict(traffic, lab=lab_block(state, n, role)), f, indent=1)
            f.write("\n")
    return code, run_dir, traffic


#: The ping-pong sweep of the baseline (and of the recovery check): up to 4 MiB, about 0.3 s
#: per size (shorter budgets or a 1 MiB maximum biased the bandwidth estimate by ~12%); the
#: tight RSE target makes every size use its budget, and at most 100 samples per size keep
#: the minimum comparable between the zero-delay baseline (which would otherwise take 1000
#: samples of a small size, and a lower minimum: 0-10 us lower here) and a run at 2 ms
#: (~70 samples in 0.3 s).
SWEEP_ARGS = ["-C", "pingpong", "-s", "8:4M:2", "--budget", "0.3", "--warmup", "2", "--min-reps", "30",
              "--max-reps", "100", "--target-rse", "0.002"]


def measure_baseline(fit, results_dir: str = "results") -> dict:
    """Measure the software's own one-way cost: a ping-pong sweep with the delay set to 0.

    The emulator is restarted at zero delay (same rate), the sweep runs between hosts 0
    and 1 (a run of its own, tagged ``lab-baseline``), the emulator is restarted with the
    lab's delay, and the alpha fitted by `fit` (rows as dicts -> {"alpha_s", "alpha_ci_s",
    "rate_bps", "statistic"}; the caller passes ``ccbench.analysis.lab_check.baseline_fit``)
    is stored in the lab's state as its baseline.
    """
    from ccbench.store.run import open_run

    state = core.load_state()
    if state is None or state.get("status") != "up":
        raise CCBenchError("no lab is up")
    delay, rate = state["delay_s"], state["rate_bps"]
    core.restart_emulator(state, 0.0, rate)
    try:
        code, run_dir, traffic = run_on_lab([*SWEEP_ARGS, "--no-show", "--results-dir", results_dir,
                                             "--tag", "lab-baseline"], nranks=2, role="baseline", quiet=True)
    finally:
        state = core.load_state()
        core.restart_emulator(state, delay, rate)
    if code or run_dir is None:
        raise CCBenchError(f"the zero-delay baseline run failed (exit code {code})")
    if not traffic["crossed_links"]:
        raise CCBenchError(f"the baseline run's traffic did not cross the emulated links: {traffic['links']}")
    rows = open_run(run_dir, kinds=("sweep",), what="the lab's baseline").rows
    fitted = fit([r.to_dict() for r in rows])
    state["baseline"] = {"alpha_s": fitted["alpha_s"], "alpha_ci_s": fitted["alpha_ci_s"], "rate_bps": rate,
                         "fitted_rate_bps": fitted["rate_bps"], "statistic": fitted["statistic"],
                         "run": str(run_dir), "sweep": " ".join(SWEEP_ARGS)}
    core.save_state(state)
    return state["baseline"]
