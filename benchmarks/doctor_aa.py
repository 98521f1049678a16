"""How often does ``ccbench doctor`` name a slowed rank, and how often does it name anyone on a healthy run?

    python benchmarks/doctor_aa.py [-n N] [--ranks P] [--launches K] [--delay 300us] [--sizes 8,1M]
                                   [--busy B] [--allow-load SHARE] [--results-dir DIR]

N diagnoses of a healthy run and N with rank P-1 slowed (``CCBENCH_FAULT=slow:P-1:doctor:DELAY``: every exchange
and collective call of that rank starts DELAY late), alternated healthy / slowed, each ``ccbench doctor --launch P
--oversubscribe --launches K`` with its default sampling.  Counted per setting: diagnoses that name nobody, that
name the slowed rank, that name anyone else, that decided nothing (exit code 5: other processes took more than
20% of the CPU, or ``--allow-load``); how often each rank was named; the exit codes (4 when someone is named),
the seconds per diagnosis and the share of the machine's CPU other processes took meanwhile (run.json's
``load``).  ``--busy B`` keeps B busy loops running meanwhile (other load, as another user's job would make);
``--allow-load 1`` decides whatever the load (what the diagnosis did before it withheld its decision under load);
each run is also judged that way ("forced" in the summary).  Goals (issue 29): the slowed rank named in at least 9
of 10, a healthy run naming nobody in at least 9 of 10, no rank named more than once.  The table is printed and
DIR/doctor_aa_<time>/summary.json written.  On one machine every rank is on one host: ranks are what
is named.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path


def _newest(results: Path) -> Path:
    runs = [p for p in results.iterdir() if (p / "run.json").is_file()]
    return max(runs, key=lambda p: p.stat().st_mtime)


def _diagnose(args: list[str], results: Path, fault: str | None, log) -> dict:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("CCBENCH_FAULT", None)
    if fault:
        env["CCBENCH_FAULT"] = fault
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "ccbench", "doctor", *args, "--results-dir", str(results),
                        "--no-show"], capture_output=True, text=True, timeout=900, env=env)
    seconds = time.perf_counter() - t0
    log.write(f"$ CCBENCH_FAULT={fault or ''} ccbench doctor {' '.join(args)}\n{r.stdout}{r.stderr}\n")
    if r.returncode not in (0, 4, 5):
        raise SystemExit(f"ccbench doctor failed ({r.returncode}):\n{r.stderr}")
    from ccbench.analysis.doctor import diagnose
    from ccbench.store.run import open_run

    run = open_run(_newest(results))
    d = diagnose(run.rows, run.meta)
    cfg = run.meta["config"]
    forced = diagnose(run.rows, {**run.meta, "config": {**cfg, "params": {**cfg["params"], "allow_load": 1.0}}})
    return {"run": str(run.path), "exit_code": r.returncode, "seconds": round(seconds, 1),
            "named": [f"{s.kind} {s.name}" for s in d.suspects], "host": d.hosts[0] if d.hosts else "",
            "forced": [f"{s.kind} {s.name}" for s in forced.suspects],
            "other_load": (run.meta.get("load") or {}).get("other_fraction")}


def _summary(runs: list[dict], slowed: str | None) -> dict:
    named = Counter(n for r in runs for n in r["named"])
    got = [r["forced"] for r in runs]
    forced = {"nobody": sum(not g for g in got), "slowed_named": sum(slowed in g for g in got) if slowed else None,
              "others_named": sum(any(n != slowed for n in g) for g in got),
              "named_counts": dict(Counter(n for g in got for n in g))}
    return {"diagnoses": len(runs), "forced": forced,
            "nobody": sum(not r["named"] and r["exit_code"] != 5 for r in runs),
            "withheld": sum(r["exit_code"] == 5 for r in runs),
            "slowed_alone": sum(r["named"] == [slowed] for r in runs) if slowed else None,
            "slowed_named": sum(slowed in r["named"] for r in runs) if slowed else None,
            "others_named": sum(any(n != slowed for n in r["named"]) for r in runs),
            "named_counts": dict(named), "exit_codes": dict(Counter(r["exit_code"] for r in runs)),
            "median_seconds": sorted(r["seconds"] for r in runs)[len(runs) // 2] if runs else None,
            "median_other_load": sorted(r["other_load"] or 0.0 for r in runs)[len(runs) // 2] if runs else None}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=10, help="diagnoses per setting (default 10)")
    p.add_argument("--ranks", type=int, default=4, help="ranks of each diagnosis (default 4)")
    p.add_argument("--launches", type=int, default=1, help="launches of each diagnosis (default 1)")
    p.add_argument("--delay", default="300us", help="the slowed rank's delay per exchange (default 300us)")
    p.add_argument("--sizes", default=None, help="ccbench doctor --sizes (default: its own)")
    p.add_argument("--busy", type=int, default=0, help="busy loops kept running meanwhile (default 0)")
    p.add_argument("--allow-load", default=None, help="ccbench doctor --allow-load (default: its own, 0.2)")
    p.add_argument("--results-dir", default="results", help="where the runs and the summary go")
    a = p.parse_args()
    out = Path(a.results_dir) / f"doctor_aa_{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True)
    args = ["--launch", str(a.ranks), "--oversubscribe", "--launches", str(a.launches),
            *(["--sizes", a.sizes] if a.sizes else []), *(["--allow-load", a.allow_load] if a.allow_load else [])]
    slow_rank = a.ranks - 1
    fault = f"slow:{slow_rank}:doctor:{a.delay}"
    healthy, slowed = [], []
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    try:
        with open(out / "log.txt", "w") as log:
            series(a.n, args, fault, out, log, healthy, slowed)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    target = f"rank {slowed[0]['host']}:{slow_rank}" if slowed else None
    summary = {"command": f"ccbench doctor {' '.join(args)}", "fault": fault, "busy_loops": a.busy,
               "healthy": _summary(healthy, None), "slowed": _summary(slowed, target),
               "runs": {"healthy": healthy, "slowed": slowed}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    h, s = summary["healthy"], summary["slowed"]
    print(f"\n{summary['command']} (rank {slow_rank} slowed by {a.delay}), {a.n} diagnoses each"
          + (f", {a.busy} busy loop(s) meanwhile" if a.busy else ""))
    print(f"{'setting':<9} {'nobody':>7} {'slowed rank named':>18} {'others named':>13} {'withheld':>9} "
          f"{'s/diagnosis':>12} {'others CPU':>11}  named")
    for name, got in (("healthy", h), ("slowed", s)):
        print(f"{name:<9} {got['nobody']:>7} {got['slowed_named'] if name == 'slowed' else '-':>18} "
              f"{got['others_named']:>13} {got['withheld']:>9} {got['median_seconds']:>12} "
              f"{got['median_other_load']:>11.0%}  {got['named_counts'] or '-'}")
    print(f"wrote {out / 'summary.json'}")
    return 0


def series(n: int, args: list[str], fault: str, out: Path, log, healthy: list, slowed: list) -> None:
    """N healthy and N slowed diagnoses, alternated (drift of the machine's load hits both settings alike)."""
    for i in range(n):  # alternated, so that drift of the machine's load hits both settings alike
        healthy.append(_diagnose(args, out / "runs", None, log))
        slowed.append(_diagnose(args, out / "runs", fault, log))
        print(f"{i + 1}/{n}: healthy named {healthy[-1]['named'] or 'nobody'}; slowed named "
              f"{slowed[-1]['named'] or 'nobody'}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
