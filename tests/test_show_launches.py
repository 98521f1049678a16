"""`ccbench show` and `ccbench report` of runs with several launches: launch columns, header, launch-level verdicts.

One real replicated sweep (``ccbench launch -n 2 ... --launches 3``, started with subprocess
like tests/test_cli.py; plain pytest, no MPI test marker) and replicated workload runs built
from the stored single-launch runs in tests/data: each stored row's samples are split into
three launches, each launch scaled by its own factor, and pooled by
``ccbench.store.launches.pool_launches`` as ``ccbench launch --launches 3`` pools them.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from runfiles import derived

from ccbench.analysis.fastest import fastest_per_variant, launch_variation
from ccbench.cli import main
from ccbench.store.launches import LAUNCH_SPREAD, pool_launches
from ccbench.store.results import RunWriter
from ccbench.store.run import open_run
from ccbench.store.workload_rows import WORKLOAD_COLUMNS

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
WIDTH = 160

#: Launch effects (multiplicative) of the three made-up launches: large enough to flag launch_spread.
FACTORS = (1.0, 1.6, 0.7)


def _ccbench(capsys, *argv: str) -> str:
    """What `ccbench ARGV` prints (in-process; output to a pipe: 160 columns, no colour)."""
    try:
        main(list(argv))
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr()
    return capsys.readouterr().out


def _replicate(src: Path, dst: Path, factors=FACTORS) -> Path:
    """A copy of the stored run `src` as if measured in len(factors) launches (see the module docstring)."""
    run = open_run(src)
    dst.mkdir(parents=True)
    meta = {k: v for k, v in run.meta.items() if k not in ("schema", "status")}
    meta.update(launches=len(factors), order_seed=7)
    w = RunWriter(dst, meta, columns=WORKLOAD_COLUMNS if run.kind == "workload" else None)
    for r in run.rows:
        x = np.asarray(r.samples_s)
        blocks = []
        for i, (chunk, f) in enumerate(zip(np.array_split(x, len(factors)), factors, strict=True)):
            s = tuple(float(v) for v in chunk * f)
            blocks.append((i + 1, dataclasses.replace(r, samples_s=s, samples=len(s), median_s=float(np.median(s)))))
        w.append(pool_launches(blocks))
    w.update(status=run.meta.get("status", "complete"))
    w.close()
    return dst


@pytest.fixture
def plain_terminal(monkeypatch):
    for var in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "CCBENCH_TERMINAL", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def _flat(text: str) -> str:
    """`text` with every run of white space (line breaks of wrapped notes included) one space."""
    return " ".join(text.split())


def _widest(text: str) -> int:
    return max(len(line.rstrip()) for line in text.splitlines())


def _launch(tmp_path: Path, *args: str) -> Path:
    """`ccbench launch ARGS` into tmp_path (a subprocess, as tests/test_cli.py runs it); the run it wrote."""
    env = dict(os.environ, COLUMNS=str(WIDTH))
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", *args, "--results-dir", str(tmp_path),
                        "--no-show"], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    return run


def _rows_of(text: str, title: str) -> list[list[str]]:
    """The cells of the rows of the rich table titled `title` (first line of each row)."""
    block = text.split(title, 1)[1]
    out = []
    for line in block.splitlines()[1:]:
        if line.startswith("└"):
            break
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0]:
            out.append(cells)
    return out


def _header(text: str, title: str) -> list[str]:
    block = text.split(title, 1)[1]
    line = next(ln for ln in block.splitlines() if ln.startswith("┃"))
    return [c.strip() for c in line.split("┃")[1:-1]]


def test_show_and_report_of_a_replicated_sweep(tmp_path, capsys, plain_terminal):
    """A real 3-launch sweep: the header says what its medians and intervals are, every case shows its launches
    and the CVs between and within them, the fastest per size is paired by launch."""
    run = _launch(tmp_path, "-n", "2", "-C", "allreduce", "-a", "native,ring", "-s", "8:4K:8", "--launches", "3",
                  "--min-reps", "10", "--budget", "0.05")
    rows = open_run(run).rows
    assert rows and all(r.n_launches == 3 for r in rows)
    seed = json.loads((run / "run.json").read_text())["order_seed"]
    out = _ccbench(capsys, "show", str(run))
    assert (f"3 launches, case order seed {seed}: medians are geometric means of the launches' medians; 95% CIs "
            "are over launches (two-stage bootstrap)") in out
    title = "allreduce at 2 ranks - size"
    assert _header(out, title)[7:10] == ["launches", "between", "within"]
    shown = _rows_of(out, title)
    assert len(shown) == len(rows)
    for cells in shown:
        r = next(r for r in rows if (r.algorithm, r.nbytes) == (cells[0], _size(cells[1])))
        vc = launch_variation(r)
        assert cells[7] == "3" and cells[8] == _cv(vc.between_cv) and cells[9] == _cv(vc.within_cv)
    spread = sum(LAUNCH_SPREAD in r.flags for r in rows)
    assert f"{spread} of {len(rows)} cases flagged {LAUNCH_SPREAD}" in _flat(out)
    assert _widest(out) <= WIDTH

    out = _ccbench(capsys, "report", str(run))
    assert "3 launches, case order seed" in out
    launch_title = "allreduce at 2 ranks: launch to launch"
    assert _header(out, launch_title) == ["algorithm", "size", "median", "95% CI", "launches", "between", "within",
                                          "flag"]
    assert len(_rows_of(out, launch_title)) == len(rows)
    for cells in _rows_of(out, launch_title):
        r = next(r for r in rows if (r.algorithm, r.nbytes) == (cells[0], _size(cells[1])))
        assert cells[7] == (LAUNCH_SPREAD if LAUNCH_SPREAD in r.flags else "")
    assert "fastest per size: allreduce at 2 ranks, float32 sum (runner-up compared at the launch level)" in out
    assert "paired by launch, K=3: the two shared their launches" in _flat(out)
    assert _widest(out) <= WIDTH
    md = (derived(run) / "report" / "report.md").read_text()
    assert "### Launch to launch" in md and "brackets: 95% CI over launches (two-stage bootstrap" in md
    assert "| launches | 3, each a separate job with its own case order" in md


def _size(text: str) -> int:
    from ccbench.core.units import parse_size

    return parse_size(text.replace(" ", "").replace("iB", ""))


def _cv(v: float) -> str:
    from ccbench.present.table import fmt_cv

    return fmt_cv(v)


def test_show_of_a_single_launch_says_its_intervals_are_within_it(capsys, plain_terminal):
    out = _ccbench(capsys, "show", str(DATA / "run-np2"))
    assert "one launch: launch variation is not measured; 95% CIs are within that launch (over its samples)" in out
    assert "between" not in _header(out, "allreduce at 2 ranks - size")


@pytest.mark.parametrize("name", ["wl-ddp-np2", "wl-straggler-np2", "wl-overlap-np2"])
def test_show_and_report_of_a_replicated_workload_run(tmp_path, capsys, plain_terminal, name):
    run = _replicate(DATA / name, tmp_path / name)
    rows = open_run(run).rows
    out = _ccbench(capsys, "show", str(run))
    assert "3 launches, case order seed 7: medians are geometric means" in out
    title = {"wl-ddp-np2": "ddp at 2 ranks: launch to launch", "wl-straggler-np2": "straggler at 2 ranks",
             "wl-overlap-np2": "overlap at 2 ranks"}[name]
    head = _header(out, title)
    assert head[head.index("launches"):head.index("launches") + 3] == ["launches", "between", "within"]
    measured = [r for r in rows if r.part == -1 or r.workload in ("overlap", "straggler")]
    assert len(_rows_of(out, title)) == len(measured)
    # every launch effect here is 1.6 / 0.7, far above the samples' own spread: all are flagged
    assert all(LAUNCH_SPREAD in r.flags for r in measured)
    assert f"{len(measured)} of {len(measured)} cases flagged {LAUNCH_SPREAD}" in _flat(out)
    assert _widest(out) <= WIDTH

    out = _ccbench(capsys, "report", str(run))
    assert "3 launches, case order seed 7" in out and _widest(out) <= WIDTH
    md = (derived(run) / "report" / "report.md").read_text()
    assert "### Launch to launch" in md and "95% CI over launches" in md
    if name != "wl-overlap-np2":
        assert "paired by launch, K=3" in md
        # every candidate ran in the same three launches: the verdicts are paired by launch
        assert all(f.method == "paired by launch, K=3" for f in fastest_per_variant(rows) if f.runner_up)
