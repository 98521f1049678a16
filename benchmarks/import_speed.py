"""How fast `ccbench import` reads 100 MB files of other tools, and how much memory it takes, measured here.

    python benchmarks/import_speed.py [--mb 100] [--only osu,csv] [--keep DIR]

Writes, in a temporary folder, an OSU file (``osu_allreduce -f``: one size per line, about 1.3 million lines
at 100 MB) and a ccbench CSV of raw samples (``launch`` and ``sample`` columns: 64 cases x 3 launches, about
1.9 million lines), of about --mb MB each and valid rows only.  Each is imported through the public command
in a fresh process (``python -m ccbench import FILE --format F``), and the script reports, for that process
alone (``os.wait4``): its wall time, its CPU time (user + system: the figure that holds when the machine is
shared; the load average at the start is printed) and its peak resident memory (``ru_maxrss``).  Goal: at
most 30 s and 500 MB (10^6 bytes) per 100 MB, wall time.

An import streams: every line is checked as it is read and its row written into a folder aside, fsynced
once and renamed into place when complete; an OSU row is written from a template, never built as an object.
A CSV of samples in launches also pools each case over its launches as a replicated run's rows are
(``ccbench.store.launches.pool_launches``: a 1,000-replicate two-stage bootstrap per case, each resampled
launch's median drawn from its exact law), which the import cannot start before the last line is read; the
script times that bootstrap apart, on 8 cases of the same shape, and prints it for the 64 beside the CSV's
figures.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S, GOAL_MB = 30.0, 500.0
CSV_CASES, CSV_LAUNCHES = 64, 3


def write_osu(path: Path, mb: float) -> int:
    """An OSU allreduce output (``-f``) of about `mb` MB: distinct sizes, one line each; its line count."""
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
    """A CSV of about `mb` MB: 64 cases x 3 launches x as many samples as it takes, interleaved; its line count."""
    target = int(mb * 1e6)
    size, n = 0, 0
    per = CSV_CASES * CSV_LAUNCHES
    with open(path, "w") as f:
        f.write("collective,algorithm,nranks,nbytes,time_s,dtype,op,launch,sample\n")
        while size < target:
            case, launch, sample = n % CSV_CASES, (n // CSV_CASES) % CSV_LAUNCHES + 1, n // per
            line = f"allreduce,ring,4,{8 * (case + 1)},{1e-6 * (1 + case) * (1 + n % 7 * 0.01)!r},float32,sum," \
                   f"{launch},{sample}\n"
            f.write(line)
            size += len(line)
            n += 1
    return n


def measure(path: Path, fmt: str, results: Path) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s, peak MB, exit code, last line printed) of one ``ccbench import`` in a fresh process."""
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ccbench", "import", str(path), "--format", fmt,
                                 "--results-dir", str(results)], stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource use, not the script's
        took = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        said = out.read().strip().splitlines()
    # ru_maxrss is in KiB on Linux
    return (took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024 / 1e6, proc.returncode,
            said[-1] if said else "")


def bootstrap_s(lines: int) -> float:
    """Seconds the import's pooling of the CSV's 64 cases takes: the bootstrap of `pool_launches`, timed on 8
    cases with the CSV's samples per launch and scaled to 64."""
    import numpy as np

    from ccbench.core.replication import hierarchical_bootstrap_ci
    from ccbench.store.launches import BOOTSTRAP_REPLICATES

    rng = np.random.default_rng(0)
    per = max(1, lines // (CSV_CASES * CSV_LAUNCHES))
    cases = [[rng.uniform(1e-6, 2e-6, per) for _ in range(CSV_LAUNCHES)] for _ in range(8)]
    start = time.process_time()
    for xs in cases:
        hierarchical_bootstrap_ci(xs, n_boot=BOOTSTRAP_REPLICATES, seed=0)
    return (time.process_time() - start) * CSV_CASES / len(cases)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of each file in MB (default 100)")
    ap.add_argument("--only", default="osu,csv", help="the inputs: osu, csv or both (default osu,csv)")
    ap.add_argument("--keep", type=Path, help="keep the files and runs in this folder")
    args = ap.parse_args(argv)
    where = args.keep or Path(tempfile.mkdtemp(prefix="ccbench-import-speed-"))
    where.mkdir(parents=True, exist_ok=True)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    rows = []
    inputs = {"osu": (write_osu, "osu_allreduce.txt"), "csv": (write_csv, "timings.csv")}
    for fmt in args.only.split(","):
        writer, name = inputs[fmt]
        path = where / name
        lines = writer(path, args.mb)
        took, cpu, peak, code, said = measure(path, fmt, where / f"results-{fmt}")
        mb = path.stat().st_size / 1e6
        ok = code == 0 and took <= GOAL_S * mb / 100.0 and peak <= GOAL_MB
        rows.append((fmt, mb, lines, took, cpu, peak, code, ok, said))
    print(f"{'format':8}{'MB':>8}{'lines':>12}{'wall s':>9}{'CPU s':>9}{'peak MB':>9}  goal (30 s and 500 MB per "
          f"100 MB)")
    for fmt, mb, lines, took, cpu, peak, code, ok, said in rows:
        print(f"{fmt:8}{mb:8.1f}{lines:12d}{took:9.1f}{cpu:9.1f}{peak:9.0f}  "
              + ("met" if ok else f"missed (exit code {code}: {said})" if code else "missed"))
        if fmt == "csv":
            print(f"{'':8}  of which pooling {CSV_CASES} cases over {CSV_LAUNCHES} launches (1,000-replicate "
                  f"bootstrap, timed apart): {bootstrap_s(lines):.1f} CPU s")
    if args.keep is None:
        import shutil

        shutil.rmtree(where, ignore_errors=True)
    return 0 if all(r[7] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
