"""Does ``ccbench doctor`` name the emulated lab's slow host, link or rank, and nobody on a healthy lab?

    sudo python benchmarks/lab_doctor.py [-n 10] [--shapes 4x1,2x2] [--delay 300us] [--rate 1gbit]
                                         [--slow-rate 250mbit] [--out results-lab-doctor]

For each shape (hosts x ranks per host) it brings the lab up (``ccbench lab up --hosts H --ppn R --delay 0
--rate RATE``) and runs N rounds; each round diagnoses every setting once, alternated, so that drift of the
machine's load hits them alike (``ccbench lab set`` between them; every diagnosis ``ccbench lab run -- doctor``
with its defaults):

- healthy: every link at zero added delay and RATE;
- host +DELAY: ``lab set --host H-1 --delay DELAY`` (the last host's ingress: its traffic both ways);
- host at SLOW-RATE (a quarter of 1gbit): ``lab set --host H-1 --rate SLOW-RATE``; 3 hosts or more;
- link +DELAY: ``lab set --pair 0,H-1 --delay DELAY`` (that pair's traffic only); 3 hosts or more;
- rank slowed (more than one rank per host): ``CCBENCH_FAULT=slow:P-1:doctor:DELAY``, the last rank's every
  exchange DELAY late.

With 2 hosts there is one link and no other to compare it with: a slow host and a slow link cannot be told
apart, and the diagnosis says so instead of naming either (counted as "said so").  Before each diagnosis it
waits (at most 10 s) for a second in which the machine was less than 15% busy.  A diagnosis withholds its
decision when other processes took more than 20% of the CPU (exit code 5); each run is also judged as
``--allow-load 1`` would have (decided whatever the load: "forced"), so that the figures of a loaded machine
are not lost.  Per setting, as decided and forced: diagnoses naming exactly the target, naming the target,
naming nobody, naming anyone else, withheld, how often each suspect was named; the seconds of one diagnosis
(the command's wall time and the run's own measuring time) and the other processes' share of the CPU.  Goals
(issue 29): the slow host (+DELAY, or a quarter of the rate) named in at least 9 of 10, the healthy hosts never;
the slow link named as that link, not as either host; a healthy lab naming nobody in at least 9 of 10 and no host
more than once.  The lab is taken down at the end; the runs stay in OUT, the summary in
OUT/lab_doctor_<time>.json.  Needs root, ip and iptables; refuses when a lab is up.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUIET = 0.15       # the machine's busy share over a second below which a diagnosis starts
QUIET_WAIT_S = 10  # the longest it waits for that


def wait_quiet() -> float:
    """Seconds waited (at most QUIET_WAIT_S) until the machine was busy less than QUIET over one second."""
    from ccbench.measure.hardware import cpu_times

    t0 = time.monotonic()
    while time.monotonic() - t0 < QUIET_WAIT_S:
        a = cpu_times()
        time.sleep(1.0)
        b = cpu_times()
        if a is None or b is None or (b.busy - a.busy) / max(b.total - a.total, 1e-9) < QUIET:
            break
    return round(time.monotonic() - t0, 1)


def ccb(*args: str, env: dict | None = None, ok=(0,)) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "CCBENCH_FAULT"}
    r = subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=900,
                       cwd=REPO, env={**base, "COLUMNS": "200", **(env or {})})
    if r.returncode not in ok:
        raise SystemExit(f"ccbench {' '.join(args)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def settings(hosts: int, ppn: int, delay: str, slow_rate: str, names: list[str]) -> dict:
    """{setting: (`lab set` arguments, CCBENCH_FAULT or None, the suspect it should name or None)}."""
    last = hosts - 1
    out = {"healthy": ([], None, None),
           f"host +{delay}": (["--host", str(last), "--delay", delay], None,
                              f"host {names[last]}" if hosts >= 3 else None)}  # 2 hosts: nobody, and it says why
    if hosts >= 3:
        out[f"host at {slow_rate}"] = (["--host", str(last), "--rate", slow_rate], None, f"host {names[last]}")
        out[f"link +{delay}"] = (["--pair", f"0,{last}", "--delay", delay], None, f"link {names[0]} <> {names[last]}")
    if ppn > 1:
        out[f"rank slowed {delay}"] = ([], f"slow:{hosts * ppn - 1}:doctor:{delay}", f"rank {names[last]}:{ppn - 1}")
    return out


def diagnose_once(out: Path, fault: str | None, log) -> dict:
    """One diagnosis: what it named (as decided, and forced), how long it took, the load meanwhile."""
    from ccbench.analysis.doctor import WITHHELD, diagnose
    from ccbench.store.run import open_run

    waited = wait_quiet()
    before = set(out.iterdir()) if out.is_dir() else set()
    t0 = time.perf_counter()
    r = ccb("lab", "run", "--", "doctor", "--results-dir", str(out), "--no-show",
            env={"CCBENCH_FAULT": fault} if fault else None, ok=(0, 4, WITHHELD))
    wall = time.perf_counter() - t0
    log.write(f"$ CCBENCH_FAULT={fault or ''} ccbench lab run -- doctor\n{r.stdout}{r.stderr}\n")
    (path,) = [p for p in out.iterdir() if p not in before and (p / "run.json").is_file()]
    run = open_run(path)
    d = diagnose(run.rows, run.meta)
    forced = diagnose(run.rows, {**run.meta, "config": {**run.meta["config"], "params": {
        **run.meta["config"]["params"], "allow_load": 1.0}}})
    span = (datetime.fromisoformat(run.meta["end_time"]) - datetime.fromisoformat(run.meta["start_time"]))
    return {"run": path.name, "exit_code": r.returncode, "waited_s": waited, "seconds": round(wall, 2),
            "measuring_seconds": round(span.total_seconds(), 2), "withheld": bool(d.withheld),
            "named": [f"{s.kind} {s.name}" for s in d.suspects], "effects": [round(s.effect, 2) for s in d.suspects],
            "forced": [f"{s.kind} {s.name}" for s in forced.suspects],
            "forced_effects": [round(s.effect, 2) for s in forced.suspects],
            "cannot_tell": any("cannot be told apart" in n for n in d.notes),
            "other_load": (run.meta.get("load") or {}).get("other_fraction")}


def counts(runs: list[dict], target: str | None, key: str) -> dict:
    """What the diagnoses named (`key`: "named" as decided, "forced" whatever the load) against the target."""
    named = Counter(n for r in runs for n in r[key])
    effects = sorted(e for r in runs for n, e in zip(r[key], r["effects" if key == "named" else "forced_effects"],
                                                     strict=True) if n == target)
    return {"exactly_target": sum(r[key] == [target] for r in runs) if target else None,
            "target_named": sum(target in r[key] for r in runs) if target else None,
            "nobody": sum(not r[key] and not (key == "named" and r["withheld"]) for r in runs),
            "others_named": sum(any(n != target for n in r[key]) for r in runs), "named_counts": dict(named),
            "median_effect": effects[len(effects) // 2] if effects else None}


def tally(runs: list[dict], target: str | None) -> dict:
    def median(key):
        return sorted(r[key] or 0.0 for r in runs)[len(runs) // 2]

    return {"diagnoses": len(runs), "target": target, "withheld": sum(r["withheld"] for r in runs),
            "decided": counts(runs, target, "named"), "forced": counts(runs, target, "forced"),
            "said_cannot_tell": sum(r["cannot_tell"] for r in runs), "median_seconds": median("seconds"),
            "median_measuring_seconds": median("measuring_seconds"), "median_other_load": median("other_load"),
            "max_other_load": max(r["other_load"] or 0.0 for r in runs)}


def shape_series(hosts: int, ppn: int, a, out: Path, log) -> dict:
    from ccbench.lab import core

    print(ccb("lab", "up", "--hosts", str(hosts), "--ppn", str(ppn), "--delay", "0", "--rate", a.rate,
              "--results-dir", str(out)).stdout.strip().splitlines()[0], flush=True)
    try:
        state = core.load_state()
        names = (state.get("hostnames") or state["namespaces"])[:hosts]
        plan = settings(hosts, ppn, a.delay, a.slow_rate, names)
        runs: dict = {name: [] for name in plan}
        for i in range(a.n):
            for name, (lab_set, fault, _) in plan.items():
                ccb("lab", "set", "--delay", "0", "--rate", a.rate, "--no-baseline")  # back to healthy
                if lab_set:
                    ccb("lab", "set", *lab_set, "--no-baseline")
                runs[name].append(diagnose_once(out / f"{hosts}x{ppn}", fault, log))
            print(f"{hosts}x{ppn} {i + 1}/{a.n}: " + "; ".join(f"{k} {v[-1]['named'] or 'nobody'}"
                                                            for k, v in runs.items()), flush=True)
    finally:
        print(ccb("lab", "down").stdout.strip().splitlines()[-1], flush=True)
    return {"hosts": hosts, "ppn": ppn, "names": names,
            "settings": {k: {"lab_set": v[0], "fault": v[1], **tally(runs[k], v[2])} for k, v in plan.items()},
            "runs": runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, help="diagnoses per setting (default 10)")
    ap.add_argument("--shapes", default="4x1,2x2", help="hosts x ranks per host, comma separated")
    ap.add_argument("--delay", default="300us", help="the added delay of a slow host, link or rank (default 300us)")
    ap.add_argument("--rate", default="1gbit", help="every link's rate (default 1gbit)")
    ap.add_argument("--slow-rate", default="250mbit", help="a slow host's rate (default 250mbit: a quarter)")
    ap.add_argument("--out", default="results-lab-doctor")
    a = ap.parse_args()
    from ccbench.lab import core

    why = core.unavailable()
    if why:
        raise SystemExit(why)
    out = (REPO / a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    doc = {"argv": ["benchmarks/lab_doctor.py", *(x for i, x in enumerate(sys.argv[1:]) if "--out" not in
                                                  sys.argv[i:i + 2])],
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": "ccbench lab run -- doctor", "delay": a.delay, "rate": a.rate, "slow_rate": a.slow_rate,
           "machine": None, "shapes": []}
    with open(out / "log.txt", "a") as log:
        for hosts, ppn in shapes:
            doc["shapes"].append(shape_series(hosts, ppn, a, out, log))
    first = next((out / f"{s['hosts']}x{s['ppn']}" / v[0]["run"] for s in doc["shapes"] for v in s["runs"].values()),
                 None)
    if first is not None:  # the machine, from a run's run.json (every lab host is this machine)
        m = json.loads((first / "run.json").read_text())
        hw = next(iter(m["hardware"]["nodes"].values()))
        doc["machine"] = {"cpu": hw["cpu"]["model"], "cores": hw["cpu"]["cores"],
                          "memory_bytes": hw["memory"]["total_bytes"], "mpi_library": m["mpi_library"],
                          "python": m["python"]}
    path = out / f"lab_doctor_{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    for s in doc["shapes"]:
        print(f"\n{s['hosts']} hosts x {s['ppn']} rank(s), {a.n} diagnoses per setting (`ccbench lab run -- doctor`)")
        print(f"{'setting':<22} {'target':<24} {'withheld':>8} | decided: {'exactly':>7} {'named':>6} {'nobody':>7} "
              f"{'others':>7} | forced: {'exactly':>7} {'named':>6} {'nobody':>7} {'others':>7} | {'s each':>7} "
              f"{'load':>5}  named (forced)")
        for name, t in s["settings"].items():
            cells = " | ".join(" ".join(f"{'-' if v is None else v:>{w}}" for v, w in (
                (c["exactly_target"], 17 if k == "decided" else 15), (c["target_named"], 6), (c["nobody"], 7),
                (c["others_named"], 7))) for k, c in (("decided", t["decided"]), ("forced", t["forced"])))
            print(f"{name:<22} {t['target'] or '-':<24} {t['withheld']:>8} | {cells} | {t['median_seconds']:>7} "
                  f"{t['median_other_load']:>5.0%}  {t['forced']['named_counts'] or '-'}"
                  + ("; said a host and a link cannot be told apart" if t["said_cannot_tell"] else ""))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
