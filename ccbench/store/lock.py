"""The run lock: one writer of a run directory at a time, naming the host and process that holds it.

An advisory lock (``flock``) on ``RUN/.ccbench-lock``, taken by whoever writes the run (rank 0's
`ccbench.store.results.RunWriter`, the launcher of a run of several launches) and given back when
it is done; the kernel gives it back when the process dies, so on the host that made it a free
lock is a dead owner.  The file holds who took it (host, process id, since when) for the message
of whoever finds it taken, and is removed when the lock is given back.  A file left by a process
of another host, whose liveness cannot be seen from here, is refused until the user takes it
over by removing the file (the message says so).
"""

import contextlib
import fcntl
import json
import os
import socket
import time
from pathlib import Path

from ccbench.core.errors import UsageError

__all__ = ["LOCK_NAME", "RunLock"]

LOCK_NAME = ".ccbench-lock"


def _holder(text: str) -> dict:
    try:
        who = json.loads(text)
    except ValueError:
        return {}
    return who if isinstance(who, dict) else {}


class RunLock:
    """``with RunLock(run_dir):`` -- or `acquire` / `release` -- one writer of a run directory at a time."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        """Take the lock, or refuse in one line naming who holds it and how to take over a stale one."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            who = _holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            os.close(fd)
            raise UsageError(f"{str(self.run_dir)!r} is in use by process {who.get('pid', '?')} on "
                             f"{who.get('host', '?')} (since {who.get('since', '?')}): wait for it to end, or stop "
                             "it first") from None
        who = _holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        here = socket.gethostname()
        if who.get("host") not in (None, here):  # left by a process of another host: alive or not, we cannot see
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise UsageError(f"{str(self.run_dir)!r} was taken by process {who.get('pid', '?')} on {who['host']} "
                             f"(since {who.get('since', '?')}), which may still be writing it; if that job is gone, "
                             f"take the run over by removing {str(self.path)!r}")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": here, "pid": os.getpid(),
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock back and remove its file (a second call does nothing)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
