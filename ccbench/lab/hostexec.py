"""hydra's launcher for the lab: start a process inside a lab host's network and UTS namespaces.

``mpiexec -launcher rsh -launcher-exec SCRIPT -hosts ccb-h0:2,ccb-h1:2 ...`` starts one
hydra proxy per host by running ``SCRIPT HOST "PROXY" ARGS...`` -- hydra's rsh and ssh
launchers put the host name first and the proxy's path in double quotes for the remote
shell, ssh adding ``-x`` in front (MPICH ``src/pm/hydra/lib/tools/bootstrap/external/
external_common_launch.c``; ``mpiexec -launcher-exec -h``).  The script (`core.launcher_path`)
runs this module, which enters host HOST's network namespace (``/run/netns/HOST``) and its
UTS namespace (`core.uts_path`), pins itself to the host's CPUs when the lab run asked for
it (``CCBENCH_LAB_CPUS``, a JSON object host -> CPU list), and replaces itself with the
proxy.  The proxy, and the ranks it forks, then live on that host: its hostname, its only
network interface and its emulated link.  MPICH takes its node map from hydra's process
mapping -- one node per proxy -- so ranks of one host use shared memory and ranks of
different hosts the network (MPICH ``src/util/mpir_nodemap.h``: the hostname is consulted only
when the process manager gives no mapping).

Run as ``python -m ccbench.lab.hostexec [-x] HOST COMMAND [ARGS...]``; exit code 127 and one
line on stderr when it cannot.
"""

import ctypes
import json
import os
import re
import sys

from ccbench.lab import core

__all__ = ["CPUS_ENV", "enter", "main", "parse"]

#: JSON object host -> CPUs its proxy (and so its ranks) may run on; absent: they keep the launcher's.
CPUS_ENV = "CCBENCH_LAB_CPUS"
CLONE_NEWNET = 0x40000000
CLONE_NEWUTS = 0x04000000
_HOST = re.compile(rf"{re.escape(core.PREFIX)}-h\d+")


def parse(argv: list[str]) -> tuple[str, list[str]]:
    """(host, command) from what hydra's launcher passes: ``[-x|-X] [USER@]HOST "PROXY" ARGS...``.

    One pair of double quotes around the command's path is removed (hydra adds them for a
    remote shell); the other arguments are passed as they are.
    """
    args = list(argv)
    while args and args[0] in ("-x", "-X"):
        args.pop(0)
    if len(args) < 2:
        raise ValueError("usage: python -m ccbench.lab.hostexec [-x] HOST COMMAND [ARGS...]")
    host = args[0].rsplit("@", 1)[-1]
    if not _HOST.fullmatch(host):
        raise ValueError(f"{host!r} is not a lab host ({core.PREFIX}-hN)")
    cmd = args[1:]
    if len(cmd[0]) >= 2 and cmd[0][0] == cmd[0][-1] == '"':
        cmd[0] = cmd[0][1:-1]
    return host, cmd


def _setns(path: str, kind: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, kind) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def enter(host: str) -> None:
    """Move this process into lab host `host`: its network namespace, then its UTS namespace (setns(2))."""
    net, uts = f"/run/netns/{host}", core.uts_path(host)
    for path in (net, uts):
        if not os.path.exists(path):
            raise OSError(f"{path} does not exist: is the lab up (`ccbench lab status`)?")
    _setns(net, CLONE_NEWNET)
    _setns(str(uts), CLONE_NEWUTS)


def main(argv=None) -> int:
    try:
        host, cmd = parse(sys.argv[1:] if argv is None else argv)
        cpus = json.loads(os.environ.get(CPUS_ENV) or "{}").get(host)
        enter(host)
        if cpus:
            os.sched_setaffinity(0, [int(c) for c in cpus])
        os.execv(cmd[0], cmd)
    except (OSError, ValueError) as exc:
        print(f"ccbench lab launcher: {exc}", file=sys.stderr)
        return 127
    return 127  # not reached: execv replaced this process


if __name__ == "__main__":
    raise SystemExit(main())
