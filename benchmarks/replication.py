"""False verdicts and power of run comparisons at K = 1, 3, 5 launches per run, measured on this machine.

    python benchmarks/replication.py [--quick] [--pairs N] [--rounds R] [--only EXPERIMENTS] [--results-dir DIR]

Every run is made by the product's own command (``ccbench launch ... --launches K``) and every
verdict comes from its own analysis (``ccbench.analysis.compare.compare_runs``, as ``ccbench
compare`` prints it: ``Pair.verdict``); the script only counts them.  In one invocation it runs:

1. A/A: pairs of identical runs of ``-n 2 -C allreduce,bcast,allgather -s 8:1M:4`` at each K.
   Every matched case called faster or slower is a false verdict.
2. A real difference: ``-n 4 -C allreduce`` at thread level single against multiple on
   oversubscribed cores (MPICH busy-polls: single is tens to hundreds of times slower there
   on an otherwise idle machine).
   Every case called slower is found.
3. A known 20% slowdown, K = 5: ``CCBENCH_FAULT=slow:all:allreduce/ring:20%`` (every rank spins
   0.2 x each ring call's own duration inside the timed region) in a run of ring and
   recursive_doubling, against the same run without the fault.  Found (a) as separate runs:
   compare's verdict on the ring cases (recursive_doubling, undisturbed, is the control); (b)
   paired: ring and recursive_doubling run in the same launches, so the per-launch log ratio
   ring / recursive_doubling carries no launch effect; the ratios of the slowed run are tested
   against the unslowed run's (a difference in differences) by Welch's t on per-launch values
   (``ccbench.core.replication.compare_launches``; Welch, Biometrika 34, 1947).
4. The same 20% slowdown on a quieter pair, K = 5: at 2 ranks the binomial and the linear bcast
   both send the buffer once from the root to rank 1 (``CCBENCH_FAULT=slow:all:bcast/linear:20%``).
   Their Python paths still differ (the control run measures linear 3-30% slower at small sizes,
   and the product's paired "fastest per size" rightly calls some of that), so the slowdown is
   found as in 3(b): the per-launch ratio linear / binomial of the slowed run against the control
   run's.  The product's own fastest-per-size verdicts (``ccbench.analysis.fastest``, as ``show``
   and ``report`` print them) on both runs are listed beside it.
   Both 3(b) and 4 are repeated with the launches of the two sides alternated in time: K
   single-launch runs without and K with the fault, A B B A A B ... (``Launches.alternate``),
   so that a change of the machine between two runs does not enter the difference.
5. A/A of training-step runs (``--only workload``): pairs of identical ``ccbench workload ddp
   --launch 2 -a native,ring`` runs of a five-tensor model (5.3 MiB) at K = 1 and 3, compared
   by ``compare_runs`` as for sweeps (no pooled rule: the rows are steps and calls).
6. The smallest ratio two separate K-launch runs tell apart with 80% power at level 0.05
   (``ccbench.core.replication.min_detectable_ratio``), from the between-launch CV measured in
   the A/A runs of the same K, median over cases: the CV of the per-launch medians (what a
   launch-level test compares: the launch effect plus the noise of each launch's median, as
   min_detectable_ratio asks), with the variance components sigma_b and sigma_w beside it
   for reference (``variance_components``: Searle, Casella & McCulloch 1992).

Beside every verdict of compare, the same matched cases get the verdict of the rule compare
used before it decided at the launch level, for reference ("pooled"): a two-sided Mann-Whitney
U test of the two rows' pooled raw samples (Mann & Whitney 1947; ``ccbench.core.stats``),
Benjamini-Hochberg adjusted over the pair of runs (JRSS B 57, 1995), slower/faster below 0.05.

``--rounds R`` gives every run ``--rounds R`` (each launch visits every case R times, in
randomized rounds; see ``Config.per_round``).

Everything lands in DIR/replication_<time>/: the runs (runs/), the launchers' output
(launch.log), and the figures as replication.txt (the printed tables), replication-summary.csv,
replication-cases.csv (one line per compared case, with both run directories) and
replication.json (all of it, with each run's command and the machine's load when it started).
The machine is shared: the load average beside each run says how quiet it was.

Goals: none fixed (these are the figures that choose the recommended K); about 10 minutes
on 2 cores with the defaults, about 5 with --quick.
"""

import argparse
import csv
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

KS = (1, 3, 5)
AA_ARGS = ["-n", "2", "-C", "allreduce,bcast,allgather", "-s", "8:1M:4"]
THREAD_ARGS = ["-n", "4", "-C", "allreduce"]
THREAD_SIZES = {"full": "8:64K:8", "quick": "8,512,32K"}
SLOW_ARGS = ["-n", "2", "-C", "allreduce", "-a", "ring,recursive_doubling"]
SLOW_SIZES = {"full": "8:1M:4", "quick": "8:64K:8"}
SLOW_FAULT = "slow:all:allreduce/ring:20%"
SLOW_K = 5
TWIN_ARGS = ["-n", "2", "-C", "bcast", "-a", "binomial,linear"]  # one send of n bytes each at 2 ranks
TWIN_FAULT = "slow:all:bcast/linear:20%"
WORKLOAD_ARGS = ["ddp", "--launch", "2", "-a", "native,ring", "--max-reps", "60", "--budget", "2"]
WORKLOAD_KS = (1, 3)
EXPERIMENTS = ("aa", "thread", "slow20", "twin", "workload")
CALLED = ("faster", "slower")


class Launches:
    """Runs `ccbench launch` into one directory and keeps a record of every run it made."""

    def __init__(self, root: Path, total: int, rounds: int = 1) -> None:
        self.root, self.total, self.rounds = root, total, rounds
        self.runs_dir = root / "runs"
        self.runs_dir.mkdir(parents=True)
        self.log = root / "launch.log"
        self.records: list[dict] = []

    def run(self, tag: str, args: list[str], k: int, fault: str | None = None, workload: bool = False) -> Path:
        """One run of `args` in `k` launches (under CCBENCH_FAULT=`fault`); its directory.

        A sweep by ``ccbench launch ARGS``, or with `workload` a training-step run by ``ccbench
        workload ARGS`` (which has no rounds).
        """
        head = ["workload", *args] if workload else ["launch", *args, "--rounds", str(self.rounds)]
        head.append("--oversubscribe")  # its thread-level difference is measured at more ranks than cores
        cmd = [sys.executable, "-m", "ccbench", *head, "--launches", str(k),
               "--results-dir", str(self.runs_dir), "--tag", tag, "--no-show"]
        env = {k_: v for k_, v in os.environ.items() if k_ != "CCBENCH_FAULT"}
        if fault:
            env["CCBENCH_FAULT"] = fault
        before = set(self.runs_dir.iterdir())
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        with open(self.log, "a") as log:
            log.write(f"\n$ {'CCBENCH_FAULT=' + fault + ' ' if fault else ''}{' '.join(cmd)}\n")
            log.flush()
            code = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        seconds = time.monotonic() - t0
        new = [d for d in set(self.runs_dir.iterdir()) - before if d.is_dir()]
        if code or len(new) != 1:
            sys.exit(f"replication: {tag} failed (exit code {code}); its output is in {self.log}")
        self.records.append({"tag": tag, "launches": k, "fault": fault, "dir": str(new[0]), "command": cmd,
                             "seconds": round(seconds, 2), "load_avg_1min_before": load})
        print(f"[{len(self.records)}/{self.total}] {tag}: {seconds:.0f} s, load {load:.1f} -> {new[0].name}",
              flush=True)
        return new[0]

    def alternate(self, tag: str, args: list[str], k: int, fault: str) -> tuple[list[Path], list[Path]]:
        """`k` single-launch runs of `args` without and `k` with `fault`, alternately (A B B A A B ...).

        Two K-launch runs made one after the other share no moment: whatever changes on the
        machine between them enters their difference, beyond what either run's launches
        show.  Alternating their launches spreads both over the same stretch of time, as
        ``ccbench tune --verify`` does for a tuning file (A B A B; Hunold & Carpen-Amarie, IEEE
        TPDS 2016, randomise and interleave); A B B A also cancels a linear drift.
        """
        plain: list[Path] = []
        slowed: list[Path] = []
        for i in range(1, k + 1):
            for with_fault in ((False, True) if i % 2 else (True, False)):
                if with_fault:
                    slowed.append(self.run(f"{tag}-slowed-{i}", args, 1, fault=fault))
                else:
                    plain.append(self.run(f"{tag}-none-{i}", args, 1))
        return plain, slowed


def _pooled_verdicts(cmp, a: Path, b: Path) -> list[tuple[float | None, str]]:
    """Per pair of `cmp`: (adjusted p, verdict) of the pooled-sample rule (module docstring), in order."""
    from ccbench.core.stats import benjamini_hochberg, mann_whitney_u
    from ccbench.store.run import open_run

    def key(x) -> tuple:
        return (x.collective, x.algorithm, x.nbytes, x.dtype, x.op, bool(x.in_place), x.root)

    rows_a, rows_b = ({key(r): r for r in reversed(open_run(path).rows)} for path in (a, b))
    ps = []
    for p in cmp.pairs:
        ra, rb = rows_a[key(p)], rows_b[key(p)]
        ok = len(ra.samples_s) >= 2 and len(rb.samples_s) >= 2
        ps.append(mann_whitney_u(rb.samples_s, ra.samples_s)[1] if ok else None)
    tested = [x for x in ps if x is not None]
    adjusted = iter(benjamini_hochberg(tested).tolist()) if tested else iter(())
    out = []
    for p, x in zip(cmp.pairs, ps, strict=True):
        q = next(adjusted) if x is not None else None
        out.append((q, "untested" if q is None else "noise" if q >= 0.05 else "slower" if p.ratio > 1 else "faster"))
    return out


def _case_lines(experiment: str, k: int, pair: int, a: Path, b: Path, select=None,
                pooled_rule: bool = True) -> tuple[list[dict], list[str]]:
    """compare_runs([a, b]): one line per matched case (`select`ed), every Pair field and the pooled rule's verdict
    (left out when not `pooled_rule`: workload runs)."""
    from ccbench.api import compare as compare_runs  # opens the runs, then compares them

    cmp = compare_runs([a, b])
    lines = []
    pooled_rule_verdicts = _pooled_verdicts(cmp, a, b) if pooled_rule else [(None, None)] * len(cmp.pairs)
    for p, (q, pooled) in zip(cmp.pairs, pooled_rule_verdicts, strict=True):
        if select is None or select(p):
            lines.append({"experiment": experiment, "K": k, "pair": pair, "run_a": str(a), "run_b": str(b),
                          **dataclasses.asdict(p), "pooled_p_adjusted": q, "pooled_verdict": pooled})
    return lines, cmp.warnings


def _per_launch_medians(row) -> dict[int, float]:
    import numpy as np

    return {n: float(np.median(s)) for n, s in row.launch_blocks() if len(s)}


def _paired_lines(unslowed: Path | list[Path], slowed: Path | list[Path], k: int, collective: str = "allreduce",
                  slowed_alg: str = "ring", other_alg: str = "recursive_doubling",
                  experiment: str = "slow20-paired") -> list[dict]:
    """Per size: slowed_alg / other_alg per launch, slowed run against unslowed (difference in differences).

    The two algorithms of one run ran in the same launches (rows with equal settings share
    launch numbers), so ln(slowed_alg_k / other_alg_k) has no launch effect; Welch's t on these
    per-launch values of the two runs (``compare_launches``, each value a launch of one) tests
    whether the ratio moved.  Either side may be several runs (the launches of all of them:
    single-launch runs made alternately, see ``Launches.alternate``).
    """
    from ccbench.core.replication import compare_launches
    from ccbench.store.run import open_run

    def ratios(paths: Path | list[Path]) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for path in [paths] if isinstance(paths, Path) else paths:
            rows = open_run(path).rows
            by = {(r.algorithm, r.nbytes): _per_launch_medians(r) for r in rows if r.collective == collective}
            for (alg, n), mine in by.items():
                other = by.get((other_alg, n))
                if alg != slowed_alg or other is None:
                    continue
                out.setdefault(n, []).extend(mine[i] / other[i] for i in sorted(set(mine) & set(other)))
        return out

    u, s = ratios(unslowed), ratios(slowed)
    lines = []
    for n in sorted(set(u) & set(s)):
        c = compare_launches([[x] for x in u[n]], [[x] for x in s[n]])
        lines.append({"experiment": experiment, "K": k, "pair": 1, "run_a": _names(unslowed),
                      "run_b": _names(slowed),
                      "collective": collective, "algorithm": f"{slowed_alg} / {other_alg}", "nbytes": n,
                      "ratio": c.ratio, "ratio_low": c.ratio_low, "ratio_high": c.ratio_high, "p_value": c.p_value,
                      "verdict": c.verdict, "method": c.method, "n_launches_a": c.n_launches_a,
                      "n_launches_b": c.n_launches_b})
    return lines


def _names(paths: Path | list[Path]) -> str:
    return str(paths) if isinstance(paths, Path) else ";".join(str(x) for x in paths)


def _twin_lines(path: Path, k: int, slowed: bool) -> list[dict]:
    """Per size of a binomial + linear bcast run: the product's fastest-per-size verdict, paired by launch.

    In the slowed run the verdict counts as found when binomial is called faster than linear;
    in the control run any call (either way) is a false verdict.
    """
    from ccbench.analysis.fastest import fastest_per_size, group_rows
    from ccbench.store.run import open_run

    lines = []
    for g in group_rows(open_run(path).rows):
        for f in fastest_per_size(g):
            called = f.verdict == "faster"
            found = called and f.fastest == "binomial"
            lines.append({"experiment": "slow20-twin" if slowed else "twin-control", "K": k, "pair": 1,
                          "run_a": str(path), "run_b": str(path), "collective": g.collective,
                          "algorithm": f"{f.runner_up} / {f.fastest}", "nbytes": f.nbytes,
                          "ratio": 1.0 + f.margin if f.margin is not None else math.nan,
                          "ratio_low": f.ratio_low, "ratio_high": f.ratio_high, "p_value": f.p_value,
                          "verdict": ("slower" if found else "faster" if called else f.verdict) if slowed
                          else f.verdict, "method": f.method, "fastest": f.fastest})
    return lines


def _launch_cvs(path: Path, k: int) -> list[dict]:
    """Per row of a K-launch run: the CV of its per-launch medians and variance_components' between_cv."""
    import numpy as np

    from ccbench.core.replication import cv_from_log_sd, variance_components
    from ccbench.store.run import open_run

    out = []
    for r in open_run(path).rows:
        blocks = [np.asarray(s, dtype=np.float64) for _, s in r.launch_blocks() if len(s)]
        if len(blocks) < 2 or any(np.any(b <= 0) for b in blocks):
            continue
        meds = np.log([np.median(b) for b in blocks])
        vc = variance_components(blocks)
        out.append({"K": k, "run": str(path), "collective": r.collective, "algorithm": r.algorithm,
                    "nbytes": r.nbytes, "launches": len(blocks),
                    "median_cv": cv_from_log_sd(float(np.std(meds, ddof=1))),
                    "between_cv": vc.between_cv, "within_cv": vc.within_cv})
    return out


def _paired_cvs(path: Path, k: int) -> list[dict]:
    """Per size of the unslowed ring/rd run: the CV of the per-launch ratio ring / recursive_doubling."""
    import numpy as np

    from ccbench.core.replication import cv_from_log_sd
    from ccbench.store.run import open_run

    rows = open_run(path).rows
    by = {(r.algorithm, r.nbytes): _per_launch_medians(r) for r in rows}
    out = []
    for (alg, n), ring in by.items():
        rd = by.get(("recursive_doubling", n))
        if alg != "ring" or rd is None:
            continue
        common = sorted(set(ring) & set(rd))
        if len(common) >= 2:
            logs = np.log([ring[i] / rd[i] for i in common])
            cv = cv_from_log_sd(float(np.std(logs, ddof=1)))
            out.append({"K": k, "run": str(path), "nbytes": n, "paired_cv": cv})
    return out


def _summary(lines: list[dict], experiment: str, k: int, what: str, select=None) -> dict:
    """Counts of verdicts over the lines of one experiment and K; share called; geometric mean and range of ratios."""
    mine = [x for x in lines if x["experiment"] == experiment and x["K"] == k and (select is None or select(x))]
    counts = Counter(x["verdict"] for x in mine)
    ratios = [x["ratio"] for x in mine if x["ratio"] and x["ratio"] > 0 and math.isfinite(x["ratio"])]
    called = sum(counts[v] for v in CALLED)
    pooled = [x["pooled_verdict"] for x in mine if x.get("pooled_verdict")]
    return {"experiment": experiment, "K": k, "what": what, "cases": len(mine),
            "pairs": len({(x["run_a"], x["run_b"]) for x in mine}),
            **{v: counts.get(v, 0) for v in ("faster", "slower", "noise")},
            "other": ", ".join(f"{v} {n}" for v, n in sorted(counts.items()) if v not in ("faster", "slower", "noise")),
            "called_share": called / len(mine) if mine else math.nan,
            "pooled_called_share": sum(v in CALLED for v in pooled) / len(pooled) if pooled else math.nan,
            "geomean_ratio": math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else math.nan,
            "min_ratio": min(ratios) if ratios else math.nan, "max_ratio": max(ratios) if ratios else math.nan}


def _quantile(values: list[float], q: float) -> float:
    """The q-quantile of the finite values (numpy's default, linear interpolation); nan when there are none."""
    import numpy as np

    xs = [v for v in values if math.isfinite(v)]
    return float(np.quantile(xs, q)) if xs else math.nan


def _median(values: list[float]) -> float:
    return _quantile(values, 0.5)


def _share(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:.0%}"


def _table(summary: list[dict], mdr: list[dict]) -> str:
    """The printed figures: verdict counts per experiment and K ("called": compare's, "pooled": the old rule's)."""
    head = (f"{'experiment':<16}{'K':>3}  {'what':<34}{'pairs':>6}{'cases':>7}{'faster':>8}{'slower':>8}{'noise':>7}"
            f"  {'called':>7}  {'pooled':>7}  {'geomean':>8}  {'range of ratios':<17}other")
    out = [head, "-" * len(head)]
    for s in summary:
        out.append(f"{s['experiment']:<16}{s['K']:>3}  {s['what']:<34}{s['pairs']:>6}{s['cases']:>7}{s['faster']:>8}"
                   f"{s['slower']:>8}{s['noise']:>7}  {_share(s['called_share']):>7}  "
                   f"{_share(s['pooled_called_share']):>7}  {s['geomean_ratio']:>8.3f}  "
                   f"{s['min_ratio']:.3f}-{s['max_ratio']:<11.3f}{s['other']}")
    out += ["", "smallest ratio two separate K-launch runs tell apart with 80% power at level 0.05 "
            "(min_detectable_ratio of the CV of the per-launch medians over the cases of the A/A runs of that "
            "K: their median, and their upper quartile for the noisier cases; sigma_b and within: "
            "variance_components, medians, for reference)",
            f"{'K':>3}  {'cases':>6}  {'CV of launch medians':>21}  {'ratio':>6}  {'CV, upper quartile':>19}"
            f"  {'ratio':>6}  {'sigma_b CV':>11}  {'within CV':>10}"]
    for m in mdr:
        out.append(f"{m['K']:>3}  {m['cases']:>6}  {m['median_cv']:>21.3f}  {m['min_detectable_ratio']:>6.3f}  "
                   f"{m['q75_cv']:>19.3f}  {m['q75_min_detectable_ratio']:>6.3f}  "
                   f"{m['between_cv']:>11.3f}  {m['within_cv']:>10.3f}")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one A/A pair per K and fewer sizes (about 5 minutes)")
    p.add_argument("--pairs", type=int, help="A/A pairs of runs per K (default 3, 1 with --quick)")
    p.add_argument("--results-dir", default="results", help="where replication_<time>/ is made (default results)")
    p.add_argument("--target-rse", type=float,
                   help="--target-rse of the slowdown experiments' runs (default: ccbench's, 0.05)")
    p.add_argument("--rounds", type=int, default=1,
                   help="--rounds of every run: visits of each case per launch (default 1)")
    p.add_argument("--only", help=f"comma-separated experiments to run, of {', '.join(EXPERIMENTS)} (default all)")
    args = p.parse_args()
    only = set(EXPERIMENTS) if not args.only else {x.strip() for x in args.only.split(",") if x.strip()}
    if not only or only - set(EXPERIMENTS):
        p.error(f"--only takes experiments of {', '.join(EXPERIMENTS)}")
    pairs = args.pairs if args.pairs is not None else (1 if args.quick else 3)
    if pairs < 1:
        p.error("--pairs must be at least 1")
    mode = "quick" if args.quick else "full"

    from ccbench.core.replication import min_detectable_ratio

    root = Path(args.results_dir) / f"replication_{time.strftime('%Y%m%d-%H%M%S')}"
    total = (2 * pairs * len(KS) * ("aa" in only) + 2 * len(KS) * ("thread" in only)
             + 2 * pairs * len(WORKLOAD_KS) * ("workload" in only)
             + (2 + 2 * SLOW_K) * ("slow20" in only) + (2 + 2 * SLOW_K) * ("twin" in only))
    bench = Launches(root, total=total, rounds=args.rounds)
    print(f"replication benchmark ({mode}, {pairs} A/A pair(s) per K, K = {', '.join(map(str, KS))}) -> {root}",
          flush=True)
    started = time.time()
    lines: list[dict] = []
    warnings: list[str] = []
    aa_runs: dict[int, list[Path]] = {k: [] for k in KS}

    # 1. A/A: identical runs, K interleaved so that drift over time does not line up with K
    for i in range(1, pairs + 1 if "aa" in only else 1):
        for k in KS:
            a = bench.run(f"aa-K{k}-{i}a", AA_ARGS, k)
            b = bench.run(f"aa-K{k}-{i}b", AA_ARGS, k)
            aa_runs[k] += [a, b]
            got, warn = _case_lines("aa", k, i, a, b)
            lines += got
            warnings += [f"aa K={k} pair {i}: {w}" for w in warn]

    # 2. a real difference: thread level single (slow when oversubscribed) against multiple
    thread = [*THREAD_ARGS, "-s", THREAD_SIZES[mode]]
    for k in KS if "thread" in only else ():
        fast = bench.run(f"thread-multiple-K{k}", [*thread, "--thread-level", "multiple"], k)
        slow = bench.run(f"thread-single-K{k}", [*thread, "--thread-level", "single"], k)
        got, warn = _case_lines("thread", k, 1, fast, slow)
        lines += got
        warnings += [f"thread K={k}: {w}" for w in warn if "thread level" not in w]

    # 3. a known 20% slowdown of ring, K = 5: separate runs, and paired with recursive_doubling
    rse = [] if args.target_rse is None else ["--target-rse", str(args.target_rse)]
    slow_args = [*SLOW_ARGS, "-s", SLOW_SIZES[mode], *rse]
    unslowed = None
    if "slow20" in only:
        unslowed = bench.run(f"slow20-none-K{SLOW_K}", slow_args, SLOW_K)
        slowed = bench.run(f"slow20-ring-K{SLOW_K}", slow_args, SLOW_K, fault=SLOW_FAULT)
        got, warn = _case_lines("slow20-separate", SLOW_K, 1, unslowed, slowed)
        lines += got
        warnings += [f"slow20 K={SLOW_K}: {w}" for w in warn]
        lines += _paired_lines(unslowed, slowed, SLOW_K)
        plain, slowed_runs = bench.alternate("slow20-alt", slow_args, SLOW_K, SLOW_FAULT)
        lines += _paired_lines(plain, slowed_runs, SLOW_K, experiment="slow20-alternated")

    # 4. the same slowdown of one of two identical schedules in the same launches, and a control
    twin_args = [*TWIN_ARGS, "-s", SLOW_SIZES[mode], *rse]
    if "twin" in only:
        control = bench.run(f"twin-control-K{SLOW_K}", twin_args, SLOW_K)
        twin_slowed = bench.run(f"twin-linear-K{SLOW_K}", twin_args, SLOW_K, fault=TWIN_FAULT)
        lines += _twin_lines(control, SLOW_K, slowed=False) + _twin_lines(twin_slowed, SLOW_K, slowed=True)
        lines += _paired_lines(control, twin_slowed, SLOW_K, "bcast", "linear", "binomial", "twin-paired")
        plain, slowed_runs = bench.alternate("twin-alt", twin_args, SLOW_K, TWIN_FAULT)
        lines += _paired_lines(plain, slowed_runs, SLOW_K, "bcast", "linear", "binomial", "twin-alternated")

    # 5. A/A of training-step runs: identical DDP steps (a small model of five tensors, 5.3 MiB)
    if "workload" in only:
        model = root / "aa-model.txt"
        model.write_text("\n".join(str(n) for n in (1048576, 262144, 65536, 16384, 4096)) + "\n")
        for i in range(1, pairs + 1):
            for k in WORKLOAD_KS:
                wargs = [*WORKLOAD_ARGS, "-m", str(model)]
                a = bench.run(f"aa-workload-K{k}-{i}a", wargs, k, workload=True)
                b = bench.run(f"aa-workload-K{k}-{i}b", wargs, k, workload=True)
                got, warn = _case_lines("aa-workload", k, i, a, b, pooled_rule=False)
                lines += got
                warnings += [f"aa-workload K={k} pair {i}: {w}" for w in warn]

    summary = []
    for k in WORKLOAD_KS if "workload" in only else ():
        summary.append(_summary(lines, "aa-workload", k, "identical DDP steps: called = false"))
    for k in KS if "aa" in only else ():
        summary.append(_summary(lines, "aa", k, "identical runs: called = false"))
    for k in KS if "thread" in only else ():
        summary.append(_summary(lines, "thread", k, "single vs multiple: called = found"))
    if "slow20" in only:
        summary.append(_summary(lines, "slow20-separate", SLOW_K, "ring +20%: called = found",
                                lambda x: x["algorithm"] == "ring"))
        summary.append(_summary(lines, "slow20-separate", SLOW_K, "recursive_doubling: called = false",
                                lambda x: x["algorithm"] == "recursive_doubling"))
        summary.append(_summary(lines, "slow20-paired", SLOW_K, "ring/rd per launch: called = found"))
        summary.append(_summary(lines, "slow20-alternated", SLOW_K, "the same, launches alternated"))
    if "twin" in only:
        summary.append(_summary(lines, "slow20-twin", SLOW_K, "linear +20% vs binomial: slower = found"))
        summary.append(_summary(lines, "twin-control", SLOW_K, "linear vs binomial: called = false"))
        summary.append(_summary(lines, "twin-paired", SLOW_K, "linear/binomial per launch: called = found"))
        summary.append(_summary(lines, "twin-alternated", SLOW_K, "the same, launches alternated"))

    cvs = [c for k in KS if k > 1 for run in aa_runs[k] for c in _launch_cvs(run, k)]
    paired_cvs = _paired_cvs(unslowed, SLOW_K) if unslowed is not None else []
    mdr = []
    for k in KS:
        if k == 1:
            continue
        mine = [c for c in cvs if c["K"] == k]
        med = _median([c["median_cv"] for c in mine])
        q75 = _quantile([c["median_cv"] for c in mine], 0.75)
        mdr.append({"K": k, "cases": len(mine), "median_cv": med,
                    "min_detectable_ratio": min_detectable_ratio(med, k) if math.isfinite(med) else math.nan,
                    "q75_cv": q75,
                    "q75_min_detectable_ratio": min_detectable_ratio(q75, k) if math.isfinite(q75) else math.nan,
                    "between_cv": _median([c["between_cv"] for c in mine]),
                    "within_cv": _median([c["within_cv"] for c in mine])})
    paired_cv = _median([c["paired_cv"] for c in paired_cvs])

    text = _table(summary, mdr)
    if math.isfinite(paired_cv):
        text += (f"\n\npaired design (ring / recursive_doubling in the same launches, unslowed run, K = {SLOW_K}): "
                 f"CV of the per-launch ratio {paired_cv:.3f} (median over {len(paired_cvs)} sizes); "
                 f"a paired K = {SLOW_K} test resolves about "
                 f"{min_detectable_ratio(paired_cv, SLOW_K):.3f} between two such runs")
    if warnings:
        text += "\n\nwarnings of the comparisons:\n" + "\n".join(f"  {w}" for w in warnings)
    text += f"\n\nruns, logs and these figures: {root}"
    print("\n" + text)

    (root / "replication.txt").write_text(text + "\n")
    with open(root / "replication-summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    fields = list(dict.fromkeys(key for x in lines for key in x))
    with open(root / "replication-cases.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(lines)
    doc = {"what": __doc__.splitlines()[0], "argv": sys.argv, "mode": mode, "pairs": pairs, "Ks": list(KS),
           "aa_args": AA_ARGS, "workload_args": WORKLOAD_ARGS, "thread_args": thread,
           "slow_args": slow_args, "slow_fault": SLOW_FAULT,
           "twin_args": twin_args, "twin_fault": TWIN_FAULT, "experiments": sorted(only), "rounds": args.rounds,
           "slow_K": SLOW_K, "cores": os.cpu_count(), "seconds": round(time.time() - started, 1),
           "summary": summary, "min_detectable": mdr, "paired_cv": paired_cv, "paired_cvs": paired_cvs,
           "launch_cvs": cvs, "warnings": warnings, "runs": bench.records, "cases": lines}
    (root / "replication.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
