"""How close ccbench's timing loops come to a C loop and a bare mpi4py loop, measured on this machine.

    python benchmarks/harness_fidelity.py [--quick] [--rounds N] [--results-dir DIR]

In one invocation, at 2 and 4 ranks, for allreduce, bcast and allgather (float32, sum) at 8 B and
64 KiB (ccbench's sizes: allgather's is the whole receive buffer), it times the same calls six ways:

1. a C reference loop built here with the MPI's own ``mpicc``, OSU Micro-Benchmarks' method
   (``osu_allreduce.c`` and ``osu_util_mpi.c``, OMB 7.4: MPI_Barrier, MPI_Wtime, one call, MPI_Wtime;
   each rank's mean, then its average and maximum over ranks) and a back-to-back variant (a timer
   around K calls, the time / K: IMB-MPI1's and nccl-tests' batches);
2. a bare mpi4py loop of the same two shapes (``comm.Allreduce(s, r, MPI.SUM)`` between
   ``time.perf_counter`` readings, nothing else);
3. ccbench itself (``ccbench launch``): ``--timing per-call`` and ``--timing batched:K``, each with
   ``--loop python`` and ``--loop compiled``.

Every loop keeps each sample's maximum over ranks (ccbench's definition of a sample) and the
figure compared is the median of those; the C loop also prints OSU's average of per-rank means.
The launches of one round run back to back, the rounds one after the other (A B C ... A B C ...),
and every figure is the median over rounds (launch-to-launch variation is large here:
docs/measuring.md, "Launches").  The thread level is the same for all (single where the ranks
fit the cores, multiple where they oversubscribe them, as ccbench's ``auto`` chooses), and so is
the placement: every loop binds each rank to a core where the ranks fit the cores (hydra's
``-bind-to core``, ccbench's ``--bind core``) and none binds where they oversubscribe them.
Unbound, two ranks on two cores sometimes share one, and a launch then runs 2-2.5x slower
at every size (measured here: the compiled loop's 8 B allreduce at 0.64 and 1.54 us in two
launches), which no number of rounds averages away.

Goals (printed beside the ratios): ccbench's Python per-call loop at most 0.1 us above the bare
mpi4py loop at 8 B; its batched loop within 10% of mpi4py back-to-back; the compiled loop within
1.3x of the C loop at 8 B, per call and batched; at 64 KiB the compiled loop within 1.05x of the
C loop's median of maxima over ranks.

Everything lands in DIR/harness_fidelity_<time>/: the C source and binary, the bare loop, the
ccbench runs (runs/), the launchers' output (launch.log) and the figures as fidelity.txt (the
printed table), fidelity.csv (one line per case and loop) and fidelity.json.  About 3 minutes
on 2 cores with the defaults, about 1 with --quick.
"""

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COLLS = ("allreduce", "bcast", "allgather")
SIZES = (8, 65536)
RANKS = (2, 4)
BATCH = 10
LOOPS = ("c_per_call", "c_b2b", "mpi4py_per_call", "mpi4py_b2b", "ccb_py_per_call", "ccb_py_batched",
         "ccb_c_per_call", "ccb_c_batched")
CCBENCH_RUNS = {"ccb_py_per_call": ("per-call", "python"), "ccb_py_batched": (f"batched:{BATCH}", "python"),
                "ccb_c_per_call": ("per-call", "compiled"), "ccb_c_batched": (f"batched:{BATCH}", "compiled")}

C_REFERENCE = r"""
/* OSU Micro-Benchmarks' collective latency method (osu_allreduce.c, OMB 7.4): a barrier, then
 * MPI_Wtime around one call (K = 1) or around K back-to-back calls (IMB / nccl-tests), per rank.
 * Usage: ref LEVEL ITERS WARMUP K COLL:COUNT...  (COLL 0 allreduce, 1 bcast, 2 allgather;
 * COUNT elements per buffer, or per block of allgather).  Rank 0 prints per case and K:
 * coll count K median-of-max-over-ranks mean-over-ranks-of-rank-means max-over-ranks-of-rank-means */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void call(int coll, float *s, float *r, int n, MPI_Comm comm)
{
    if (coll == 0) MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, comm);
    else if (coll == 1) MPI_Bcast(s, n, MPI_FLOAT, 0, comm);
    else MPI_Allgather(s, n, MPI_FLOAT, r, n, MPI_FLOAT, comm);
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, atoi(argv[1]), &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = atoi(argv[2]), warm = atoi(argv[3]), batch = atoi(argv[4]);
    double *local = malloc(sizeof(double) * iters), *mx = malloc(sizeof(double) * iters);
    for (int a = 5; a < argc; ++a) {
        int coll, n;
        sscanf(argv[a], "%d:%d", &coll, &n);
        float *s = calloc((size_t)n * size + 1, sizeof(float)), *r = calloc((size_t)n * size + 1, sizeof(float));
        int ks[2] = {1, batch};
        for (int m = 0; m < (batch > 1 ? 2 : 1); ++m) {
            int k = ks[m];
            for (int w = 0; w < warm; ++w) call(coll, s, r, n, MPI_COMM_WORLD);
            double sum = 0;
            for (int i = 0; i < iters; ++i) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int j = 0; j < k; ++j) call(coll, s, r, n, MPI_COMM_WORLD);
                local[i] = (MPI_Wtime() - t0) / k;
                sum += local[i];
            }
            double mean = sum / iters, avg, worst;
            MPI_Reduce(local, mx, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mean, &avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            MPI_Reduce(&mean, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                qsort(mx, iters, sizeof(double), cmp);
                double med = iters % 2 ? mx[iters / 2] : (mx[iters / 2 - 1] + mx[iters / 2]) / 2;
                printf("%d %d %d %.9e %.9e %.9e\n", coll, n, k, med, avg / size, worst);
            }
        }
        free(s);
        free(r);
    }
    MPI_Finalize();
    return 0;
}
"""

BARE_LOOP = r'''
"""A bare mpi4py loop: the C reference's method with mpi4py's buffer calls (argv as the C loop's)."""
import sys
import time

import mpi4py

mpi4py.rc.thread_level = ["single", "funneled", "serialized", "multiple"][int(sys.argv[1])]
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
iters, warm, batch = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
local = np.empty(iters)
mx = np.empty(iters)
now, barrier = time.perf_counter, comm.Barrier
for spec in sys.argv[5:]:
    coll, n = (int(x) for x in spec.split(":"))
    s, r = np.zeros(n * size + 1, np.float32), np.zeros(n * size + 1, np.float32)
    f, args = [(comm.Allreduce, (s[:n], r[:n], MPI.SUM)), (comm.Bcast, (s[:n], 0)),
               (comm.Allgather, (s[:n], r[:n * size]))][coll]
    for k in sorted({1, batch}):
        for _ in range(warm):
            f(*args)
        for i in range(iters):
            barrier()
            t0 = now()
            for _ in range(k):
                f(*args)
            local[i] = (now() - t0) / k
        comm.Reduce(local, mx, MPI.MAX, root=0)
        mean = float(local.mean())
        avg, worst = comm.reduce(mean, MPI.SUM, root=0), comm.reduce(mean, MPI.MAX, root=0)
        if rank == 0:
            print(coll, n, k, f"{np.median(mx):.9e}", f"{avg / size:.9e}", f"{worst:.9e}", flush=True)
'''


class Bench:
    """Runs the launches of the benchmark into one directory and logs them."""

    def __init__(self, root: Path, iters: int, warmup: int) -> None:
        self.root, self.iters, self.warmup = root, iters, warmup
        self.runs = root / "runs"
        self.runs.mkdir(parents=True)
        self.log = root / "launch.log"
        bindir = Path(sys.executable).parent
        self.mpiexec = str(bindir / "mpiexec") if (bindir / "mpiexec").exists() else shutil.which("mpiexec")
        self.mpicc = os.environ.get("MPICC") or (str(bindir / "mpicc") if (bindir / "mpicc").exists()
                                                 else shutil.which("mpicc"))
        if not self.mpiexec or not self.mpicc:
            sys.exit("harness_fidelity: needs mpiexec and mpicc (pip install mpich)")
        self.ref = root / "ref"
        (root / "ref.c").write_text(C_REFERENCE)
        subprocess.run([self.mpicc, "-O2", "-o", str(self.ref), str(root / "ref.c")], check=True)
        (root / "bare_loop.py").write_text(BARE_LOOP)
        self.commands: list[dict] = []

    def _run(self, cmd: list[str], what: str) -> str:
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        with open(self.log, "a") as log:
            log.write(f"\n$ {' '.join(cmd)}\n")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        with open(self.log, "a") as log:
            log.write(r.stdout + r.stderr)
        if r.returncode:
            sys.exit(f"harness_fidelity: {what} failed (exit code {r.returncode}); its output is in {self.log}")
        self.commands.append({"what": what, "command": cmd, "seconds": round(time.monotonic() - t0, 2),
                              "load_avg_1min_before": load})
        print(f"  {what}: {time.monotonic() - t0:.0f} s (load {load:.1f})", flush=True)
        return r.stdout

    def direct(self, kind: str, nranks: int, level: int, cases: list[str]) -> dict:
        """The C reference or the bare mpi4py loop: {(coll, size, K): (median of max, OSU avg, OSU max)}."""
        prog = [str(self.ref)] if kind == "c" else [sys.executable, str(self.root / "bare_loop.py")]
        bind = ["-bind-to", "core"] if _fits(nranks) else []  # as ccbench's --bind auto does (hydra's syntax)
        out = self._run([self.mpiexec, "-n", str(nranks), *bind, *prog, str(level), str(self.iters), str(self.warmup),
                         str(BATCH), *cases], f"{kind} loop, {nranks} ranks")
        got = {}
        for line in out.split("\n"):
            parts = line.split()
            if len(parts) == 6:
                got[(int(parts[0]), int(parts[1]), int(parts[2]))] = tuple(float(x) for x in parts[3:])
        return got

    def ccbench(self, nranks: int, level: str, timing: str, loop: str) -> dict:
        """One ccbench launch: {(collective, nbytes): median_s} (the median of maxima over ranks)."""
        from ccbench.store.run import open_run

        tag = f"np{nranks}-{timing.replace(':', '')}-{loop}"
        before = set(self.runs.iterdir())
        self._run([sys.executable, "-m", "ccbench", "launch", "-n", str(nranks), "--oversubscribe",
                   "-C", ",".join(COLLS),
                   "-s", ",".join(str(s) for s in SIZES), "-t", "float32", "--op", "sum", "-i", str(self.iters),
                   "-x", str(self.warmup), "--timing", timing, "--loop", loop, "--thread-level", level,
                   "--bind", "core" if _fits(nranks) else "none", "--order", "planned",
                   "--results-dir", str(self.runs), "--tag", tag, "--no-show"],
                  f"ccbench {timing} --loop {loop}, {nranks} ranks")
        (run,) = [d for d in set(self.runs.iterdir()) - before if d.is_dir()]
        rows = open_run(run).rows
        if any(r.loop != loop for r in rows):
            sys.exit(f"harness_fidelity: {run} has rows not timed by the {loop} loop")
        return {(r.collective, r.nbytes): r.median_s for r in rows}


def _fits(nranks: int) -> bool:
    """Whether the ranks fit the cores: then every loop binds each rank to a core, else none binds."""
    return nranks <= (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _cases(nranks: int) -> tuple[list[str], dict]:
    """The C/bare loops' COLL:COUNT arguments and {(code, count): (collective, ccbench nbytes)}."""
    from ccbench.core.collectives import COLLECTIVES

    args, names = [], {}
    for code, coll in enumerate(COLLS):
        for size in SIZES:
            c = COLLECTIVES[coll]
            count = c.count_for(size, 4, nranks)
            args.append(f"{code}:{count}")
            names[(code, count)] = (coll, c.nbytes_for(count, 4, nranks))
    return args, names


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.3f}"


def _verdicts(f: dict, size: int) -> list[tuple[str, float, float, bool]]:
    """(goal, value, limit, met) of one case's figures `f` (seconds)."""
    out = []
    if size < 1024:  # the 8 B cases (16 B for allgather at 4 ranks: one float32 per rank)
        out.append(("py per-call - mpi4py (us) <= 0.1", (f["ccb_py_per_call"] - f["mpi4py_per_call"]) * 1e6, 0.1))
        out.append(("compiled per-call / C <= 1.3", f["ccb_c_per_call"] / f["c_per_call"], 1.3))
        out.append(("compiled batched / C b2b <= 1.3", f["ccb_c_batched"] / f["c_b2b"], 1.3))
    else:
        out.append(("compiled per-call / C <= 1.05", f["ccb_c_per_call"] / f["c_per_call"], 1.05))
    out.append(("py batched / mpi4py b2b <= 1.10", f["ccb_py_batched"] / f["mpi4py_b2b"], 1.10))
    return [(g, v, lim, v <= lim) for g, v, lim in out]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one round, fewer iterations (about 1 minute)")
    p.add_argument("--rounds", type=int, help="rounds of every launch (default 3, 1 with --quick)")
    p.add_argument("--iterations", type=int, help="samples per case and loop (default 200, 100 with --quick)")
    p.add_argument("--results-dir", default="results", help="where harness_fidelity_<time>/ is made (default results)")
    a = p.parse_args()
    rounds = a.rounds or (1 if a.quick else 3)
    iters = a.iterations or (100 if a.quick else 200)
    root = Path(a.results_dir) / time.strftime("harness_fidelity_%Y%m%d-%H%M%S")
    bench = Bench(root, iters, warmup=50)
    cores = len(os.sched_getaffinity(0))
    raw: dict = {}  # (nranks, collective, nbytes, loop) -> [median per round]
    osu: dict = {}  # (nranks, collective, nbytes, loop) -> [(avg, max) per round] for the C and bare loops
    t_start = time.monotonic()
    for rnd in range(1, rounds + 1):
        for nranks in RANKS:
            level_name = "single" if nranks <= cores else "multiple"
            level = {"single": 0, "multiple": 3}[level_name]
            print(f"round {rnd}/{rounds}, {nranks} ranks, thread level {level_name}", flush=True)
            args, names = _cases(nranks)
            for kind in ("c", "mpi4py"):
                for (code, count, k), (med, avg, worst) in bench.direct(kind, nranks, level, args).items():
                    coll, nbytes = names[(code, count)]
                    key = (nranks, coll, nbytes, f"{kind}_{'per_call' if k == 1 else 'b2b'}")
                    raw.setdefault(key, []).append(med)
                    osu.setdefault(key, []).append((avg, worst))
            for name, (timing, loop) in CCBENCH_RUNS.items():
                for (coll, nbytes), med in bench.ccbench(nranks, level_name, timing, loop).items():
                    raw.setdefault((nranks, coll, nbytes, name), []).append(med)
    figures = {k: statistics.median(v) for k, v in raw.items()}
    cases = sorted({k[:3] for k in figures}, key=lambda c: (c[0], COLLS.index(c[1]), c[2]))
    head = (f"{'ranks':>5} {'collective':<10} {'bytes':>6} " + " ".join(f"{n:>15}" for n in LOOPS)
            + f" {'C OSU avg':>10}")
    lines = ["median of per-sample maxima over ranks, us (median over rounds)", head]
    verdicts, table_rows = [], []
    for nranks, coll, nbytes in cases:
        f = {loop: figures.get((nranks, coll, nbytes, loop)) for loop in LOOPS}
        avg = statistics.median(a for a, _ in osu[(nranks, coll, nbytes, "c_per_call")])
        lines.append(f"{nranks:>5} {coll:<10} {nbytes:>6} " + " ".join(f"{_us(f[n]):>15}" for n in LOOPS)
                     + f" {_us(avg):>10}")
        table_rows.append({"nranks": nranks, "collective": coll, "nbytes": nbytes,
                           **{f"{n}_s": f[n] for n in LOOPS}, "c_osu_avg_s": avg,
                           "c_osu_max_s": statistics.median(w for _, w in osu[(nranks, coll, nbytes, "c_per_call")]),
                           "rounds": len(raw[(nranks, coll, nbytes, "c_per_call")])})
        for goal, value, limit, met in _verdicts(f, nbytes):
            verdicts.append({"nranks": nranks, "collective": coll, "nbytes": nbytes, "goal": goal,
                             "value": value, "limit": limit, "met": met})
    lines += ["", "goals", f"{'ranks':>5} {'collective':<10} {'bytes':>6} {'goal':<36} {'value':>8}  met"]
    for v in verdicts:
        lines.append(f"{v['nranks']:>5} {v['collective']:<10} {v['nbytes']:>6} {v['goal']:<36} "
                     f"{v['value']:>8.3f}  {'yes' if v['met'] else 'NO'}")
    met = sum(v["met"] for v in verdicts)
    lines.append(f"\n{met} of {len(verdicts)} goals met; {rounds} rounds, {iters} samples per case and loop, "
                 f"K = {BATCH}, {time.monotonic() - t_start:.0f} s; the machine's load is in fidelity.json")
    text = "\n".join(lines)
    print("\n" + text)
    (root / "fidelity.txt").write_text(text + "\n")
    with open(root / "fidelity.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table_rows[0]))
        w.writeheader()
        w.writerows(table_rows)
    (root / "fidelity.json").write_text(json.dumps(
        {"argv": sys.argv, "rounds": rounds, "iterations": iters, "warmup": bench.warmup, "batch": BATCH,
         "cores": cores, "cases": table_rows, "goals": verdicts,
         "per_round": [{"nranks": k[0], "collective": k[1], "nbytes": k[2], "loop": k[3], "medians_s": v}
                       for k, v in sorted(raw.items())],
         "launches": bench.commands}, indent=1) + "\n")
    print(f"wrote {root}/fidelity.txt, fidelity.csv, fidelity.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
