"""The userspace link emulator: holds each packet at its receiver's ingress until its link releases it.

Every host namespace sends the packets arriving on its lab interface to NFQUEUE (mangle
PREROUTING, no ``--queue-bypass``: without this process the traffic stops instead of
flowing unshaped).  This process opens one netfilter netlink socket per namespace (a
netlink socket belongs to the namespace it was created in, so it enters each one with
setns(2)), binds the queue with the GSO flag (offloaded packets of up to 64 KiB stay
whole: nfnetlink_queue.c segments them otherwise) and copies only the packet's first
bytes (NFQA_CAP_LEN gives the full length).  Each packet's release time comes from
`ccbench.lab.link.Link`, with the host's own delay and rate where it has them
(`ccbench.lab.link.link_params`); due packets are accepted with one NFQNL_MSG_VERDICT_BATCH per
queue (release times never decrease, so "every id up to the last due one" is exact).  A pair
of hosts with a link of its own has a queue of its own in each of the two hosts (a socket
each, `ccbench.lab.link.host_queues`), so its packets never wait behind the host's other
traffic and the batch verdicts stay exact.

Timing: it sleeps in select(2) until `SPIN_S` before the next release and then spins
(timer wake-ups are ~100 us late), at real-time priority (SCHED_FIFO, sched(7)) so
busy-polling MPI ranks cannot starve it.  Its own cost (~45 us one way on a 2-core
machine) is measured by a zero-delay baseline run and subtracted by the fit.

Run as ``python -m ccbench.lab.emulator STATE.json``; it writes STATS.json (counters,
lateness histogram, ``ready``) beside the state file about once a second.
"""

import ctypes
import errno
import json
import os
import select
import signal
import socket
import sys
import time
from collections import deque
from pathlib import Path

from ccbench.lab import netlink as nl
from ccbench.lab.link import Link, host_queues, link_params

__all__ = ["LATENESS_EDGES_S", "SPIN_S", "main", "open_queue"]

#: Sleep until this long before a release, then spin (CCBENCH_LAB_SPIN_S overrides it, in seconds).
SPIN_S = float(os.environ.get("CCBENCH_LAB_SPIN_S", "250e-6"))
#: Bytes of each packet copied to us (the IPv4 header); NFQA_CAP_LEN carries the full length.
COPY_RANGE = 20
#: Packets the kernel may hold in one queue before dropping (default 1024 is too few for 4 MiB bursts).
QUEUE_MAXLEN = 65536
#: Socket buffers (SO_RCVBUFFORCE needs CAP_NET_ADMIN; we are root).
SOCKET_BUFFER = 64 << 20
#: Upper edges of the lateness histogram (how long after its release time a packet was accepted).
LATENESS_EDGES_S = (5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, float("inf"))
STATS_INTERVAL_S = 1.0
CLONE_NEWNET = 0x40000000
BIND_TIMEOUT_S = 10.0


class _StopError(Exception):
    """SIGTERM or SIGINT: leave the loop."""


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _request(sock: socket.socket, msg: bytes, seq: int, backlog: list) -> None:
    """Send one config request and wait for its acknowledgement; packets seen meanwhile go to `backlog`."""
    sock.settimeout(5.0)
    sock.send(msg)
    buf = bytearray(1 << 16)
    while True:
        n = sock.recv_into(buf)
        for kind, _flags, rseq, payload in nl.iter_messages(buf, n):
            if kind == nl.NLMSG_ERROR and rseq == seq:
                err = nl.error_code(payload)
                if err:
                    raise OSError(err, f"nfqueue config request failed: {os.strerror(err)}")
                return
            if kind == (nl.NFNL_SUBSYS_QUEUE << 8) | nl.NFQNL_MSG_PACKET:
                backlog.append(nl.parse_packet(payload))


def open_queue(netns_path: str | None, queue: int, backlog: list) -> socket.socket:
    """A non-blocking netlink socket bound to `queue` in the namespace at `netns_path` (None: ours).

    Binding fails with EBUSY while an older emulator still holds the queue: retried for
    BIND_TIMEOUT_S (the caller is expected to have stopped the old one first).
    """
    if netns_path is None:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, nl.NETLINK_NETFILTER)
    else:
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(netns_path, os.O_RDONLY)
        try:
            _setns(target)
            try:
                sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, nl.NETLINK_NETFILTER)
            finally:
                _setns(home)
        finally:
            os.close(target)
            os.close(home)
    for opt, force in ((socket.SO_RCVBUF, 33), (socket.SO_SNDBUF, 32)):  # SO_RCVBUFFORCE, SO_SNDBUFFORCE
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, SOCKET_BUFFER)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
    sock.bind((0, 0))
    deadline = time.monotonic() + BIND_TIMEOUT_S
    while True:
        try:
            _request(sock, nl.config_bind(queue, seq=1), 1, backlog)
            break
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.EPERM) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    _request(sock, nl.config_params(queue, COPY_RANGE, seq=2), 2, backlog)
    _request(sock, nl.config_flags(queue, nl.NFQA_CFG_F_GSO, nl.NFQA_CFG_F_GSO | nl.NFQA_CFG_F_FAIL_OPEN,
                                   seq=3), 3, backlog)
    _request(sock, nl.config_maxlen(queue, QUEUE_MAXLEN, seq=4), 4, backlog)
    sock.setblocking(False)
    return sock


class _Queue:
    """One queue of a namespace: its socket, link, pending (release time, packet id) FIFO and counters."""

    def __init__(self, name: str, sock: socket.socket, queue: int, link: Link, host: str | None = None) -> None:
        self.name, self.sock, self.queue, self.link, self.host = name, sock, queue, link, host or name
        self.pending: deque = deque()
        self.packets = self.bytes = self.released = self.verdict_errors = self.overruns = 0
        self.max_pending = 0


def _realtime() -> str:
    """Switch to SCHED_FIFO; say what priority we run at."""
    try:
        prio = min(50, os.sched_get_priority_max(os.SCHED_FIFO))
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
        return f"SCHED_FIFO {prio}"
    except (AttributeError, OSError) as exc:
        return f"normal (SCHED_FIFO refused: {exc})"


def _write_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def run(state: dict, stats_path: Path) -> None:
    """Emulate the links of `state` until SIGTERM/SIGINT."""
    delay_s, rate_bps, qnum = float(state["delay_s"]), float(state["rate_bps"]), int(state.get("queue", 0))
    clock = time.perf_counter
    queues: list[_Queue] = []
    lateness = [0] * len(LATENESS_EDGES_S)
    worst = [0.0, 0.0]  # max lateness, sum of lateness
    started = time.time()
    priority = "normal"

    def stats(ready: bool) -> dict:
        return {"pid": os.getpid(), "ready": ready, "started": started, "written_at": time.time(),
                "delay_s": delay_s, "rate_bps": rate_bps, "priority": priority, "spin_s": SPIN_S,
                "lateness_edges_s": [e if e != float("inf") else None for e in LATENESS_EDGES_S],
                "lateness_counts": list(lateness), "max_lateness_s": worst[0],
                "sum_lateness_s": worst[1],
                "links": {q.name: {"host": q.host, "delay_s": q.link.delay_s, "rate_bps": q.link.rate_bps,
                                   "packets": q.packets, "bytes": q.bytes, "released": q.released,
                                   "pending": len(q.pending), "max_pending": q.max_pending,
                                   "verdict_errors": q.verdict_errors, "overruns": q.overruns}
                          for q in queues}}

    def on_signal(signum, frame):  # noqa: ARG001
        raise _StopError

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for host in state["namespaces"]:
            for num, src in host_queues(state, host, qnum):
                backlog: list = []
                sock = open_queue(f"/run/netns/{host}", num, backlog)
                q = _Queue(host if src is None else f"{host}<-{src}", sock, num, Link(*link_params(state, host, src)),
                           host)
                now = clock()
                for pid, length in backlog:
                    q.pending.append((q.link.release(now, length), pid))
                queues.append(q)
        priority = _realtime()
        _write_json(stats_path, stats(True))
        _loop(queues, clock, lateness, worst, lambda: _write_json(stats_path, stats(True)))
    except _StopError:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            _write_json(stats_path, dict(stats(False), stopped=time.time()))
        finally:
            for q in queues:
                q.sock.close()


def _loop(queues, clock, lateness, worst, write_stats) -> None:
    by_fd = {q.sock.fileno(): q for q in queues}
    fds = list(by_fd)
    buf = bytearray(1 << 20)
    packet_type = (nl.NFNL_SUBSYS_QUEUE << 8) | nl.NFQNL_MSG_PACKET
    edges = LATENESS_EDGES_S
    next_stats = clock() + STATS_INTERVAL_S
    while True:
        now = clock()
        nearest = None
        for q in queues:  # release every due packet: one batch verdict per queue
            p = q.pending
            if p and p[0][0] <= now:
                last = None
                while p and p[0][0] <= now:
                    due, last = p.popleft()
                    late = now - due
                    i = 0
                    while late > edges[i]:
                        i += 1
                    lateness[i] += 1
                    if late > worst[0]:
                        worst[0] = late
                    worst[1] += late
                    q.released += 1
                q.sock.send(nl.verdict_batch(q.queue, last))
            if p and (nearest is None or p[0][0] < nearest):
                nearest = p[0][0]
        if now >= next_stats:
            write_stats()
            next_stats = now + STATS_INTERVAL_S
        if nearest is None:
            timeout = max(0.0, next_stats - now)
        else:
            timeout = max(0.0, min(nearest - now - SPIN_S, next_stats - now))
        ready, _, _ = select.select(fds, (), (), timeout)
        for fd in ready:
            q = by_fd[fd]
            while True:
                try:
                    n = q.sock.recv_into(buf)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno == errno.ENOBUFS:  # the socket overflowed: the kernel dropped packets
                        q.overruns += 1
                        continue
                    raise
                arrival = clock()
                for kind, _flags, _seq, payload in nl.iter_messages(buf, n):
                    if kind == packet_type:
                        pid, length = nl.parse_packet(payload)
                        q.pending.append((q.link.release(arrival, length), pid))
                        q.packets += 1
                        q.bytes += length
                    elif kind == nl.NLMSG_ERROR and nl.error_code(payload):
                        q.verdict_errors += 1
                if len(q.pending) > q.max_pending:
                    q.max_pending = len(q.pending)


def main(argv=None) -> int:
    """Entry point: ``python -m ccbench.lab.emulator STATE.json``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ccbench.lab.emulator STATE.json", file=sys.stderr)
        return 2
    state_path = Path(args[0])
    state = json.loads(state_path.read_text())
    run(state, state_path.with_name("emulator-stats.json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
