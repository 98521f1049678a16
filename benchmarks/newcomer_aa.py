"""Do compare's verdicts stay honest on the README's main job when the machine is shared, and still find a real
difference?  Measured on this machine, in one invocation.

    python benchmarks/newcomer_aa.py [--results-dir DIR] [--only aa,known]

1. A/A of the README's main job (``ccbench launch -n 2 --config configs/quick.toml``): the same command twice,
   then ``ccbench compare`` (its verdicts: ``ccbench.analysis.compare.compare_runs``), in three settings:
   idle; two busy loops (one per core) during the second run only; two busy loops during both.  Every case
   called faster or slower is a false verdict.  Goal: at most 5% of cases in each setting.
2. A known difference: ``-n 4 --oversubscribe -C allreduce -s 8:64K:8 --launches 3`` at thread level single
   against multiple (MPICH busy-polls under MPI_THREAD_MULTIPLE, so on oversubscribed cores single is much
   faster), idle.  Goal: at least 90% of its cases called.

Each run records the machine's load while it measured (run.json ``load``: other processes' share of the
CPU time); compare withholds the verdicts of a run measured under load, so a loaded setting passes by saying
nothing, and the known difference shows that saying nothing is not all it does.  The figures go to
DIR/newcomer_aa_<time>/summary.json and are printed as a table.  About 4 minutes on 2 cores.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAIN_JOB = ["launch", "-n", "2", "--config", str(ROOT / "configs" / "quick.toml")]
KNOWN = ["launch", "-n", "4", "--oversubscribe", "-C", "allreduce", "-s", "8:64K:8", "--launches", "3"]


def _ccbench(args: list[str], cwd: Path, log) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "ccbench", *args], cwd=cwd, capture_output=True, text=True,
                       timeout=900, env={**os.environ, "COLUMNS": "200"})
    log.write(f"$ ccbench {' '.join(args)}\n{r.stdout}{r.stderr}\n")
    return r


def _newest(results: Path) -> Path:
    runs = [p for p in results.iterdir() if (p / "run.json").is_file()]
    return max(runs, key=lambda p: json.loads((p / "run.json").read_text()).get("start_time", ""))


def _busy(n: int) -> list[subprocess.Popen]:
    """`n` processes that spin on a core each (what other users' work looks like to the benchmark)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def _run(args: list[str], cwd: Path, results: Path, log, busy: int = 0) -> Path:
    procs = _busy(busy)
    try:
        r = _ccbench([*args, "--results-dir", str(results), "--no-show"], cwd, log)
    finally:
        _stop(procs)
    if r.returncode != 0:
        raise SystemExit(f"run failed ({r.returncode}): ccbench {' '.join(args)}\n{r.stderr}")
    return _newest(results)


def _verdicts(a: Path, b: Path) -> dict:
    from ccbench.analysis.compare import compare_runs
    from ccbench.store.run import open_run

    cmp = compare_runs([open_run(a), open_run(b)])
    called = sum(p.verdict in ("faster", "slower") for p in cmp.pairs)
    loads = [(json.loads((p / "run.json").read_text()).get("load") or {}).get("other_fraction") for p in (a, b)]
    return {"a": str(a), "b": str(b), "cases": len(cmp.pairs), "called": called,
            "share": called / len(cmp.pairs) if cmp.pairs else None, "withheld": bool(cmp.withheld),
            "other_load": loads}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results-dir", default="results", help="where newcomer_aa_<time>/ is made (default results)")
    p.add_argument("--only", default="aa,known", help="aa, known or both (default both)")
    args = p.parse_args()
    only = set(args.only.split(","))
    out = Path(args.results_dir).resolve() / time.strftime("newcomer_aa_%Y%m%d-%H%M%S")
    (out / "runs").mkdir(parents=True)
    rows = []
    with open(out / "launch.log", "w") as log:
        if "aa" in only:
            for setting, first, second in (("idle", 0, 0), ("busy during the second run", 0, 2),
                                           ("busy during both", 2, 2)):
                a = _run(MAIN_JOB, out, out / "runs", log, busy=first)
                b = _run(MAIN_JOB, out, out / "runs", log, busy=second)
                rows.append({"experiment": "A/A README main job", "setting": setting, "goal": "<= 5% called",
                             **_verdicts(a, b)})
        if "known" in only:
            a = _run([*KNOWN, "--thread-level", "single"], out, out / "runs", log)
            b = _run([*KNOWN, "--thread-level", "multiple"], out, out / "runs", log)
            rows.append({"experiment": "thread level single vs multiple", "setting": "idle",
                         "goal": ">= 90% called", **_verdicts(a, b)})
    (out / "summary.json").write_text(json.dumps(rows, indent=1))
    print(f"{'experiment':34} {'setting':28} {'cases':>5} {'called':>6} {'share':>6} {'other load A/B':>15} "
          f"{'withheld':>8}  goal")
    for r in rows:
        load = "/".join("-" if x is None else f"{x:.0%}" for x in r["other_load"])
        print(f"{r['experiment']:34} {r['setting']:28} {r['cases']:5d} {r['called']:6d} {r['share']:6.0%} "
              f"{load:>15} {str(r['withheld']):>8}  {r['goal']}")
    print(f"runs, log and summary.json in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
