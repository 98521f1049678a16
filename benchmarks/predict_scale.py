"""How long `ccbench predict` takes at scale, and the v-collectives' share of it, measured here.

    python benchmarks/predict_scale.py [-n 1024,4096,16384] [--from tests/data/run-np4]

For each rank count, `ccbench predict --from RUN -n P -s 8:1K` (every algorithm, 8 sizes) runs in a fresh process,
three times: the default (every collective but the v-collectives), the five v-collectives (``-C`` with their
names: lock-step rounds, O(P^2) work), and alltoallv alone, whose costs read a P x P matrix of blocks (by entry,
never held).  The script reports each process's wall time, CPU time (user + system, the figure that holds on a
shared machine) and peak resident memory (``os.wait4``).  Goals on a 2-core machine, for the default and the
v-collectives together: at most 15 s wall at 4,096 ranks, and at 16,384 ranks at most 60 s and 1 GB (alltoallv's
matrix alone would take 2 GB a size).

Side by side in this process: the largest-remainder split of one alltoallv matrix at 4,096 ranks
(``ccbench.core.counts.apportion`` on a skewed distribution's repeated line) against the textbook form (a
stable sort of every remainder of the whole matrix), the same blocks; the ratio of their times is printed.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
GOAL_S = 15.0


def timed(argv: list[str]) -> tuple[float, float, float]:
    """Run `argv` quietly; its wall time (s), CPU time (s) and peak resident memory (MB)."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: nothing blocks while the process is waited on
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, use = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"predict_scale: {' '.join(argv)} failed: {err.read().decode().strip()}")
    return wall, use.ru_utime + use.ru_stime, use.ru_maxrss / 1e3


def textbook(total: int, shares: np.ndarray) -> np.ndarray:
    """Hamilton's method as written: floors, then one element to each of the largest remainders (stable sort)."""
    q, r = np.divmod(total * shares.ravel(), int(shares.sum()))
    q[np.argsort(-r, kind="stable")[:total - int(q.sum())]] += 1
    return q.reshape(shares.shape)


def split_ratio(P: int = 4096, nbytes: int = 1000) -> tuple[float, float]:
    """Seconds of apportion and of the textbook form on one alltoallv matrix at `P` ranks (best of 3 each)."""
    from ccbench.core.counts import apportion

    line = np.broadcast_to(np.arange(P, 0, -1, dtype=np.int64), (P, P))  # every rank sends rank j P - j shares
    whole = np.ascontiguousarray(line)
    total = nbytes * P + P // 3  # a total that leaves a left-over to place
    best = {}
    for name, fn, arg in (("apportion", apportion, line), ("textbook", textbook, whole)):
        runs = []
        for _ in range(3):
            t = time.perf_counter()
            out = fn(total, arg)
            runs.append(time.perf_counter() - t)
        best[name] = (min(runs), out)
    assert np.array_equal(best["apportion"][1], best["textbook"][1]), "the two splits differ"
    return best["apportion"][0], best["textbook"][0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", default="1024,4096,16384", help="rank counts (default 1024,4096,16384)")
    ap.add_argument("--from", dest="run", default=str(REPO / "tests" / "data" / "run-np4"))
    args = ap.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print(f"{'ranks':>6}  {'collectives':<14} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}")
    uneven = "allgatherv,alltoallv,gatherv,scatterv,reduce_scatterv"
    goals = {4096: (GOAL_S, float("inf")), 16384: (60.0, 1000.0)}  # wall s and peak MB, default + v-collectives
    for P in (int(x) for x in args.n.split(",")):
        seen = {}
        for what, extra in (("default", []), ("v-collectives", ["-C", uneven]), ("alltoallv", ["-C", "alltoallv"])):
            seen[what] = timed([sys.executable, "-m", "ccbench", "predict", "--from", args.run, "-n", str(P),
                                "-s", "8:1K", *extra])
            wall, cpu, mb = seen[what]
            goal = ""
            if what == "v-collectives" and P in goals:
                (w0, _, m0), limit = seen["default"], goals[P]
                goal = "  (goal met)" if w0 + wall <= limit[0] and max(m0, mb) <= limit[1] else "  (goal missed)"
            print(f"{P:>6}  {what:<14} {wall:>7.1f} {cpu:>7.1f} {mb:>8.0f}{goal}")
    fast, slow = split_ratio()
    print(f"one alltoallv matrix at 4,096 ranks split by largest remainder: {fast * 1e3:.0f} ms, the textbook "
          f"stable sort {slow * 1e3:.0f} ms ({slow / fast:.1f}x)")


if __name__ == "__main__":
    main()
