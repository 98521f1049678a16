"""Bring the lab up and down: namespaces, veth links, a bridge, NFQUEUE rules and the emulator.

Layout (every name starts with ``ccb``; nothing outside these namespaces is touched):

- ``ccb-sw``: the switch, a namespace holding the bridge ``ccb-br`` and one port
  ``ccb-pI`` per host;
- ``ccb-hI``: host I, a network namespace and a UTS namespace of its own whose hostname is
  ``ccb-hI`` (kept by a bind mount under ``state_dir()/uts``, made with ``unshare --uts=FILE``,
  unshare(1)), with loopback and one interface ``ccb0`` (the peer of ``ccb-pI``),
  address ``10.251.77.(I+1)/24``; no default route, so traffic can only reach the other
  hosts; TCP congestion control ``reno`` and ``tcp_slow_start_after_idle = 0`` (the
  host's BBR paces and inflates 12-64 KiB transfers; a restart after idle would make
  every sample pay slow start), 4 MiB default TCP socket buffers (tcp_rmem/tcp_wmem: the
  window of a 2 ms, 200 Mbit/s path must exceed its ~100 KB bandwidth-delay product from
  the first message on; with the kernel's 128 KiB default, 8-256 KiB messages paid window
  growth and the fitted rate came out 3% low), IPv6 off;
- the links' delay and rate: the kernel's netem on each switch port where the kernel has
  it, otherwise, in each host, ``iptables -t mangle -A PREROUTING -i ccb0 -j NFQUEUE
  --queue-num 0`` (no bypass: fail closed) and the emulator process
  (`ccbench.lab.emulator`) holding every host's queue.  Both act on the packets going
  to a host: each host's ingress is its link.  Every host has the lab's delay and rate unless
  ``lab set --host I`` gave it its own (``state["links"]``, `ccbench.lab.link.link_params`);
  a pair of hosts given a link of its own (``lab set --pair I,J``, ``state["pairs"]``; userspace
  shaper only) gets, in each of the two hosts, a rule ``-s ADDRESS-OF-THE-OTHER -j NFQUEUE
  --queue-num 1+OTHER`` before the one above, so that its packets wait in a queue, and on a
  link, of their own (`ccbench.lab.link.host_queues`);
- ``hydra-launcher`` in `state_dir()`: the script hydra starts each host's proxy with
  (``mpiexec -launcher rsh -launcher-exec``; `ccbench.lab.hostexec` enters the host);
- daemons the lab runs inside its hosts (Slurm's, `ccbench.lab.slurm`): their files in
  `daemon_dir()`, their pids in the state (``state["daemons"]``).

The state (hosts, link parameters, the emulator's pid, the daemons' pids, the zero-delay baseline) is a JSON
file in `state_dir()`; `down` works from it and, after a crash, from the name prefix (every daemon lives in
a lab namespace, so ending the namespaces' processes ends it too).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.lab import shape as lab_shape
from ccbench.lab.link import host_queues, link_params

__all__ = [
    "HOST_IF",
    "PREFIX",
    "SUBNET",
    "daemon_alive",
    "daemon_dir",
    "down",
    "emulator_alive",
    "free_memory_bytes",
    "host_addr",
    "host_ns",
    "lab_namespaces",
    "launcher_path",
    "mpiexec_path",
    "load_state",
    "netem_available",
    "netem_counters",
    "preflight",
    "read_stats",
    "restart_emulator",
    "save_state",
    "state_dir",
    "stop_daemons",
    "up",
    "usable_cores",
    "unavailable",
    "uts_path",
    "write_launcher",
    "write_mpiexec",
]

PREFIX = "ccb"
SWITCH_NS = f"{PREFIX}-sw"
BRIDGE = f"{PREFIX}-br"
HOST_IF = f"{PREFIX}0"
SUBNET = "10.251.77.0/24"
QUEUE = 0
MAX_HOSTS = lab_shape.MAX_HOSTS
EMULATOR_NAME = "userspace NFQUEUE emulator at each receiver's ingress (ccbench.lab.emulator)"
NETEM_NAME = "kernel netem on each switch port (the receiver's ingress link)"
SHAPERS = ("auto", "netem", "userspace")
_SYSCTLS = ("net.ipv4.tcp_congestion_control=reno", "net.ipv4.tcp_slow_start_after_idle=0",
            "net.ipv4.tcp_rmem=4096 4194304 16777216", "net.ipv4.tcp_wmem=4096 4194304 16777216",
            "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")


def host_ns(i: int) -> str:
    return f"{PREFIX}-h{i}"


def _port(i: int) -> str:
    return f"{PREFIX}-p{i}"


def host_addr(i: int) -> str:
    return f"10.251.77.{i + 1}"


def state_dir() -> Path:
    """Where the lab keeps its state, the emulator's log and statistics."""
    return Path(os.environ.get("CCBENCH_LAB_DIR", "/run/ccbench-lab"))


def daemon_dir() -> Path:
    """Where daemons the lab runs (Slurm's) keep their configuration, logs and state; `down` removes it."""
    return state_dir() / "daemons"


def uts_path(ns: str) -> Path:
    """The file that keeps host `ns`'s UTS namespace (its hostname) alive."""
    return state_dir() / "uts" / ns


def launcher_path() -> Path:
    """The script hydra runs to start a proxy on a lab host (``-launcher-exec``)."""
    return state_dir() / "hydra-launcher"


def mpiexec_path() -> Path:
    """The launcher ``ccbench lab launch`` gives ``ccbench launch``: it starts each job on the lab's hosts."""
    return state_dir() / "lab-mpiexec"


def usable_cores() -> int:
    """Cores this process may run on: what every lab host shares."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def free_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (proc(5)), or None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _state_path() -> Path:
    return state_dir() / "state.json"


def load_state() -> dict | None:
    p = _state_path()
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except ValueError:
        return {"corrupt": True}


def save_state(state: dict) -> None:
    p = _state_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(tmp, p)


def read_stats() -> dict | None:
    """The emulator's last statistics (counters, lateness), or None."""
    p = state_dir() / "emulator-stats.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def unavailable() -> str | None:
    """Why a new lab cannot be built now: none can be here (`preflight`), or one is up (or a crashed one left its
    namespaces, host names or daemons behind); None when it can."""
    why = preflight()
    if why:
        return why
    if load_state() is not None or lab_namespaces() or (state_dir() / "uts").is_dir() or daemon_dir().exists():
        return "a lab is already up (or a crashed one left namespaces behind): run `ccbench lab down` first"
    return None


def preflight() -> str | None:
    """Why a lab cannot be built here, or None when it can (root, ip, iptables, netns)."""
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, iptables, NFQUEUE)"
    for tool in ("ip", "iptables", "iptables-restore", "unshare", "umount"):
        if not shutil.which(tool):
            return (f"the lab needs {tool!r}" + (" (Debian: apt-get install iptables)" if tool.startswith("iptables")
                                                 else ""))
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"network namespaces unavailable: {r.stderr.strip()}"
    return None


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise CCBenchError(f"`{' '.join(args)}` failed: {(r.stderr or r.stdout).strip()}")
    return r


def lab_namespaces() -> list[str]:
    """Namespaces with the lab's prefix (whatever state file there is or is not)."""
    r = _sh("ip", "netns", "list", check=False)
    names = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(f"{PREFIX}-"))


def _pid_is_emulator(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"ccbench.lab.emulator" in cmd


def daemon_alive(record: dict) -> bool:
    """Whether the daemon `record` (``{"name", "pid", ...}``) still runs: its pid lives and its program is `name`."""
    try:
        argv0 = Path(f"/proc/{int(record['pid'])}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return Path(argv0.decode(errors="replace")).name == record.get("name")


def stop_daemons(records: list[dict], timeout_s: float = 10.0) -> list[str]:
    """SIGTERM the daemons `records` name (last started first), SIGKILL what still runs after `timeout_s`.

    A pid whose program is not the recorded one (the daemon died and the pid was reused) is left alone.
    Returns what was stopped, as ``name on host (pid N)``.
    """
    alive = [r for r in reversed(records) if daemon_alive(r)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for r in alive:
            if daemon_alive(r):
                try:
                    os.kill(int(r["pid"]), sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        while any(daemon_alive(r) for r in alive) and time.monotonic() < deadline:
            time.sleep(0.05)
    return [f"{r['name']}" + (f" on {r['host']}" if r.get("host") else "") + f" (pid {r['pid']})" for r in alive]


def _netem(state: dict) -> bool:
    return (state.get("emulator") or {}).get("kind") == NETEM_NAME


def netem_available() -> tuple[bool, str]:
    """Whether the kernel has netem: try a qdisc on the first switch port, then remove it."""
    r = _sh("ip", "netns", "exec", SWITCH_NS, "tc", "qdisc", "add", "dev", _port(0), "root", "netem", "delay", "0ms",
            check=False)
    if r.returncode != 0:
        return False, (r.stderr or r.stdout).strip() or f"tc exit code {r.returncode}"
    _sh("ip", "netns", "exec", SWITCH_NS, "tc", "qdisc", "del", "dev", _port(0), "root", check=False)
    return True, "kernel netem available"


def _apply_netem(state: dict) -> None:
    """netem with each host's delay and rate on its switch port (tc-netem(8): delay, rate, limit)."""
    for i in range(state["hosts"]):
        delay_s, rate_bps = link_params(state, host_ns(i))
        _sh("ip", "netns", "exec", SWITCH_NS, "tc", "qdisc", "replace", "dev", _port(i), "root", "netem",
            "delay", f"{delay_s * 1e6:.3f}us", "rate", f"{rate_bps:.0f}bit", "limit", "100000")


def netem_counters(state: dict) -> dict:
    """Packets and bytes each host's netem qdisc has sent (``tc -s -j qdisc``)."""
    out = {}
    for i in range(state["hosts"]):
        r = _sh("ip", "netns", "exec", SWITCH_NS, "tc", "-s", "-j", "qdisc", "show", "dev", _port(i), check=False)
        q = [d for d in (json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else [])
             if d.get("kind") == "netem"]
        out[host_ns(i)] = {"released": q[0].get("packets", 0), "bytes": q[0].get("bytes", 0)} if q else {}
    return out


def emulator_alive(state: dict) -> bool:
    if _netem(state):
        return all(netem_counters(state).values())
    pid = (state.get("emulator") or {}).get("pid")
    return bool(pid) and _pid_is_emulator(int(pid))


def _stop_emulator(state: dict, timeout_s: float = 10.0) -> None:
    """SIGTERM the emulator and wait until it has exited (its queues are then free to bind)."""
    pid = (state.get("emulator") or {}).get("pid")
    if not pid or not _pid_is_emulator(int(pid)):
        return
    os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _pid_is_emulator(int(pid)):
        if time.monotonic() > deadline:
            os.kill(int(pid), signal.SIGKILL)
            deadline = time.monotonic() + timeout_s
        time.sleep(0.02)


def _start_emulator(state: dict, timeout_s: float = 20.0) -> None:
    """Start the emulator for `state` (saved first) and wait until every queue is bound."""
    state["emulator"] = None
    save_state(state)
    stats = state_dir() / "emulator-stats.json"
    stats.unlink(missing_ok=True)
    log = open(state_dir() / "emulator.log", "ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "ccbench.lab.emulator", str(_state_path())],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    finally:
        log.close()
    state["emulator"] = {"pid": proc.pid, "kind": EMULATOR_NAME}
    save_state(state)
    deadline = time.monotonic() + timeout_s
    while True:
        s = read_stats()
        if s and s.get("pid") == proc.pid and s.get("ready"):
            state["emulator"]["priority"] = s.get("priority")
            save_state(state)
            return
        code = proc.poll()
        if code is not None or time.monotonic() > deadline:
            tail = (state_dir() / "emulator.log").read_text(errors="replace").strip().splitlines()[-5:]
            raise CCBenchError("the link emulator did not start" + (f" (exit code {code})" if code is not None
                                                                    else " in time")
                               + (": " + " | ".join(tail) if tail else ""))
        time.sleep(0.02)


def _apply_rules(state: dict) -> None:
    """Each host's NFQUEUE rules, anew: one per pair with a link of its own, then the one for every other packet.

    The host's mangle table is replaced in one step (iptables-restore(8) commits a table atomically), so that no
    packet passes unqueued while the rules change.
    """
    for ns in state["namespaces"]:
        rules = [f"-A PREROUTING -i {HOST_IF}" + (f" -s {host_addr(state['namespaces'].index(src))}/32" if src else "")
                 + f" -j NFQUEUE --queue-num {queue}" for queue, src in host_queues(state, ns, QUEUE)]
        table = "\n".join(["*mangle", ":PREROUTING ACCEPT [0:0]", *rules, "COMMIT", ""])
        r = subprocess.run(["ip", "netns", "exec", ns, "iptables-restore", "-w"], input=table, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise CCBenchError(f"iptables-restore in {ns} failed: {(r.stderr or r.stdout).strip()}")


def _links(links: dict) -> dict:
    return {k: {"delay_s": float(v["delay_s"]), "rate_bps": float(v["rate_bps"])} for k, v in links.items()}


def restart_emulator(state: dict, delay_s: float, rate_bps: float, links: dict | None = None,
                     pairs: dict | None = None) -> None:
    """Stop the running emulator, wait for it to exit, start one with new link parameters.

    `delay_s` and `rate_bps` are every host's; `links` (host namespace -> ``{"delay_s",
    "rate_bps"}``) replaces the hosts' own settings, `pairs` (``"a,b"`` -> the same) the
    pairs' (None: they stay).  With netem, the qdiscs are replaced instead (no pairs there).
    """
    if _netem(state) and pairs:
        raise UsageError("links per pair need the userspace shaper (`ccbench lab up --shaper userspace`)")
    state.update(delay_s=float(delay_s), rate_bps=float(rate_bps))
    if links is not None:
        state["links"] = _links(links)
    if pairs is not None:
        state["pairs"] = _links(pairs)
    if _netem(state):
        _apply_netem(state)
        save_state(state)
        return
    _stop_emulator(state)
    _apply_rules(state)
    _start_emulator(state)


def _write_script(path: Path, what: str, command: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"#!/bin/sh\n# {what}\nexec '{sys.executable}' {command} \"$@\"\n")
    tmp.chmod(0o755)
    os.replace(tmp, path)
    return path


def write_launcher() -> Path:
    """The script hydra's rsh launcher runs as ``SCRIPT HOST "PROXY" ARGS...`` (`ccbench.lab.hostexec`)."""
    return _write_script(launcher_path(), "hydra's launcher for the ccbench lab: start a proxy inside a lab host's "
                         "namespaces", "-m ccbench.lab.hostexec")


def write_mpiexec() -> Path:
    """The launcher ``ccbench lab launch`` hands ``ccbench launch``: ``SCRIPT -n N [FLAGS] PYTHON -m mpi4py -m
    ccbench ARGS`` runs the job on the lab's hosts (``ccbench lab mpiexec``)."""
    return _write_script(mpiexec_path(), "an mpiexec for ccbench launch: the job on the ccbench lab's hosts",
                         "-m ccbench lab mpiexec")


def _make_uts(ns: str) -> Path:
    """A UTS namespace whose hostname is `ns`, kept alive by a bind mount on `uts_path` (unshare(1) --uts=FILE)."""
    path = uts_path(ns)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    _sh("unshare", f"--uts={path}", "hostname", ns)
    return path


def up(hosts: int, delay_s: float, rate_bps: float, shaper: str = "auto", ppn: int = 1) -> dict:
    """Create the namespaces, links, bridge and rules, start the emulator; return the state.

    Each host is a network and a UTS namespace (its hostname is its namespace's name); `ppn`
    is the ranks per host a `lab run` places by default, and the shape must fit the machine
    (`ccbench.lab.shape.check_fits`).  `shaper`: ``netem`` (the kernel's, on each switch
    port), ``userspace`` (ccbench's emulator) or ``auto`` (netem where the kernel has it).
    Refuses when a lab (or a crashed lab's leftovers) exists.  On any failure, everything
    created so far is removed.
    """
    lab_shape.check_fits(hosts, ppn, usable_cores(), free_memory_bytes())
    if shaper not in SHAPERS:
        raise UsageError(f"unknown shaper {shaper!r}; choose from {', '.join(SHAPERS)}")
    why = unavailable()
    if why:
        raise CCBenchError(why)
    state = {"prefix": PREFIX, "hosts": hosts, "ppn": ppn, "namespaces": [host_ns(i) for i in range(hosts)],
             "hostnames": [host_ns(i) for i in range(hosts)], "uts": {}, "launcher": str(launcher_path()),
             "links": {}, "pairs": {},
             "switch": SWITCH_NS, "bridge": BRIDGE, "interface": HOST_IF, "subnet": SUBNET,
             "addresses": [host_addr(i) for i in range(hosts)], "queue": QUEUE,
             "delay_s": float(delay_s), "rate_bps": float(rate_bps), "emulator": None, "baseline": None,
             "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "status": "starting"}
    save_state(state)  # first, so that `down` can clean up after a crash in the middle
    try:
        _sh("ip", "netns", "add", SWITCH_NS)
        _sh("ip", "-n", SWITCH_NS, "link", "set", "lo", "up")
        _sh("ip", "-n", SWITCH_NS, "link", "add", BRIDGE, "type", "bridge")
        _sh("ip", "-n", SWITCH_NS, "link", "set", BRIDGE, "up")
        for i in range(hosts):
            ns = host_ns(i)
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", HOST_IF, "netns", ns, "type", "veth", "peer", "name", _port(i),
                "netns", SWITCH_NS)
            _sh("ip", "-n", SWITCH_NS, "link", "set", _port(i), "master", BRIDGE)
            _sh("ip", "-n", SWITCH_NS, "link", "set", _port(i), "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "-n", ns, "addr", "add", f"{host_addr(i)}/24", "dev", HOST_IF)
            _sh("ip", "-n", ns, "link", "set", HOST_IF, "up")
            _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w", *_SYSCTLS)
            state["uts"][ns] = str(_make_uts(ns))
            save_state(state)
        write_launcher()
        has_netem, why = netem_available() if shaper != "userspace" else (False, "userspace shaper requested")
        if shaper == "netem" and not has_netem:
            raise CCBenchError(f"the kernel has no netem here ({why}): use --shaper userspace or auto")
        state["shaper_choice"] = {"requested": shaper, "netem": why}
        if has_netem:
            state["emulator"] = {"pid": None, "kind": NETEM_NAME, "priority": None}
            _apply_netem(state)
        else:
            _apply_rules(state)
            _start_emulator(state)
        state["status"] = "up"
        save_state(state)
    except BaseException:
        down()
        raise
    return state


def _kill_namespace_processes(ns: str) -> list[int]:
    """SIGTERM, then SIGKILL, the processes still inside a lab namespace (stuck ranks)."""
    pids = [int(p) for p in _sh("ip", "netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in pids if Path(f"/proc/{p}").exists()]
        for p in alive:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        if not alive:
            break
        time.sleep(0.5)
    return pids


def _remove_uts() -> list[str]:
    """Unmount and remove every kept UTS namespace under ``state_dir()/uts`` (the state file may be gone)."""
    removed = []
    folder = state_dir() / "uts"
    if not folder.is_dir():
        return removed
    for f in sorted(folder.iterdir()):
        _sh("umount", str(f), check=False)
        try:
            f.unlink()
        except OSError as exc:  # still mounted: say so, leave it
            removed.append(f"UTS namespace {f.name} NOT removed ({exc})")
            continue
        removed.append(f"UTS namespace {f.name}")
    try:
        folder.rmdir()
    except OSError:
        pass
    return removed


def down() -> list[str]:
    """Remove everything the lab created (also after a crash); return what was removed."""
    state = load_state() or {}
    removed = stop_daemons(list(state.get("daemons") or []))
    if not _netem(state) and emulator_alive(state):
        _stop_emulator(state)
        removed.append(f"emulator (pid {state['emulator']['pid']})")
    for ns in lab_namespaces():
        killed = _kill_namespace_processes(ns)
        _sh("ip", "netns", "del", ns, check=False)
        removed.append(f"namespace {ns}" + (f" ({len(killed)} processes ended)" if killed else ""))
    removed += _remove_uts()
    if daemon_dir().exists():
        shutil.rmtree(daemon_dir(), ignore_errors=True)
        removed.append(f"the daemons' files ({daemon_dir()})")
    d = state_dir()
    for name in ("state.json", "state.json.tmp", "emulator-stats.json", "emulator-stats.json.tmp", "emulator.log",
                 launcher_path().name, launcher_path().name + ".tmp", mpiexec_path().name,
                 mpiexec_path().name + ".tmp"):
        (d / name).unlink(missing_ok=True)
    if d.exists() and not any(d.iterdir()):
        d.rmdir()
    return removed
