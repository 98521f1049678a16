"""Shape-aware tuning in the lab: do the MPICH tuning files of 4 hosts x 1 rank and 2 hosts x 2 ranks differ where
the measurements differ, and does the library follow each shape's rules?

    sudo python benchmarks/lab_tune.py [--delay 100us] [--rate 1gbit] [--collective allreduce]
                                       [--algorithms native,native:all] [--sizes 8,1K,32K,1M] [--launches 3]
                                       [--budget 0.2] [--out results-lab-tune]

1. ``ccbench lab up --hosts 4 --ppn 1 --delay DELAY --rate RATE``;
2. at each shape, the library's default and the algorithms it is forced to (ALGORITHMS: every one by default),
   in alternating launches merged into one run: ``ccbench lab launch -n 4 --ppn R -- -C COLLECTIVE -a ALGORITHMS
   -s SIZES --launches K --budget B`` (R = 1: four hosts, every pair across a link; R = 2: two hosts, pairs
   inside a host in shared memory);
3. ``ccbench tune RUN_4x1 RUN_2x2 --format mpich-json --verify``: one file, each choice keyed on the shape it was
   measured on (MPICH's ``comm_avg_ppn``), verified in the lab at each run's shape (launches without and with the
   file, alternated).

Printed and stored (OUT/lab_tune_<time>.json): per shape and size the measured medians of every algorithm, the
file's choice, the sizes where the two shapes' choices differ, and per shape and size the library's time
without and with the file against the chosen algorithm's own.  The lab is taken down at the end.  Needs root,
ip and iptables; refuses when a lab is up.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHAPES = ((4, 1), (2, 2))  # hosts x ranks per host, 4 ranks each


def ccb(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=1800,
                       cwd=REPO, env=dict(os.environ, COLUMNS="200"))
    if r.returncode:
        raise SystemExit(f"ccbench {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", default="100us")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--collective", default="allreduce")
    ap.add_argument("--algorithms", default="native,native:all")
    ap.add_argument("--sizes", default="8,1K,32K,1M")
    ap.add_argument("--launches", default="3")
    ap.add_argument("--budget", default="0.2")
    ap.add_argument("--out", default="results-lab-tune")
    a = ap.parse_args()
    from ccbench.lab import core
    from ccbench.store.run import open_run
    from ccbench.workflow.tune import tune_runs, verify

    why = core.unavailable()
    if why:
        raise SystemExit(why)
    out = (REPO / a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime('%Y%m%d-%H%M%S')
    tuning = out / f"tuning_{stamp}.mpich.json"
    doc: dict = {"argv": ["benchmarks/lab_tune.py", *(x for i, x in enumerate(sys.argv[1:]) if "--out" not in
                                                    sys.argv[i:i + 2])],
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "delay": a.delay, "rate": a.rate,
                 "collective": a.collective, "commands": [], "shapes": {}}
    runs = {}
    try:
        up = ["lab", "up", "--hosts", "4", "--ppn", "1", "--delay", a.delay, "--rate", a.rate, "--results-dir",
              str(out)]
        print(ccb(*up).strip().splitlines()[0], flush=True)
        doc["commands"].append("ccbench " + " ".join(up[:-2]))
        for hosts, ppn in SHAPES:
            cmd = ["lab", "launch", "-n", "4", "--ppn", str(ppn), "--", "-C", a.collective, "-a", a.algorithms,
                   "-s", a.sizes, "--launches", a.launches, "--budget", a.budget, "--results-dir", str(out),
                   "--tag", f"{hosts}x{ppn}", "--no-show"]
            before = set(out.iterdir())
            ccb(*cmd)
            (run,) = [p for p in out.iterdir() if p not in before and p.name.endswith(f"_{hosts}x{ppn}")]
            runs[(hosts, ppn)] = run
            doc["commands"].append("ccbench " + " ".join(cmd[:cmd.index("--results-dir")]))
            print(f"{hosts} hosts x {ppn}: {run.name}", flush=True)
        tuned = tune_runs([str(runs[s]) for s in SHAPES], "mpich-json", output=str(tuning))
        doc["commands"].append("ccbench tune RUN_4x1 RUN_2x2 --format mpich-json --verify")
        checked = verify(tuned, results_dir=out, say=lambda line: print(line, flush=True))
    finally:
        print(ccb("lab", "down").strip().splitlines()[-1], flush=True)
    doc["tuning_file"] = json.loads(tuning.read_text())
    doc["notes"] = list(tuned.choice.notes)
    by_run = {}
    for s in tuned.choice.selections:
        by_run[s.run] = {c.nbytes: {"choice": c.winner, "fastest": c.fastest, "toss_up": c.within_noise,
                                    "kept_default": c.kept_default,
                                    "times_s": {k: round(v, 9) for k, v in c.times_s.items()}} for c in s.choices}
    cpu = (next(iter((open_run(runs[SHAPES[0]]).meta.get("hardware") or {}).get("nodes", {}).values()), {})
           .get("cpu") or {})
    doc["machine"] = f"{cpu.get('model', '?')}, {cpu.get('cores', '?')} cores"
    for hosts, ppn in SHAPES:
        run = open_run(runs[(hosts, ppn)])
        doc["shapes"][f"{hosts}x{ppn}"] = {"run": run.path.name, "topology": run.meta["topology"]["node_of_rank"],
                                           "load": (run.meta.get("load") or {}).get("other_fraction"),
                                           "sizes": by_run[run.path.name]}
    four, two = (doc["shapes"][f"{h}x{p}"]["sizes"] for h, p in SHAPES)
    doc["differ"] = [n for n in four if four[n]["choice"] != two.get(n, {}).get("choice")]
    doc["fastest_differ"] = [n for n in four if four[n]["fastest"] != two.get(n, {}).get("fastest")]
    shape_of = {e.dir: f"{h}x{p}" for e in checked.runs for (h, p) in SHAPES
                if e.source == doc["shapes"][f"{h}x{p}"]["run"]}
    doc["verification"] = [{"shape": shape_of[r.verify_dir], **{k: getattr(r, k) for k in (
        "nbytes", "file_choice", "changed", "best", "best_s", "without_s", "with_file_s", "ratio", "ratio_low",
        "ratio_high", "q_value", "verdict")}} for r in checked.rows]
    doc["shape_notes"] = [e.shape_note for e in checked.runs if e.shape_note]
    path = out / f"lab_tune_{stamp}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    for shape, got in doc["shapes"].items():
        print(f"\n{shape}: {got['run']} (node of each rank {got['topology']})")
        for n, c in got["sizes"].items():
            times = ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in sorted(c["times_s"].items(), key=lambda kv: kv[1]))
            print(f"  {n:>8} B: file names {c['choice']}" + (" (toss-up)" if c["toss_up"] else "") + f"; {times}")
    print(f"\nchoices differ between the shapes at {doc['differ'] or 'no size'}; the fastest measured differs at "
          f"{doc['fastest_differ'] or 'no size'}")
    print("verification (the library's default without and with the file, at each shape):")

    def us(t):
        return f"{t * 1e6:8.0f} us" if isinstance(t, (int, float)) else f"{'-':>11}"

    for v in doc["verification"]:
        print(f"  {v['shape']} {v['nbytes']:>8} B: file {v['file_choice']:<28} without {us(v['without_s'])}  with "
              f"{us(v['with_file_s'])}  chosen alone {us(v['best_s'])}  {v['verdict']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
