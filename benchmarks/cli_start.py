"""How long a person waits for `ccbench --help` and the other commands that measure nothing, measured here.

    python benchmarks/cli_start.py [--runs 10]

Each command runs `--runs` times in a fresh interpreter (``python -m ccbench ...``: the path a shell takes),
and the median wall time is reported beside ``python -c pass`` -- the interpreter's own start, measured
side by side in the same run, so the figure that is ccbench's is the difference.  Goal: ``--help`` in under
0.2 s (the median).  What keeps it fast: the command modules import numpy, rich tables, the analyses and
mpi4py inside the functions that need them, never at module level (``ccbench/cli.py``).
"""

import argparse
import statistics
import subprocess
import sys
import time

GOAL_S = 0.2
COMMANDS = (["--help"], ["launch", "--help"], ["list", "--help"], ["configs"])


def median_wall_s(argv: list[str], runs: int) -> float:
    """The median wall time of `runs` fresh runs of ``python argv``."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    bare = median_wall_s(["-c", "pass"], args.runs)
    print(f"python -c pass: {bare:.3f} s (median of {args.runs})")
    for cmd in COMMANDS:
        t = median_wall_s(["-m", "ccbench", *cmd], args.runs)
        print(f"ccbench {' '.join(cmd)}: {t:.3f} s (median of {args.runs}; {t - bare:.3f} s beyond the interpreter)")
    help_s = median_wall_s(["-m", "ccbench", "--help"], args.runs)
    ok = help_s < GOAL_S
    print(f"goal: ccbench --help under {GOAL_S} s: {'met' if ok else 'missed'} ({help_s:.3f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
