"""Batch logs stay plain: rank 0 draws a progress bar and colours only when a person is watching.

`ccbench launch` tells the ranks explicitly (``CCBENCH_TERMINAL`` 1 or 0, from its own stdout), since
Open MPI gives the ranks a pseudo-terminal even when the job writes to a file; without it, a Slurm job
(``SLURM_JOB_ID``) prints plain lines.  Tested without Open MPI: the console's decision with the
environment and a fake terminal, the launcher's setting, and one real sweep on a pseudo-terminal.
"""

import io
import os
import subprocess
import sys

import pytest

from ccbench.commands.common import new_console
from ccbench.measure.launcher import TERMINAL_ENV, prepare_launcher
from ccbench.measure.session import Progress

# what rich reads besides the file, and what decides here
ENV_VARS = ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "TERM",
            TERMINAL_ENV, "SLURM_JOB_ID")


class FakeTTY(io.StringIO):
    """A stdout that says it is a terminal, as the pseudo-terminal Open MPI gives its ranks does."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _console_on(stdout, monkeypatch, env: dict):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "stdout", stdout)
    return new_console()


CASES = [  # (environment, stdout is a terminal, a terminal's console expected)
    ({}, True, True),                                            # a person at a terminal, no launcher
    ({}, False, False),                                          # output to a file or a pipe
    ({TERMINAL_ENV: "0"}, True, False),                          # `ccbench launch > log` under Open MPI's pty
    ({TERMINAL_ENV: "1"}, False, True),                          # `ccbench launch` on a terminal, through pipes
    ({"SLURM_JOB_ID": "4242"}, True, False),                     # a bare mpirun in a batch job, with a pty
    ({"SLURM_JOB_ID": "4242", TERMINAL_ENV: "1"}, True, True),   # ccbench launch in salloc, on a terminal
    ({"SLURM_JOB_ID": "4242", TERMINAL_ENV: "1"}, False, True),  # the same through the launcher's pipes
    ({TERMINAL_ENV: "yes"}, True, True),                         # not 1 or 0: rich asks stdout
]


@pytest.mark.parametrize(("env", "tty", "terminal"), CASES,
                         ids=[f"{e or 'no variable'}-{'tty' if t else 'file'}" for e, t, _ in CASES])
def test_the_console_is_a_terminals_only_when_someone_watches(env, tty, terminal, clean_env):
    out = FakeTTY() if tty else io.StringIO()
    console = _console_on(out, clean_env, env)
    assert console.is_terminal is terminal
    console.print("[bold red]FAILED[/] allreduce ring 8 B")
    text = out.getvalue()
    assert ("\x1b[" in text) is terminal, text
    if not terminal:
        assert text == "FAILED allreduce ring 8 B\n"
        assert console.width == 160  # wide enough for the tables in a log


def test_columns_set_by_the_user_stand_in_a_plain_console(clean_env):
    console = _console_on(FakeTTY(), clean_env, {TERMINAL_ENV: "0", "COLUMNS": "100"})
    assert not console.is_terminal and console.width == 100


def test_a_plain_console_gives_the_progress_as_plain_lines(clean_env, capsys):
    console = _console_on(FakeTTY(), clean_env, {TERMINAL_ENV: "0"})
    progress = Progress(2, console)
    assert progress.bar is None
    progress.done("allreduce/ring 8 B", "allreduce ring 8 B ok", True)
    progress.done("allreduce/ring 16 B", "allreduce ring 16 B ok", True)
    progress.stop()
    lines = sys.stdout.getvalue().splitlines()
    assert lines == ["[1/2] allreduce ring 8 B ok", "[2/2] allreduce ring 16 B ok"]


# -- the launcher says it, 1 or 0 ----------------------------------------------------------


@pytest.mark.parametrize(("tty", "told"), [(True, "1"), (False, "0")])
def test_the_launcher_tells_the_ranks_whether_stdout_is_a_terminal(tty, told, clean_env):
    clean_env.setattr(sys, "stdout", FakeTTY() if tty else io.StringIO())
    _, _, env, _ = prepare_launcher(None)
    assert env[TERMINAL_ENV] == told
    assert ("COLUMNS" in env) is tty


@pytest.mark.parametrize("given", ["0", "1"])
def test_a_value_the_user_set_stands(given, clean_env):
    clean_env.setenv(TERMINAL_ENV, given)
    clean_env.setattr(sys, "stdout", FakeTTY() if given == "0" else io.StringIO())
    _, _, env, _ = prepare_launcher(None)
    assert env[TERMINAL_ENV] == given


def test_the_launcher_replaces_a_meaningless_value(clean_env):
    clean_env.setenv(TERMINAL_ENV, "maybe")
    clean_env.setattr(sys, "stdout", io.StringIO())
    assert prepare_launcher(None)[2][TERMINAL_ENV] == "0"


# -- a real sweep on a pseudo-terminal -----------------------------------------------------


def _sweep_on_a_pty(tmp_path, env: dict) -> str:
    """What a one-rank `ccbench run` writes to a pseudo-terminal (as Open MPI's ranks have) with `env`."""
    master, slave = os.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    base["CCBENCH_LAUNCHED"] = "1"  # one singleton rank, vouched for (ccbench run refuses one no launcher started)
    cmd = [sys.executable, "-m", "ccbench", "run", "-C", "barrier,bcast", "-s", "8", "--warmup", "1",
           "--min-reps", "2", "--max-reps", "3", "--results-dir", str(tmp_path / "results")]
    proc = subprocess.Popen(cmd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=dict(base, **env),
                            cwd=tmp_path)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("env", [{TERMINAL_ENV: "0"}, {"SLURM_JOB_ID": "4242"}], ids=["told 0", "slurm job"])
def test_a_sweep_on_a_pseudo_terminal_writes_plain_lines(env, tmp_path):
    text = _sweep_on_a_pty(tmp_path, env)
    assert "\x1b" not in text, repr(text[:400])
    assert "[1/2]" in text and "[2/2]" in text  # the progress, one plain line per case


def test_on_a_pseudo_terminal_with_nobody_saying_otherwise_the_bar_is_drawn(tmp_path):
    text = _sweep_on_a_pty(tmp_path, {})
    assert "\x1b[" in text  # the control: rich's progress bar and colours are what the log would get
