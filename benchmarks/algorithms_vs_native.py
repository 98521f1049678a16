"""Hand-written algorithms against the MPI library's own, side by side in one run.

    python benchmarks/algorithms_vs_native.py [--ranks 2,4] [--sizes 1K,64K,1M,4M]

For each rank count it launches one ccbench sweep of every algorithm of every
collective (so native and hand-written are measured by the same timing loop, in the same
launch), then prints time(algorithm) / time(native) per size from the stored rows, with
the run directory they come from.  It also measures the per-step cost of the counted
point-to-point layer against a bare mpi4py Sendrecv loop (2 ranks) and stores it.

Goals (issue 3): the best hand-written allreduce within 1.3x of native at 1 MiB and
above; the counted layer's per-step overhead under 2 us.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def overhead_worker(out: str, iters: int = 20000) -> None:
    """Under MPI (2 ranks): seconds per Sendrecv step, bare and through CountedComm."""
    import numpy as np
    from mpi4py import MPI

    from ccbench.algorithms.p2p import CountedComm

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    peer = (rank + 1) % size
    src = (rank - 1) % size
    a = np.zeros(2, dtype=np.float32)
    b = np.zeros(2, dtype=np.float32)
    cc = CountedComm(comm)
    results = {"bare": [], "counted": []}
    for _ in range(5):  # alternate to share any drift
        for kind in ("bare", "counted"):
            sendrecv = comm.Sendrecv if kind == "bare" else cc.Sendrecv
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                sendrecv(a, peer, 0, b, src, 0)
            dt = comm.allreduce(time.perf_counter() - t0, MPI.MAX)
            results[kind].append(dt / iters)
    if rank == 0:
        bare, counted = min(results["bare"]), min(results["counted"])
        doc = {
            "what": "seconds per Sendrecv step of 8 B on a ring, best of 5 rounds",
            "nranks": size, "iterations": iters, "thread_level": MPI.Query_thread(),
            "mpi_library": MPI.Get_library_version().splitlines()[0],
            "bare_s": bare, "counted_s": counted, "overhead_s": counted - bare,
            "rounds": results, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        Path(out).write_text(json.dumps(doc, indent=2) + "\n")


def _mpiexec() -> str:
    cand = Path(sys.executable).parent / "mpiexec"
    return str(cand) if cand.exists() else "mpiexec"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--sizes", default="1K,64K,1M,4M")
    p.add_argument("--budget", default="1.0")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--overhead-worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.overhead_worker:
        overhead_worker(args.overhead_worker)
        return 0

    from ccbench.core.units import format_size
    from ccbench.store.run import open_run

    root = Path(args.results_dir)
    root.mkdir(parents=True, exist_ok=True)
    report = []
    for n in [int(x) for x in args.ranks.split(",")]:
        before = set(root.iterdir())
        cmd = [_mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py", "-m", "ccbench", "run",
               "-a", "all", "-C", "all", "-s", args.sizes, "--budget", args.budget,
               "--min-reps", "30", "--results-dir", str(root), "--tag", "vs-native", "--no-show"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        run = max(set(root.iterdir()) - before, key=lambda d: d.stat().st_mtime)
        run_ = open_run(run)
        meta, rows = run_.meta, run_.rows
        native = {(r.collective, r.nbytes): r.median_s for r in rows if r.algorithm == "native"}
        report.append(f"\n## {n} ranks ({meta['mpi_library']}, thread level {meta['thread_level']}"
                      f"{', oversubscribed' if meta['oversubscribed'] else ''}) - run {run}")
        sizes = sorted({r.nbytes for r in rows if r.collective == "allreduce"})
        for coll in dict.fromkeys(r.collective for r in rows):
            algs = sorted({r.algorithm for r in rows if r.collective == coll and r.algorithm != "native"})
            if not algs:
                continue
            csizes = sorted({r.nbytes for r in rows if r.collective == coll})
            report.append(f"\n{coll}: time / native time (native median in brackets)")
            report.append("  " + "algorithm".ljust(22) + "".join(format_size(s).rjust(12) for s in csizes))
            report.append("  " + "native".ljust(22) + "".join(
                f"[{native.get((coll, s), float('nan')) * 1e6:.0f}us]".rjust(12) for s in csizes))
            for alg in algs:
                med = {r.nbytes: r.median_s for r in rows if r.collective == coll and r.algorithm == alg}
                cells = [f"{med[s] / native[(coll, s)]:.2f}" if s in med and (coll, s) in native else "-"
                         for s in csizes]
                report.append("  " + alg.ljust(22) + "".join(c.rjust(12) for c in cells))
        best = []
        for s in sizes:
            if s >= 1 << 20:
                cands = [(r.median_s / native[("allreduce", s)], r.algorithm) for r in rows
                         if r.collective == "allreduce" and r.nbytes == s and r.algorithm != "native"]
                if cands:
                    ratio, alg = min(cands)
                    best.append(f"{format_size(s)}: {alg} {ratio:.2f}x")
        if best:
            report.append(f"\nbest hand-written allreduce vs native (goal <= 1.3x): {'; '.join(best)}")
    out = root / f"p2p-overhead_{time.strftime('%Y%m%d-%H%M%S')}.json"
    subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "mpi4py", str(HERE),
                    "--overhead-worker", str(out)], check=True,
                   env=dict(os.environ, MPI4PY_RC_THREAD_LEVEL="single"))   # as the 2-rank sweep runs
    doc = json.loads(out.read_text())
    report.append(f"\ncounted p2p layer: {doc['counted_s'] * 1e6:.2f} us per Sendrecv step vs bare mpi4py "
                  f"{doc['bare_s'] * 1e6:.2f} us: overhead {doc['overhead_s'] * 1e6:.2f} us (goal < 2 us) - {out}")
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
