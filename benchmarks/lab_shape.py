"""A lab with shape: 2 hosts x 2 ranks, a ping-pong inside a host against one across hosts.

    sudo python benchmarks/lab_shape.py [--delay 1ms] [--rate 1gbit] [--sizes 8:64K:8] [--out results-lab-shape]

Builds the lab (``ccbench lab up --hosts 2 --ppn 2``, with its zero-delay baseline), runs
the same ping-pong sweep twice on 4 ranks -- ``--order block`` puts ranks 0 and 1 on host 0
(shared memory), ``--order cyclic`` on hosts 0 and 1 (the emulated link) -- and prints, per
size, the minimum and median of each, the inter-host minimum less the injected delay, and
the nodes MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) found (the runs' ``topology``).  The
lab is taken down at the end; the runs stay in OUT, with a summary in OUT/lab_shape.json.

Goal (issue 28, first part): the inter-host ping-pong pays the injected delay (its 8 B
minimum within the software's own cost of it), the intra-host one stays far below it, and
the node map is the lab's two hosts.  Needs root, ip and iptables; refuses when a lab is up.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ccb(*args: str, timeout: float = 600) -> str:
    r = subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=timeout,
                       cwd=REPO, env=dict(os.environ, COLUMNS="200"))
    if r.returncode:
        raise SystemExit(f"ccbench {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def newest(out: Path, before: set) -> Path:
    (run,) = [d for d in out.iterdir() if d.is_dir() and d not in before and "lab-baseline" not in d.name]
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", default="1ms")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--sizes", default="8:64K:8")
    ap.add_argument("--out", default="results-lab-shape")
    args = ap.parse_args()
    from ccbench.lab import core
    from ccbench.lab.link import parse_delay

    why = core.preflight()
    if why:
        raise SystemExit(why)
    if core.load_state() is not None or core.lab_namespaces():
        raise SystemExit("a lab is already up: `ccbench lab down` first")
    out = (REPO / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    delay_s = parse_delay(args.delay)
    summary: dict = {"delay_s": delay_s, "rate": args.rate, "sizes": args.sizes, "started": time.time(), "runs": {}}
    try:
        print(ccb("lab", "up", "--hosts", "2", "--ppn", "2", "--delay", args.delay, "--rate", args.rate,
                  "--results-dir", str(out)).strip())
        summary["baseline_alpha_s"] = core.load_state()["baseline"]["alpha_s"]
        for order in ("block", "cyclic"):
            before = set(out.iterdir())
            ccb("lab", "run", "-n", "4", "--ppn", "2", "--order", order, "--", "-C", "pingpong", "-s", args.sizes,
                "--budget", "0.3", "--warmup", "2", "--min-reps", "30", "--max-reps", "100", "--results-dir",
                str(out), "--no-show")
            run = newest(out, before)
            meta = json.loads((run / "run.json").read_text())
            rows = sorted((json.loads(x) for x in (run / "cases.jsonl").read_text().splitlines()),
                          key=lambda r: r["nbytes"])
            summary["runs"][order] = {"run": str(run), "topology": meta["topology"],
                                      "oversubscribed": meta["oversubscribed"], "thread_level": meta["thread_level"],
                                      "rows": [{k: r[k] for k in ("nbytes", "min_s", "median_s")} for r in rows]}
    finally:
        print(ccb("lab", "down").strip())
    (out / "lab_shape.json").write_text(json.dumps(summary, indent=1) + "\n")
    b, c = summary["runs"]["block"], summary["runs"]["cyclic"]
    print(f"\n2 hosts x 2 ranks, {args.delay} and {args.rate} between hosts; zero-delay baseline alpha "
          f"{summary['baseline_alpha_s'] * 1e6:.1f} us")
    for order, r in (("block", b), ("cyclic", c)):
        t = r["topology"]
        print(f"{order}: Split_type(COMM_TYPE_SHARED) found {t['nodes']} nodes {t['node_names']}, node of each rank "
              f"{t['node_of_rank']}; oversubscribed {r['oversubscribed']}, thread level {r['thread_level']}")
    print(f"{'size':>8} | {'inside a host (0-1 block) min / median':>40} | "
          f"{'across hosts (0-1 cyclic) min / median':>40} | {'across min - delay':>18}")
    for x, y in zip(b["rows"], c["rows"], strict=True):
        print(f"{x['nbytes']:>8} | {x['min_s'] * 1e6:>17.1f} us / {x['median_s'] * 1e6:>12.1f} us | "
              f"{y['min_s'] * 1e6:>17.1f} us / {y['median_s'] * 1e6:>12.1f} us | "
              f"{(y['min_s'] - delay_s) * 1e6:>15.1f} us")
    print(f"summary: {out / 'lab_shape.json'}")


if __name__ == "__main__":
    main()
