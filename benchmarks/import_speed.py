"""How fast `ccbench import` reads large files of other tools, and how much memory it takes, measured here.

    python benchmarks/import_speed.py [--mb 100] [--keep DIR]

Writes an OSU file (``osu_allreduce -f`` format, one size per line) and a ccbench CSV (one sample per
line, with ``launch`` and ``sample`` columns) of about --mb MB each, then imports each in a fresh
process (``python -m ccbench import``) and reports the wall time and the peak resident memory of that
process (its own ``resource.getrusage(RUSAGE_SELF).ru_maxrss``).  Goal: at most 30 s and 500 MB per 100 MB
file on this machine (2 cores).  An import is checked at the door and written aside, then renamed into
place; it fsyncs its tables once, not twice per row.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S, GOAL_MB = 30.0, 500.0


def write_osu(path: Path, mb: float) -> int:
    """An OSU allreduce output of about `mb` MB: distinct sizes, one line each."""
    lines, size, n = ["# OSU MPI Allreduce Latency Test v7.4", "# Number of processes: 4", "# Datatype: MPI_CHAR.",
                      "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations"], 0, 0
    target = int(mb * 1e6)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
        while size < target:
            n += 1
            line = f"{4 * n:<12d}{3.0 + n % 97 * 0.01:>16.2f}{2.9:>18.2f}{3.4:>18.2f}{1000:>12d}\n"
            f.write(line)
            size += len(line)
    return n


def write_csv(path: Path, mb: float) -> int:
    """A CSV of about `mb` MB: 64 cases x 3 launches x as many samples as it takes."""
    target = int(mb * 1e6)
    size, n = 0, 0
    with open(path, "w") as f:
        f.write("collective,algorithm,nranks,nbytes,time_s,dtype,op,launch,sample\n")
        while size < target:
            case, launch, sample = n % 64, (n // 64) % 3 + 1, n // 192
            line = f"allreduce,ring,4,{8 * (case + 1)},{1e-6 * (1 + case) * (1 + n % 7 * 0.01)!r},float32,sum," \
                   f"{launch},{sample}\n"
            f.write(line)
            size += len(line)
            n += 1
    return n


#: The import in a fresh process that prints its own peak resident memory (kB, Linux's ru_maxrss) last.
_CHILD = ("import resource, sys\nfrom ccbench.cli import main\ncode = 0\ntry:\n    main(sys.argv[1:])\n"
          "except SystemExit as exc:\n    code = exc.code or 0\n"
          "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(code)")


def measure(path: Path, fmt: str, results: Path) -> tuple[float, float, int]:
    """(seconds, peak MB of the importing process, exit code) of one ``ccbench import`` in a fresh process."""
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CHILD, "import", str(path), "--format", fmt, "--results-dir",
                        str(results)], capture_output=True, text=True)
    took = time.perf_counter() - start
    lines = r.stderr.strip().splitlines()
    if r.returncode:
        print("\n".join(lines[:-1]), file=sys.stderr)
    return took, int(lines[-1]) / 1024.0 if lines and lines[-1].isdigit() else float("nan"), r.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of each file in MB (default 100)")
    ap.add_argument("--keep", type=Path, help="keep the files and runs in this folder")
    args = ap.parse_args(argv)
    where = args.keep or Path(tempfile.mkdtemp(prefix="ccbench-import-speed-"))
    where.mkdir(parents=True, exist_ok=True)
    rows = []
    for fmt, writer, name in (("osu", write_osu, "osu_allreduce.txt"), ("csv", write_csv, "timings.csv")):
        path = where / name
        lines = writer(path, args.mb)
        took, peak, code = measure(path, fmt, where / f"results-{fmt}")
        mb = path.stat().st_size / 1e6
        ok = code == 0 and took <= GOAL_S * mb / 100.0 and peak <= GOAL_MB
        rows.append((fmt, mb, lines, took, peak, code, ok))
    print(f"{'format':8}{'MB':>8}{'lines':>12}{'seconds':>10}{'peak MB':>10}  goal (30 s and 500 MB per 100 MB)")
    for fmt, mb, lines, took, peak, code, ok in rows:
        print(f"{fmt:8}{mb:8.1f}{lines:12d}{took:10.1f}{peak:10.0f}  "
              + ("met" if ok else f"missed (exit code {code})" if code else "missed"))
    if args.keep is None:
        import shutil

        shutil.rmtree(where, ignore_errors=True)
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
