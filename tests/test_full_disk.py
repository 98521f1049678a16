"""A full disk ends in one line, keeps every finished row whole and leaves no temporary file (issue 26, item 6): at
e066e41 a sweep on a full disk ended in a traceback with a torn last line, run.json left 'running' and a
.run.json.tmp* file behind; an import did the same.  The disk is a small tmpfs mounted in a mount namespace of its
own (unshare -m), so nothing outside the test sees it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from runfiles import needs_mount_namespace

REPO = Path(__file__).resolve().parent.parent


def _on_small_disk(disk: Path, size: str, *argv: str) -> subprocess.CompletedProcess:
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", size, str(disk), *argv],
                          capture_output=True, text=True, cwd=REPO, timeout=240,
                          env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200"))


@needs_mount_namespace
def test_a_sweep_that_fills_the_disk_ends_in_one_line_with_whole_rows(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    listing = tmp_path / "after.json"
    # the sweep fills 96 KiB; then the same namespace lists what it left (the tmpfs is gone with it)
    code = ("import json, os, sys; d = sys.argv[1]; runs = [os.path.join(d, x) for x in os.listdir(d)]; "
            "out = {r: {f: open(os.path.join(r, f), 'rb').read().decode() for f in os.listdir(r)} for r in runs}; "
            "json.dump(out, open(sys.argv[2], 'w'))")
    r = _on_small_disk(disk, "96k", "sh", "-c",
                       f'timeout 180 {mpiexec} -n 2 {sys.executable} -m mpi4py -m ccbench run -C allreduce,bcast '
                       f'-s 8:64K -a native --min-reps 50 --max-reps 200 --budget 0.05 --results-dir {disk} '
                       f'--no-show; echo "rc=$?"; {sys.executable} -c "{code}" {disk} {listing}')
    out = r.stdout + r.stderr
    assert "rc=1" in r.stdout, out[-3000:]
    assert "Traceback" not in out and "No space left on device" in out, out[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench: error:")]
    assert len(errors) == 1 and "finished rows kept" in errors[0], out[-3000:]
    (files,) = json.loads(listing.read_text()).values()
    assert not [f for f in files if f.startswith(".run.json.tmp")], sorted(files)
    lines = files["cases.jsonl"].splitlines(keepends=True)
    assert lines and all(ln.endswith("\n") for ln in lines)  # no torn line
    rows = [json.loads(ln) for ln in lines]
    assert len(files["cases.csv"].splitlines()) == len(rows) + 1  # the header, then the same rows


@needs_mount_namespace
def test_an_import_that_fills_the_disk_keeps_nothing_and_says_so(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    src = tmp_path / "big.csv"
    src.write_text("collective,algorithm,nranks,nbytes,time_s,sample\n"
                   + "".join(f"allreduce,ring,4,8,{1e-6 * (1 + i % 7)!r},{i}\n" for i in range(20000)))
    listing = tmp_path / "after.txt"
    r = _on_small_disk(disk, "64k", "sh", "-c",
                       f"{sys.executable} -m ccbench import {src} --results-dir {disk}; echo rc=$?; "
                       f"ls -A {disk} > {listing}")
    assert "rc=2" in r.stdout, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "No space left on device; nothing was kept" in r.stderr, r.stderr
    assert listing.read_text().split() == []


@needs_mount_namespace
def test_ccbench_launch_on_a_full_disk_ends_in_the_ranks_one_line(tmp_path):
    """The ranks say the disk is full and which rows they kept; the launcher, finding run.json still 'running' and no
    room to mark it failed, said a second error (the run keeps its last state: a resume may take it over)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    r = _on_small_disk(disk, "96k", "sh", "-c",
                       f"timeout 180 {sys.executable} -m ccbench launch -n 2 -C allreduce,bcast -s 8:64K -a native "
                       f"--min-reps 50 --max-reps 200 --budget 0.05 --results-dir {disk} --no-show; echo rc=$?")
    out = r.stdout + r.stderr
    assert "rc=1" in r.stdout and "Traceback" not in out, out[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench: error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "finished rows kept" in errors[0], out
