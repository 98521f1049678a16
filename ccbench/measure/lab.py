"""Run a ccbench sweep on the lab: hosts x ranks per host, shared memory inside a host, emulated links between.

The launcher is hydra with one proxy per lab host, each started inside its host's network
and UTS namespaces (`ccbench.lab.hostexec`)::

    ip netns exec ccb-h0 mpiexec -launcher rsh -launcher-exec STATE/hydra-launcher
        -localhost 10.251.77.1 -hosts ccb-h0:R,ccb-h1:R,... -bind-to none
        -n N python -m mpi4py -m ccbench run ...

mpiexec itself runs in host 0's network namespace (the proxies connect back to it over the
lab's network: ``-localhost`` is the address they are given), and
``HYDRA_LAUNCHER_AUTOFORK=0`` keeps hydra from forking a proxy it takes for local instead of
using the launcher.  MPICH's node map is hydra's process mapping, one node per proxy, so the
ranks of one host share memory and the ranks of different hosts talk over the host's
interface: ``MPIR_CVAR_CH4_NETMOD=ofi`` with ``FI_PROVIDER=tcp`` (the PyPI wheel's default UCX
netmod finds the other hosts' ranks on the same kernel and uses shared memory) and
``FI_TCP_IFACE`` = the lab interface.  (Before each host had its own hostname and proxy, one
rank per namespace ran under one proxy with ``MPIR_CVAR_NOLOCAL=1``; no longer needed.)

``CCBENCH_LAB`` carries the shape and the injected parameters into the run's provenance.
Interface counters and the emulator's counters before and after prove the traffic crossed
the links; they are written beside the run as ``lab-traffic.json``.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from ccbench.core.choices import BINDINGS
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.lab import core
from ccbench.lab.hostexec import CPUS_ENV
from ccbench.lab.link import link_params, pair_links
from ccbench.lab.shape import Shape, check_fits, check_ppn_divides, resolve
from ccbench.store.derived import write_new_set

__all__ = ["LAB_ENV", "LAUNCH_ENV", "SWEEP_ARGS", "interface_counters", "lab_binding", "lab_block", "lab_command",
           "lab_job", "lab_state", "measure_baseline", "run_on_lab"]

#: The environment of mpiexec and every rank (see the module docstring for why).
LAB_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": core.HOST_IF,
           "HYDRA_LAUNCHER_AUTOFORK": "0"}
#: How ``ccbench lab launch`` tells the launcher of its jobs (`lab_job`) their ranks per host, order and binding.
LAUNCH_ENV = "CCBENCH_LAB_LAUNCH"


def _mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    import shutil

    found = shutil.which("mpiexec")
    if not found:
        raise CCBenchError("no mpiexec found: the lab uses MPICH's hydra (pip install 'ccbench[mpich]')")
    return found


def lab_command(shape: Shape, run_args: list[str], mpiexec: str = "mpiexec", python: str = sys.executable,
                bind_flags=("-bind-to", "none"), launcher: str = "hydra-launcher") -> list[str]:
    """The hydra command: mpiexec in host 0's network namespace, one proxy per host through `launcher`.  The ranks
    run ``ccbench run RUN_ARGS``, or ``ccbench KIND ARGS`` where RUN_ARGS start with a measuring kind's name
    (``doctor ...``) instead of an option."""
    hosts = [core.host_ns(i) for i in range(shape.hosts)]
    command = [] if run_args and not run_args[0].startswith("-") else ["run"]
    return ["ip", "netns", "exec", hosts[0], mpiexec, "-launcher", "rsh", "-launcher-exec", launcher,
            "-localhost", core.host_addr(0), "-hosts", shape.hydra_hosts(hosts), *bind_flags,
            "-n", str(shape.ranks), python, "-m", "mpi4py", "-m", "ccbench", *command, *run_args]


def lab_binding(requested: str, shape: Shape, cores: list[int]):
    """(`Binding`, host -> CPUs for its proxy) of a lab run whose hosts share `cores`.

    hydra binds each proxy's ranks from the machine's first core on, so proxies on one
    machine would pin their ranks to the same cores; the lab binds the hosts instead: each
    proxy (and the ranks it forks) gets CPUs of its own from `ccbench.lab.hostexec`, and hydra
    binds nothing (``-bind-to none``).  ``auto``: when the ranks fit the cores, host I gets
    cores ``I*R .. I*R+R-1`` (one core per rank at one rank per host; R ranks share their
    host's R cores above that); when they do not, nothing is pinned.  ``core`` deals the
    cores out the same way, round robin when they run short; ``socket`` is left to hydra.
    """
    from ccbench.measure.launcher import Binding

    if requested not in BINDINGS:
        raise UsageError(f"--bind {requested!r}: choose from {', '.join(BINDINGS)}")
    n, c = shape.ranks, len(cores)
    fits = n <= c
    where = f"{shape.describe()} = {n} ranks on {c} cores"
    if requested == "socket":
        return Binding(requested, "socket", "requested; each host's proxy binds its ranks to sockets",
                       ("-bind-to", "socket"), "hydra", n, c), {}
    if requested == "none" or (requested == "auto" and not fits):
        why = ("requested" if requested == "none"
               else f"{where}: oversubscribed, so no rank is pinned to a core it shares")
        return Binding(requested, "none", why, ("-bind-to", "none"), "hydra", n, c), {}
    cpus = {core.host_ns(h): sorted({cores[(h * shape.ppn + j) % c] for j in range(shape.ppn)})
            for h in range(shape.hosts)}
    listed = ", ".join(f"{h}: {','.join(map(str, v))}" for h, v in cpus.items())
    why = (("requested; " if requested == "core" else "")
           + f"{where}: each host's ranks on cores of their own ({listed})"
           + ("" if shape.ppn == 1 else "; the ranks of a host are not pinned one per core (hydra would pin "
                                        "every host's ranks from core 0)")
           + ("" if fits else "; ranks share cores"))
    return Binding(requested, "core" if shape.ppn == 1 else "host", why, ("-bind-to", "none"), "hydra", n, c), cpus


def _uniform(values: list[float]) -> float | None:
    return values[0] if values and all(v == values[0] for v in values) else None


def lab_block(state: dict, shape: Shape, role: str = "measurement") -> dict:
    """The ``lab`` block of a run's provenance: the shape, what was injected on which link, by what, the baseline.

    ``delay_s`` and ``rate_bps`` are the links' when every host used and every pair of them has the same
    ones (what ``ccbench fit`` compares against), else None; ``links`` has each host's, ``pairs`` each pair's
    among them that has a link of its own (``lab set --pair``: it replaces the two hosts' links between them).
    """
    base = state.get("baseline")
    used = state["namespaces"][: shape.hosts]
    links = {ns: dict(zip(("delay_s", "rate_bps"), link_params(state, ns), strict=True)) for ns in used}
    pairs = pair_links(state, used)
    every = [*links.values(), *pairs.values()]
    return {"hosts": shape.hosts, "ppn": shape.ppn, "ranks": shape.ranks, "order": shape.order,
            "machine_ranks": shape.ranks, "host_of_rank": shape.host_of_rank(), "lab_hosts": state["hosts"],
            "role": role, "delay_s": _uniform([v["delay_s"] for v in every]),
            "rate_bps": _uniform([v["rate_bps"] for v in every]), "links": links, "pairs": pairs,
            "emulator": (state.get("emulator") or {}).get("kind"),
            "emulator_priority": (state.get("emulator") or {}).get("priority"),
            "emulator_pid": (state.get("emulator") or {}).get("pid"),
            "shaper_choice": state.get("shaper_choice"), "subnet": state["subnet"],
            "namespaces": used, "hostnames": (state.get("hostnames") or state["namespaces"])[: shape.hosts],
            "baseline": None if base is None or role == "baseline" else base, "env": LAB_ENV}


def interface_counters(nhosts: int) -> dict:
    """rx/tx bytes and packets of each host's lab interface (``ip -s -j link``)."""
    out = {}
    for i in range(nhosts):
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


def _traffic(nhosts: int, before: dict, after: dict, emu0: dict, emu1: dict) -> dict:
    links = {}
    def total(emu: dict, ns: str, key: str) -> int:  # over the host's queues: its ingress, its pairs' own
        return sum(v.get(key, 0) for name, v in emu["links"].items() if v.get("host", name) == ns)

    for ns in before:
        d = {k: after[ns][k] - before[ns][k] for k in before[ns]}
        d["emulated_packets"] = total(emu1, ns, "released") - total(emu0, ns, "released")
        d["emulated_bytes"] = total(emu1, ns, "bytes") - total(emu0, ns, "bytes")
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


def lab_state(nranks: int | None = None, ppn: int | None = None) -> dict:
    """The state of the lab that is up, ready to run on; refused (one line) when none is, when its host names or its
    emulator are gone, or when `ppn` does not divide `nranks`."""
    if nranks is not None and ppn is not None:
        check_ppn_divides(nranks, ppn)
    state = core.load_state()
    if state is None or state.get("status") != "up":
        raise CCBenchError("no lab is up: start one with `ccbench lab up --hosts N --delay 500us --rate 1gbit`")
    if not state.get("uts") or not core.uts_path(state["namespaces"][0]).exists():
        raise CCBenchError("this lab has no host names (made by an older ccbench, or its UTS namespaces are gone): "
                           "`ccbench lab down` and `ccbench lab up` again")
    if not core.emulator_alive(state):
        raise CCBenchError("the lab's link emulator is not running (traffic is blocked): "
                           "`ccbench lab down` and `ccbench lab up` again")
    return state


def lab_job(argv: list[str]) -> int:
    """One job of ``ccbench lab launch``, given as mpiexec's arguments (``-n N [FLAGS] PYTHON -m mpi4py -m ccbench
    ARGS``), run on the lab's hosts by `run_on_lab` at the ranks per host, order and binding ``LAUNCH_ENV`` names
    (the launcher's own binding flags are dropped: the lab binds its hosts); its exit code.  ``--version`` prints
    the lab's mpiexec's (``ccbench launch`` asks it which launcher this is)."""
    if argv[:1] == ["--version"]:
        return subprocess.run([_mpiexec(), "--version"]).returncode
    try:
        n = int(argv[argv.index("-n") + 1])
        at = next(i for i in range(len(argv) - 3) if argv[i:i + 4] == ["-m", "mpi4py", "-m", "ccbench"])
    except (ValueError, IndexError, StopIteration):
        raise UsageError(f"lab mpiexec: expected -n N ... PYTHON -m mpi4py -m ccbench ARGS, got {' '.join(argv)!r}"
                         ) from None
    shape = json.loads(os.environ.get(LAUNCH_ENV) or "{}")
    code, _, _ = run_on_lab(argv[at + 4:], n, bind=shape.get("bind", "auto"), ppn=shape.get("ppn"),
                            order=shape.get("order", "block"))
    return code


def run_on_lab(run_args: list[str], nranks: int | None = None, role: str = "measurement",
               quiet: bool = False, bind: str = "auto", ppn: int | None = None,
               order: str = "block") -> tuple[int, Path | None, dict]:
    """Run ``ccbench run RUN_ARGS`` on `nranks` ranks, `ppn` per host (default: the lab's), from host 0 on.

    `order` lays the ranks on the hosts (block or cyclic, `ccbench.lab.shape.Shape`); `bind` as
    `lab_binding` says (the hosts share this machine's cores).  Returns (exit code, run
    directory or None, traffic).  Refuses, before anything runs or is written, a `ppn` that
    does not divide `nranks`, a shape the lab or the machine cannot hold, a lab that is down
    or whose emulator is dead (traffic would stop: the queues fail closed).
    """
    state = lab_state(nranks, ppn)
    shape = resolve(nranks, ppn, state["hosts"], int(state.get("ppn") or 1), order)
    cores = sorted(os.sched_getaffinity(0))
    check_fits(shape.hosts, shape.ppn, len(cores), core.free_memory_bytes())
    if any(a in ("--resume",) or a.startswith("--resume=") for a in run_args):
        raise UsageError("--resume is not supported on the lab; start a new run")
    from ccbench.measure.launcher import run_job
    from ccbench.measure.provenance import BIND_ENV

    binding, cpus = lab_binding(bind, shape, cores)
    launcher = core.launcher_path()
    if not launcher.exists():
        core.write_launcher()
    env = dict(os.environ, **LAB_ENV, CCBENCH_LAB=json.dumps(lab_block(state, shape, role)),
               **{BIND_ENV: json.dumps(binding.to_dict()), CPUS_ENV: json.dumps(cpus)})
    root = _results_root(run_args)
    existing = set(root.iterdir()) if root.is_dir() else set()
    h = shape.hosts
    before, emu0 = interface_counters(h), _emulator_counts(state)
    job = run_job(lab_command(shape, run_args, _mpiexec(), bind_flags=binding.flags, launcher=str(launcher)), env,
                  stdout=subprocess.DEVNULL if quiet else None)
    code = job.code
    ended = time.time()
    after = interface_counters(h)
    traffic = _traffic(h, before, after, emu0, _fresh_emulator_counts(state, ended))
    run_dir = job.run_dir
    if run_dir is None:
        new = _new_dirs(root, existing)
        run_dir = new[-1] if len(new) == 1 else None
    if run_dir is not None and run_dir.is_dir():
        write_new_set(run_dir, "lab-traffic", {".json": json.dumps(dict(traffic, lab=lab_block(state, shape, role)),
                                                                  indent=1) + "\n"})
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

    The emulator is restarted at zero delay on every link (the lab's rate), the sweep runs
    between hosts 0 and 1, one rank each (a run of its own, tagged ``lab-baseline``), the
    emulator is restarted with the lab's links (hosts' and pairs' own settings included), and the alpha
    fitted by `fit` (rows as dicts -> {"alpha_s", "alpha_ci_s", "rate_bps", "statistic"}; the
    caller passes ``ccbench.analysis.lab_check.baseline_fit``) is stored in the lab's state as
    its baseline.
    """
    from ccbench.store.run import open_run

    state = core.load_state()
    if state is None or state.get("status") != "up":
        raise CCBenchError("no lab is up")
    delay, rate, links, pairs = (state["delay_s"], state["rate_bps"], dict(state.get("links") or {}),
                                 dict(state.get("pairs") or {}))
    core.restart_emulator(state, 0.0, rate, links={}, pairs={})
    try:
        code, run_dir, traffic = run_on_lab([*SWEEP_ARGS, "--no-show", "--results-dir", results_dir,
                                             "--tag", "lab-baseline"], nranks=2, ppn=1, role="baseline", quiet=True)
    finally:
        state = core.load_state()
        core.restart_emulator(state, delay, rate, links=links, pairs=pairs)
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
