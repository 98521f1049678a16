"""Starting ranks: find the MPI launcher, prepare its environment, run one job and watch how it ends.

Used by `ccbench launch`, `ccbench workload --launch` and `ccbench lab run`.  A job's rank 0
writes the path of the run directory it opened to the file named by ``CCBENCH_RUN_RECORD``
(`ccbench.store.results.RunWriter` does), so that when the job ends badly -- a rank crashed, was
killed or aborted, and no rank could say so -- the run is marked failed here.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError

__all__ = ["Job", "find_launcher", "prepare_launcher", "run_job"]


def find_launcher(explicit: str | None) -> str:
    """The launcher to use: the one named, else mpiexec/mpirun beside this Python, else on PATH."""
    if explicit:
        found = shutil.which(explicit)
        if not found:
            raise UsageError(f"MPI launcher {explicit!r} not found")
        return found
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpirun"):
        cand = here / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name)
        if found:
            return found
    raise CCBenchError("no MPI launcher (mpiexec or mpirun) found; install one with "
                       "pip install 'ccbench[mpich]' or load your site's MPI module")


def prepare_launcher(launcher: str | None) -> tuple[str, str, dict, list[str]]:
    """(executable, its --version text, environment, extra flags) for starting ranks.

    Open MPI's mpirun refuses root without two variables and more ranks than cores
    without --oversubscribe; both are given (the choice is the user's machine's, not a
    benchmark parameter).  On a terminal the ranks are told so (progress bar, colours).
    """
    exe = find_launcher(launcher)
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    env = dict(os.environ)
    if sys.stdout.isatty():
        env["CCBENCH_TERMINAL"] = "1"
        env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    extra: list[str] = []
    if "Open MPI" in version or "OpenRTE" in version:
        if os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        extra.append("--oversubscribe")
    return exe, version, env, extra


@dataclass(frozen=True)
class Job:
    """How a job ended: its exit code, the run directory it wrote (if any), and whether it was marked failed."""

    code: int
    run_dir: Path | None
    marked_failed: bool
    why: str  # "exit code N" or "killed by signal NAME"


def run_job(cmd: list[str], env: dict, *, stdout=None) -> Job:
    """Run one launcher command, forwarding SIGTERM/SIGINT to it (a batch system signals us, not the ranks).

    A run the job left ``running`` after a non-zero exit is marked ``failed`` with the
    reason (`ccbench.store.run.mark_failed`); a run its ranks closed themselves (complete,
    interrupted, failed by the watchdog) is left as it is.
    """
    from ccbench.store.run import mark_failed

    fd, record = tempfile.mkstemp(prefix="ccbench-run-")
    os.close(fd)
    proc = subprocess.Popen(cmd, env=dict(env, CCBENCH_RUN_RECORD=record), stdout=stdout)

    def forward(signum, frame):  # noqa: ARG001
        proc.send_signal(signum)

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = proc.wait()
        text = Path(record).read_text().strip()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        os.unlink(record)
    run_dir = Path(text) if text else None
    why = (f"killed by signal {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals()
           else f"exit code {code}")
    marked = bool(code and run_dir is not None and mark_failed(
        run_dir, f"the job ended before the run did ({why}): a rank crashed, was killed or aborted"))
    return Job(code, run_dir, marked, why)
