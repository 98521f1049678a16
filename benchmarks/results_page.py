"""The manual's page of results measured on this project's own machines, written from reference/.

    python benchmarks/results_page.py            # rewrite docs/results.md
    python benchmarks/results_page.py --check    # exit 1, with a diff, when docs/results.md differs from it
    python benchmarks/results_page.py --out FILE # write the page elsewhere

Every figure is recomputed from the files in reference/ (reference/README.md says what each holds and how it
was made) by the functions the commands call: ``fit_run`` (``ccbench fit``), ``cross_validate`` (``predict
--against``), ``memory_limit`` (``report``), the workload schedules (``workload predict``).  Nothing is typed
in, so a figure cannot drift from its data; tests/test_docs.py regenerates the page and fails when the
committed one differs.  The machine and the command of every section come from the stored files too.
"""

import argparse
import csv
import difflib
import json
import shlex
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

from ccbench.analysis.fit import NetworkParams
from ccbench.core.units import fmt_time, format_size
from ccbench.present.report import render_markdown
from ccbench.present.table import Column, Table, fmt_ratio, to_block
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "results.md"
REGENERATE = "python benchmarks/results_page.py"


# --------------------------------------------------------------------------- formatting


def _span(values, fmt=lambda v: f"{v:.3g}", sep="-") -> str:
    """"lo-hi" of the values (one value when both ends read the same)."""
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}{sep}{hi}"


def _pct(values) -> str:
    """A range of shares: "0%", "22-100%"."""
    lo, hi = min(values), max(values)
    return f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo * 100:.0f}-{hi:.0%}"


def _table(headers: list[str], rows: list[list], right: set[int] = frozenset()) -> tuple:
    """A page table through the table model (every cell already text)."""
    t = Table("", [Column(h, align="right" if i in right else "left") for i, h in enumerate(headers)])
    for r in rows:
        t.add_row(*[str(c) for c in r])
    return to_block(t)[0]


def _args(argv: list[str]) -> list[str]:
    """A stored argv without what only the reference runs needed (their results directory, --show/--no-show)."""
    out, skip = [], False
    for a in argv:
        if skip or a == "--results-dir":
            skip = not skip
        elif a not in ("--show", "--no-show"):
            out.append(a)
    return out


def _command(meta: dict, lab: bool = False) -> str:
    """The command that made a run, from its run.json: as typed, or, for a rank's own argv (``ccbench/__main__.py
    run|workload ...``), the launch that started it."""
    args = _args(meta["argv"])
    if args[0] == "ccbench":
        return shlex.join(args)
    n = str(meta["nranks"])
    if lab:
        return shlex.join(["ccbench", "lab", "run", "-n", n, "--", *args[2:]])
    if args[1] == "run":
        return shlex.join(["ccbench", "launch", "-n", n, *args[2:]])
    return shlex.join(["ccbench", *args[1:], "--launch", n])


def _script(doc: dict) -> str:
    """The command of a benchmark script's result file (its argv starts with the script)."""
    return "python " + shlex.join(_args(doc["argv"]))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()


# --------------------------------------------------------------------------- the machines


def _machine(meta: dict) -> str:
    """A run's machine, from its run.json: host, CPU, cores, memory; MPI library; Python."""
    hosts = meta["hardware"]["nodes"]
    (host,) = hosts  # every reference run ran on one node
    hw = hosts[host]
    mpi = " ".join(meta["mpi_library"].replace("Version:", "").split())
    return (f"{host} ({hw['cpu']['model']}, {hw['cpu']['cores']} cores, {format_size(hw['memory']['total_bytes'])}), "
            f"{mpi}, Python {meta['python']}")


def _date(meta: dict) -> str:
    return meta["start_time"][:10]


def _measured(metas: list[dict], commands: list[str], where: str) -> tuple:
    """The paragraph under a section's heading: machine, date, the command(s) and where the files are."""
    machines = sorted({_machine(m) for m in metas})
    dates = sorted({_date(m) for m in metas})
    cmds = "; then ".join(f"`{c}`" if c.startswith(("ccbench ", "python ")) else c for c in commands)
    return ("p", f"Machine: {', '.join(machines)}.  Measured {' and '.join(dates)}.  Command: {cmds}.  "
                 f"Files: `{where}`.")


def _file_date(path: Path) -> str:
    """The date in a benchmark result file's name (``NAME_YYYYMMDD-HHMMSS.EXT``)."""
    stamp = path.stem.rsplit("_", 1)[1]
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}"


def _runs(ref: Path, group: str) -> list[Path]:
    """The run directories under reference/`group`/, oldest first (their names start with the time)."""
    return sorted(p for p in (ref / group).iterdir() if p.is_dir())


# --------------------------------------------------------------------------- launches and verdicts


def _replication(ref: Path) -> tuple[list, list[str]]:
    files = sorted((ref / "replication").glob("replication_*.json"))
    docs = [json.loads(p.read_text()) for p in files]
    dates = sorted({_file_date(p) for p in files})
    default = [d for d in docs if "--only" not in d["argv"]]

    def summaries(ds, exp, K=None):
        return [s for d in ds for s in d["summary"] if s["experiment"] == exp and K in (None, s["K"])]

    def called(ss):
        return [(s["slower"] + s["faster"]) / s["cases"] for s in ss]

    def cells(ds, exp, Ks=(1, 3, 5)):
        out = []
        for K in (1, 3, 5):
            ss = summaries(ds, exp, K) if K in Ks else []
            if not ss:
                out.append("")
                continue
            all_undecided = all(s["other"] == f"undetermined {s['cases']}" for s in ss)
            out.append(_pct(called(ss)) + (" (all undetermined)" if all_undecided else ""))
        return out

    (ncases,) = {s["cases"] for s in summaries(default, "aa")}
    (npairs,) = {d["pairs"] for d in default}
    r4 = [d for d in docs if d["rounds"] == 4 and summaries([d], "aa")]
    wl = [d for d in docs if summaries([d], "aa-workload")]
    th = summaries(docs, "thread")
    sep = summaries(docs, "slow20-separate")
    ring = [s for s in sep if s["what"].startswith("ring")]
    ctrl = [s for s in sep if not s["what"].startswith("ring")]

    def tally(ss):
        c = sum(s["slower"] + s["faster"] for s in ss)
        return f"{c} of {sum(s['cases'] for s in ss)} ({_pct(called(ss))} per run)"

    md = {K: [m["min_detectable_ratio"] for d in default for m in d["min_detectable"] if m["K"] == K] for K in (3, 5)}
    geo = [s["geomean_ratio"] for s in th]
    rows = [
        [f"identical runs ({npairs} pairs, {ncases} cases; {len(default)} runs of the benchmark): called different",
         *cells(default, "aa"), _pct([s["pooled_called_share"] for s in summaries(default, "aa")])],
        [f"the same with `--rounds 4` ({r4[0]['pairs']} pairs, {summaries(r4, 'aa')[0]['cases']} cases)",
         *cells(r4, "aa"), _pct([s["pooled_called_share"] for s in summaries(r4, "aa")])],
        [f"identical training steps (`--only workload`: DDP at 2 ranks, {wl[0]['pairs']} pairs, "
         f"{summaries(wl, 'aa-workload')[0]['cases']} steps and calls): called different",
         *cells(wl, "aa-workload", (1, 3)), "-"],
        [f"thread level single against multiple at 4 ranks ({_span(geo, lambda v: f'{v:.0f}')}x): called slower",
         *[_pct(called(summaries(docs, "thread", K))) for K in (1, 3, 5)],
         _pct([s["pooled_called_share"] for s in th])],
        ["ring slowed 20% (`CCBENCH_FAULT=slow:all:allreduce/ring:20%`), separate runs: found", "", "",
         f"{tally(ring)}; {sum(s['faster'] for s in ring)} called faster",
         _pct([s["pooled_called_share"] for s in ring])],
        [f"its untouched control (recursive_doubling), the same {len(ring)} pairs of runs: called different", "",
         "", tally(ctrl), _pct([s["pooled_called_share"] for s in ctrl])],
        ["smallest ratio two separate runs tell apart (80% power, median case)", "-",
         *[_span(md[K], lambda v: f"{v:.2f}") + "x" for K in (3, 5)], "-"],
    ]

    def found(exp, rounds):  # [(called, cases)] per stored run of the benchmark with `rounds`
        return [(s["slower"] + s["faster"], s["cases"]) for d in docs if d["rounds"] == rounds
                for s in d["summary"] if s["experiment"] == exp]

    designs = {"slow20-paired": "ring slowed 20%, recursive_doubling in the same launches",
               "twin-paired": "bcast linear slowed 20%, binomial in the same launches (`--only twin`)",
               "slow20-alternated": "ring slowed 20%, single-launch runs alternated in time (A B B A ...)",
               "twin-alternated": "bcast linear slowed 20%, single-launch runs alternated in time"}
    inside = []
    for exp, what in designs.items():
        for rounds in sorted({d["rounds"] for d in docs}):
            if per_run := found(exp, rounds):
                c, n = sum(c for c, _ in per_run), sum(n for _, n in per_run)
                inside.append([what, str(rounds), ", ".join(f"{c / n:.0%}" for c, n in per_run),
                               f"{c / n:.0%} of {n}"])
    cvs: dict[str, list[float]] = {}
    for d in docs:
        if summaries([d], "slow20-paired"):
            cvs.setdefault(_script(d), []).append(d["paired_cv"])
    worst_doc = max((d for d in docs if summaries([d], "slow20-separate")),
                    key=lambda d: max(s["slower"] + s["faster"] for s in summaries([d], "slow20-separate")
                                      if not s["what"].startswith("ring")))
    (w_ctrl,) = [s for s in summaries([worst_doc], "slow20-separate") if not s["what"].startswith("ring")]
    (w_ring,) = [s for s in summaries([worst_doc], "slow20-separate") if s["what"].startswith("ring")]

    aa = summaries(docs, "aa")
    pooled = [s["pooled_called_share"] for s in aa]
    worst = max((s["slower"] + s["faster"]) / s["cases"] for s in aa)
    best = min((s["slower"] + s["faster"]) / s["cases"] for s in aa)
    paired4 = [found(e, 4) for e in ("slow20-paired", "twin-paired")]
    shares4 = [sum(c for c, _ in r) / sum(n for _, n in r) for r in paired4]
    one = found("slow20-paired", 1) + found("twin-paired", 1)
    one_share = sum(c for c, _ in one) / sum(n for _, n in one)
    summary = [
        f"Identical runs compared: {best * 100:.0f}-{worst:.1%} of cases called different once launches are the unit "
        f"(the pooled-sample rule called {min(pooled):.0%}-{max(pooled):.0%}).",
        f"Thread level single against multiple at 4 ranks on 2 cores ({_span(geo, lambda v: f'{v:.0f}')}x "
        "geometric mean): found in every case.",
        f"A 20% slowdown: found at {min(shares4):.0%}-{max(shares4):.0%} of sizes with 5 paired launches of 4 rounds "
        f"each, {one_share:.0%} in one round.",
    ]
    blocks = [
        ("h", 2, "Launches and verdicts"),
        ("p", "How often `ccbench compare` calls identical runs different, and how often it finds a real "
              "difference.  Launches per run: K.  \"pooled\": the rule `compare` used before deciding per launch "
              "(a Mann-Whitney test of the pooled samples)."),
        ("p", f"Machine: {docs[0]['cores']} cores (the benchmark files record no more).  Measured "
              f"{' and '.join(dates)}.  Command: `python benchmarks/replication.py` ({len(docs)} runs, with the "
              "options below).  Files: `reference/replication/`."),
        _table(["experiment", "K = 1", "K = 3", "K = 5", "pooled"], rows, {1, 2, 3, 4}),
        ("p", f"Of the {len(ring)} pairs of separate runs, the one whose untouched control was called different most "
              f"often: the control's geometric-mean ratio was {w_ctrl['geomean_ratio']:.2f}.  {w_ctrl['faster']} of "
              f"its {w_ctrl['cases']} control sizes were called faster and {w_ctrl['slower']} slower; of the slowed "
              f"ring's, {w_ring['faster']} faster and {w_ring['slower']} slower.  Two runs made a minute apart can "
              "differ for real, and a comparison of separate runs measures that too."),
        ("p", "A 20% slowdown inside one run, K = 5, per stored run of the benchmark:"),
        _table(["design", "rounds", "found per run", "found in all"], inside, {1}),
        ("p", "Spread of the per-launch ratio ring / recursive_doubling in the run without the slowdown "
              "(median over sizes of its CV), per command:"),
        _table(["command", "runs", "CV"], [[f"`{c}`", str(len(v)), ", ".join(f"{x:.3f}" for x in v)]
                                           for c, v in cvs.items()], {1}),
    ]
    return blocks, summary


def _durations(ref: Path) -> list:
    out = {}
    metas = []
    for p in sorted((ref / "timing").glob("*.run.json")):
        m = json.loads(p.read_text())
        secs = (datetime.fromisoformat(m["end_time"]) - datetime.fromisoformat(m["start_time"])).total_seconds()
        out[(m["config"].get("launches") or 1, m["config"].get("rounds") or 1)] = (m, secs)
        metas.append(m)
    rows = [[f"`{_command(m)}`", str(m["finished_cases"]), f"{secs:.0f} s"]
            for (_, _), (m, secs) in sorted(out.items())]
    return [("h", 2, "How long a sweep takes"),
            _measured(metas, ["each below"], "reference/timing/"),
            _table(["command", "cases", "wall time"], rows, {1, 2})]


# --------------------------------------------------------------------------- the timing loops


def _fidelity(ref: Path) -> tuple[list, list[str]]:
    (path,) = sorted((ref / "fidelity").glob("harness_fidelity_*.csv"))
    (doc,) = [json.loads(p.read_text()) for p in (ref / "fidelity").glob("harness_fidelity_*.json")]
    rows = {(int(r["nranks"]), r["collective"], int(r["nbytes"])): r for r in csv.DictReader(path.open())}
    keys = ["c_per_call_s", "c_b2b_s", "mpi4py_per_call_s", "mpi4py_b2b_s", "ccb_py_per_call_s", "ccb_py_batched_s",
            "ccb_c_per_call_s", "ccb_c_batched_s"]
    table = [[f"{c} {format_size(n)}", *[f"{float(r[k]) * 1e6:.3g}" for k in keys]]
             for (P, c, n), r in rows.items() if P == 2]
    small = [rows[(2, c, 8)] for c in ("allreduce", "bcast", "allgather")]
    compiled = [float(r["ccb_c_per_call_s"]) / float(r["c_per_call_s"]) for r in small]
    py, bare = ([float(r[k]) * 1e6 for r in small] for k in ("ccb_py_per_call_s", "mpi4py_per_call_s"))
    longer = "no longer than" if all(a <= b for a, b in zip(py, bare, strict=True)) else "longer than"
    goals = Counter((g["goal"], g["nbytes"] < 1024) for g in doc["goals"])
    met = Counter((g["goal"], g["nbytes"] < 1024) for g in doc["goals"] if g["met"])
    goal_rows = [[g, "8-16 B" if small_size else "64 KiB", str(n), str(met[(g, small_size)])]
                 for (g, small_size), n in sorted(goals.items())]
    summary = [f"At 8 B and 2 ranks the compiled loop (`--loop compiled`) took {compiled[0]:.2f}x (allreduce), "
               f"{compiled[1]:.2f}x (bcast) and {compiled[2]:.2f}x (allgather) the time of a C loop of OSU's method; "
               f"the Python loop took {longer} a bare mpi4py loop."]
    blocks = [
        ("h", 2, "Timing loops against C and mpi4py"),
        ("p", "How close each timing loop comes to a C loop of OSU's method and to a bare mpi4py loop.  "
              "Each figure: the median of per-sample maxima over ranks, then the median over rounds of launches."),
        ("p", f"Machine: {doc['cores']} cores (the benchmark file records no more).  Measured {_file_date(path)}.  "
              f"Command: `{_script(doc)}`.  Files: `{_rel(path.parent)}/`."),
        _table(["2 ranks, us", "C per call", "C back to back", "mpi4py per call", "mpi4py back to back",
                "ccbench per call", "ccbench batched:10", "compiled per call", "compiled batched:10"],
               table, set(range(1, 9))),
        ("p", summary[0] + f"  Per call at 8 B the Python loop took {py[0]:.2f}, {py[1]:.2f} and {py[2]:.2f} us, "
              f"bare mpi4py {bare[0]:.2f}, {bare[1]:.2f} and {bare[2]:.2f} us."),
        ("p", f"The goals the script checks, {sum(met.values())} of {len(doc['goals'])} met (2 and 4 ranks; "
              "at 4 ranks the 2 cores are oversubscribed and every loop measures the scheduler):"),
        _table(["goal", "size", "cases", "met"], goal_rows, {2, 3}),
    ]
    return blocks, summary


# --------------------------------------------------------------------------- algorithms


def _algorithms(ref: Path) -> list:
    runs = [open_run(p) for p in _runs(ref, "algorithms")]
    sizes = [1 << 10, 64 << 10, 1 << 20, 4 << 20]
    rows, best = [], {}
    for run in runs:
        med = {(r.algorithm, r.nbytes): r.median_s for r in run.rows if r.collective == "allreduce"}
        P = run.meta["nranks"]
        rows.append([f"native allreduce, {P} ranks", *[fmt_time(med[("native", n)]) for n in sizes]])
        rows += [[f"{alg} / native", *[f"{med[(alg, n)] / med[('native', n)]:.2f}" for n in sizes]]
                 for alg in ("ring", "rabenseifner")]
        best[P] = [min(t / med[("native", n)] for (a, n), t in med.items() if a != "native" and n == m)
                   for m in sizes if m >= 1 << 20]
    (p2p,) = [json.loads(p.read_text()) for p in (ref / "algorithms").glob("p2p-overhead_*.json")]
    levels = {0: "single", 1: "funneled", 2: "serialized", 3: "multiple"}
    return [
        ("h", 2, "Hand-written against native"),
        ("p", "Native and hand-written allreduce, measured by the same loop in the same launch.  "
              "2 ranks run single-threaded; 4 ranks oversubscribe the 2 cores and run thread-multiple."),
        _measured([r.meta for r in runs], ["python benchmarks/algorithms_vs_native.py"], "reference/algorithms/"),
        _table(["", *map(format_size, sizes)], rows, {1, 2, 3, 4}),
        ("p", f"The best hand-written allreduce at 1 MiB and above took {_span(best[2], lambda v: f'{v:.2f}')}x "
              f"native's time at 2 ranks and {_span(best[4], lambda v: f'{v:.2f}')}x at 4 (the script's goal: within "
              "1.3x)."),
        ("p", f"The counted point-to-point layer costs {p2p['overhead_s'] * 1e6:.2f} us per step over a bare mpi4py "
              f"`Sendrecv` ({p2p['counted_s'] * 1e6:.2f} us against {p2p['bare_s'] * 1e6:.2f} us; goal: under 2 us; "
              f"{p2p['nranks']} ranks, thread level {levels[p2p['thread_level']]})."),
    ]


# --------------------------------------------------------------------------- models


def _models(ref: Path) -> tuple[list, list[str], NetworkParams]:
    from ccbench.analysis.runs import fit_run
    from ccbench.present.model_tables import gamma_line

    (path,) = _runs(ref, "models")
    run = open_run(path)
    fit = fit_run(run)
    rows, large = [], None
    for name, checks in fit.checks_by_params.items():
        for s in checks.summary:
            if s.collective == "allreduce":
                large = s.large_bytes
                rows.append([name + (" (used)" if name == fit.network.used_for_predictions else ""), s.kind,
                             str(s.cases), str(s.off), fmt_ratio(s.median_ratio), fmt_ratio(s.worst_ratio),
                             fmt_ratio(s.median_ratio_large), fmt_ratio(s.worst_ratio_large)])
    eff = {s.kind: s for s in fit.checks_by_params["effective"].summary if s.collective == "allreduce"}
    big = sorted({c.nbytes for c in fit.model_checks if c.nbytes >= large})
    sizes = f"{format_size(big[0])}-{format_size(big[-1])}"
    summary = [f"From a 4-rank run's own fit, the median measured/predicted time of allreduce at {sizes} was "
               f"{fmt_ratio(eff['hand-written'].median_ratio_large)} (hand-written) and "
               f"{fmt_ratio(eff['native'].median_ratio_large)} (native)."]
    pp = fit.network.pingpong
    blocks = [
        ("h", 2, "Model checks"),
        ("p", "How far measured times are from the alpha-beta-gamma model, per parameter set (`ccbench fit`'s "
              "\"model checks under each parameter set\").  Ratio: measured / predicted."),
        _measured([run.meta], [_command(run.meta), f"ccbench fit {_rel(path)}"], _rel(path)),
        _table(["parameters", "kind", "cases", "off by > 25%", "median", "worst",
                f"median >= {format_size(large)}", f"worst >= {format_size(large)}"], rows, set(range(2, 8))),
        ("p", summary[0] + f"  The sizes at and above {format_size(large)}: "
              f"{' and '.join(map(format_size, big))}."),
        ("p", f"The reduction rates the fit used (`ccbench fit`'s gamma line): "
              f"{gamma_line(fit.network.effective.numpy)}."),
        ("p", f"The ping-pong fit: alpha {fmt_time(pp.alpha_s)}, {pp.bandwidth_gbs:.3g} GB/s."),
    ]
    return blocks, summary, pp


def _crossval(ref: Path) -> tuple[list, list[str]]:
    from ccbench.analysis.crossval import cross_validate
    from ccbench.analysis.fit import gamma_per_path
    from ccbench.present.model_tables import gamma_text

    small_p, large_p = _runs(ref, "crossval")
    small, large = open_run(small_p), open_run(large_p)
    doc = cross_validate([small], large)
    every = {s["collective"]: s for s in doc["summary"] if s["kind"] == "all"}
    rows = [[c, fmt_ratio(s["median_ratio"]), fmt_ratio(s["worst_ratio"])] for c, s in every.items()]
    agree = doc["agreement"]

    def native_8k(run):
        (row,) = [r for r in run.rows if (r.collective, r.algorithm, r.nbytes) == ("allreduce", "native", 8192)]
        return row.median_s

    g = {(x["path"], x["temperature"]): x["gamma_s_per_byte"] for x in gamma_per_path(small.meta["reduce_local"])
         if x["dtype"] == "float32" and x["op"] == "sum" and "error" not in x}
    nw, nc, mw, mc = g[("numpy", "warm")], g[("numpy", "cold")], g[("mpi", "warm")], g[("mpi", "cold")]
    medians = [s["median_ratio"] for s in every.values()]
    summary = [f"Fitted at 2 ranks and checked at 4 (`predict --against`), the model missed by "
               f"{min(medians):.1f}-{max(medians):.1f}x in the median: 4 ranks oversubscribe 2 cores."]
    return [
        ("h", 2, "Cross-validation"),
        ("p", "Parameters fitted on a 2-rank run predict a 4-rank run of the same machine."),
        _measured([small.meta, large.meta], [_command(small.meta), _command(large.meta),
                                             f"ccbench predict --from {_rel(small_p)} --against {_rel(large_p)}"],
                  "reference/crossval/"),
        _table(["collective", "median measured / predicted", "worst"], rows, {1, 2}),
        ("p", f"{summary[0]}  Parameters: {doc['params']}.  The predicted winner was the measured one at "
              f"{agree['agree']} of {agree['sizes']} sizes.  The native 8 KiB allreduce took "
              f"{fmt_time(native_8k(large))} at 4 ranks against {fmt_time(native_8k(small))} at 2."),
        ("p", f"The two reduction paths of the 2-rank run (float32 sum): numpy {gamma_text(nw)} warm and "
              f"{gamma_text(nc)} cold; MPICH's `MPI_Reduce_local` {gamma_text(mw)} warm ({mw / nw:.1f}x numpy's) "
              f"and {gamma_text(mc)} cold ({mc / nc:.2f}x)."),
    ], summary


# --------------------------------------------------------------------------- the node's limit


def _limits(ref: Path) -> tuple[list, list[str]]:
    from ccbench.analysis.limits import best_shares, memory_limit

    runs = [open_run(p) for p in _runs(ref, "limits")]
    rows, shares = [], {}
    for P in sorted({r.meta["nranks"] for r in runs}):
        lims, best = [], {"hand-written": [], "native": []}
        for run in (r for r in runs if r.meta["nranks"] == P):
            lim = memory_limit(run.meta["memory_bandwidth"])
            busbw = {r.algorithm: r.busbw_gbs for r in run.rows if r.collective == "allreduce" and r.nbytes == 4 << 20}
            for side, (alg, share) in best_shares(busbw, lim.copy_gbs).items():
                best[side].append((alg, share, busbw[alg]))
            lims.append(lim)

        def cell(picks):
            names = ", ".join(a for a, _ in Counter(a for a, _, _ in picks).most_common())
            return (f"{_span([s for _, s, _ in picks], lambda v: f'{v * 100:.0f}')}% ({names}; "
                    f"{_span([bw for _, _, bw in picks])} GB/s)")

        rows.append([str(P), f"{_span([x.one_core_gbs for x in lims])} GB/s",
                     f"{_span([x.limiting.aggregate_gbs for x in lims])} GB/s",
                     f"{_span([x.copy_gbs for x in lims])} GB/s", cell(best["hand-written"]), cell(best["native"])])
        shares[P] = [s for _, s, _ in best["hand-written"]]
    pct = {P: _span(s, lambda v: f"{v * 100:.0f}") for P, s in shares.items()}
    summary = [f"The best hand-written 4 MiB allreduce reached {pct[2]}% of the node's memory-copy limit at 2 ranks "
               f"and {pct[4]}% at 4 (above 100%: the buffers stayed in cache)."]
    return [
        ("h", 2, "The node's memory-copy limit"),
        ("p", "Bus bandwidth of the 4 MiB allreduce as a share of the per-rank memory-copy limit, as `ccbench "
              "report` prints it.  Three runs of each rank count, interleaved; ranges over the three."),
        _measured([r.meta for r in runs], [*sorted({_command(r.meta) for r in runs}), "ccbench report RUN"],
                  "reference/limits/"),
        _table(["ranks", "one core", "node, all ranks at once", "limit per rank", "best hand-written",
                "best native"], rows, {0, 1, 2, 3}),
        ("p", summary[0]),
    ], summary


# --------------------------------------------------------------------------- the lab


def _lab_commands(runs: list) -> list[str]:
    """The lab cycle that made the runs: `lab up` with the first run's links, `lab set` where they change."""
    out, links = [], None
    for run in runs:
        lab = run.meta["lab"]
        rate = lab["rate_bps"]
        now = f"--delay {fmt_time(lab['delay_s']).replace(' ', '')} --rate " + (
            f"{rate / 1e9:g}gbit" if rate >= 1e9 else f"{rate / 1e6:g}mbit")
        if now != links:
            out.append(f"ccbench lab set {now}" if links else f"ccbench lab up --hosts {lab['lab_hosts']} {now}")
            links = now
        out.append(_command(run.meta, lab=True))
    return out


def _lab(ref: Path) -> list:
    import numpy as np

    from ccbench.analysis.runs import fit_run, given_params, predict_table

    paths = _runs(ref, "lab")
    base = [p for p in paths if p.name.endswith("_lab-baseline")]
    measured = [open_run(p) for p in paths if p not in base]
    pingpong = [r for r in measured if r.meta["nranks"] == 2]
    (allreduce,) = [r for r in measured if r.meta["nranks"] != 2]
    rows, shares, base_alphas, fits = [], [], [], []
    for run in pingpong:
        lab = fit_run(run).lab
        fits.append(lab)
        inj = lab["injected"]
        base_alphas.append(lab["baseline"]["alpha_s"])
        rate = inj["rate_bps"]
        link = f"{rate / 1e9:g} Gbit/s" if rate >= 1e9 else f"{rate / 1e6:g} Mbit/s"
        sign = "+" if lab["delay_error_s"] >= 0 else "-"
        rows.append([f"{fmt_time(inj['delay_s'])}, {link}", fmt_time(lab["baseline"]["alpha_s"]),
                     fmt_time(lab["fitted"]["alpha_s"]),
                     f"{fmt_time(lab['fitted_delay_s'])} ({sign}{fmt_time(abs(lab['delay_error_s']))})",
                     f"{lab['fitted']['rate_bps'] / 1e6:.4g} Mbit/s ({lab['rate_error']:+.1%})"])
        delay, bps = run.meta["lab"]["delay_s"], run.meta["lab"]["rate_bps"]
        mid = [r for r in run.rows if 256 <= r.nbytes <= 32 << 10]
        late = sum(int(np.sum(np.asarray(r.samples_s) > 1.5 * delay + r.nbytes * 8 / bps)) for r in mid)
        shares.append(late / sum(len(r.samples_s) for r in mid))

    def lateness(run):
        doc = json.loads((run.path / "lab-traffic.json").read_text())
        counts, edges = doc["emulator_lateness_counts"], doc["emulator_lateness_edges_s"]
        total = sum(counts)
        within = sum(c for c, e in zip(counts, edges, strict=True) if e is not None and e <= 10e-6)
        over = sum(c for c, e in zip(counts, edges, strict=True) if e is None or e > 100e-6)
        return [str(total), f"{within / total:.0%}", f"{over / total:.1%}"]

    late_rows = [[f"ping-pong, {fmt_time(r.meta['lab']['delay_s'])}", *lateness(r)] for r in pingpong]
    late_rows.append([f"allreduce, {allreduce.meta['nranks']} hosts", *lateness(allreduce)])
    # the allreduce against the model: the fitted alpha of the run at the allreduce's links, the injected rate
    (same,) = [lab for lab, r in zip(fits, pingpong, strict=True)
               if r.meta["lab"]["delay_s"] == allreduce.meta["lab"]["delay_s"]]
    alpha = fmt_time(same["fitted"]["alpha_s"]).replace(" ", "")
    beta = f"{allreduce.meta['lab']['rate_bps'] / 8 / 1e6:g}MB/s"
    P = allreduce.meta["nranks"]
    sizes = sorted({r.nbytes for r in allreduce.rows})
    params, _ = given_params(None, alpha, beta, None)
    (tab,) = predict_table(params, [P], sizes, ["allreduce"])
    names = {"ring": "ring", "recursive_doubling": "RD", "rabenseifner": "Rab"}

    def order(t):
        o = sorted(names, key=t.get)
        return names[o[0]] + "".join((" ~ " if t[b] / t[a] < 1.05 else " < ") + names[b]
                                     for a, b in zip(o, o[1:], strict=False))

    ar_rows, ratios = [], []
    for i, n in enumerate(sizes):
        meas = {r.algorithm: r.median_s for r in allreduce.rows if r.nbytes == n}
        pred = {a: tab.times_s[a][i] for a in names}
        ratios += [meas[a] / pred[a] for a in names]
        ar_rows.append([format_size(n), *[f"{fmt_time(meas[a])} ({fmt_time(pred[a])})" for a in names],
                        order(meas), order(pred)])
    rab = ratios[-1]
    delay = fmt_time(allreduce.meta["lab"]["delay_s"])
    return [
        ("h", 2, "The emulated lab"),
        ("p", "Links of a chosen delay and rate, and what `ccbench fit` recovers from a ping-pong over them."),
        _measured([r.meta for r in measured], [*_lab_commands(measured), "ccbench fit RUN"], "reference/lab/"),
        ("p", "The MPI environment of every run: "
              + ", ".join(f"`{k}={v}`" for k, v in measured[0].meta["lab"]["env"].items()) + "."),
        _table(["links", "baseline alpha", "fitted alpha", "fitted delay (error)", "fitted rate (error)"], rows,
               {1, 2, 3, 4}),
        ("p", f"The software's own one-way cost (MPI, TCP, the emulator's path) was "
              f"{_span([a * 1e6 for a in base_alphas])} us; `lab up` measures it at zero delay and `fit` subtracts "
              f"it.  From 256 B on, {_span(shares, lambda v: f'{v * 100:.0f}')}% of the ping-pongs paid one extra "
              "link delay (at 256 B-32 KiB: longer than 1.5 delays plus the serialisation time)."),
        ("p", "How late the emulator released packets (`lab-traffic.json` of each run):"),
        _table(["run", "releases", "within 10 us", "over 100 us late"], late_rows, {1, 2, 3}),
        ("p", f"Allreduce on {P} hosts at {delay} and {allreduce.meta['lab']['rate_bps'] / 1e6:g} Mbit/s: medians, "
              f"the model's prediction in parentheses (`ccbench predict --alpha {alpha} --beta {beta} -n {P} -s "
              f"{_args(allreduce.meta['argv'])[_args(allreduce.meta['argv']).index('-s') + 1]} "
              f"-C allreduce`).  \"~\" marks times within 5% of each other."),
        _table(["size", "ring", "recursive doubling", "Rabenseifner", "measured order", "predicted order"], ar_rows,
               {1, 2, 3}),
        ("p", f"The measured times were {min(ratios):.2f}-{max(ratios):.2f}x the predictions; Rabenseifner at "
              f"{format_size(sizes[-1])} {rab:.2f}x."),
    ]


# --------------------------------------------------------------------------- training workloads


def _workloads(ref: Path, pingpong: NetworkParams) -> list:
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.runs import given_params
    from ccbench.workloads.models import load_model
    from ccbench.workloads.schedule import ddp_schedule, predict_step_s

    runs = {}
    for p in _runs(ref, "workloads"):
        run = open_run(p)
        r = run.rows[0]
        runs[(r.workload, r.collective if r.workload == "straggler" else r.model.strip("-"))] = run

    def steps(run, variant):
        return {r.algorithm: r.median_s for r in run.rows if r.label == "step" and r.variant.startswith(variant)}

    def calls(run, variant):
        (n,) = {r.ncalls for r in run.rows if r.label == "step" and r.variant.startswith(variant)}
        return f"{n} call{'s' if n != 1 else ''}"

    t = fmt_time
    rows = []
    for model in ("resnet50", "gpt2"):
        run = runs[("ddp", model)]
        for variant in ("bucketed", "per_tensor"):
            s = steps(run, variant)
            rows.append([f"ddp {model}", f"{variant}: {calls(run, variant)}", t(s["allreduce=native"]),
                         t(s["allreduce=ring"]), t(s["allreduce=rabenseifner"])])
    zero = runs[("zero", "bert-base")]
    for variant in ("zero2", "zero3"):
        s = steps(zero, variant)
        rows.append(["zero bert-base", f"{variant}: {calls(zero, variant)}",
                     t(s["reduce_scatter=native,allgather=native"]),
                     t(s["reduce_scatter=pairwise,allgather=ring"]) + " (pairwise + ring)", ""])
    for variant in ("ddp_flat", "ddp_layer"):
        s = steps(zero, variant)
        rows.append(["zero bert-base", f"{variant}: {calls(zero, variant)}", t(s["allreduce=native"]),
                     t(s["allreduce=ring"]), ""])
    moe = runs[("moe", "")]
    for ep in (2, 4):
        s = steps(moe, f"ep={ep}")
        rows.append(["moe", f"EP = {ep}", t(s["alltoall=native"]),
                     f"{t(s['alltoall=pairwise'])} (pairwise), {t(s['alltoall=bruck'])} (bruck)", ""])
    gpt2 = runs[("ddp", "gpt2")]
    b, pt = steps(gpt2, "bucketed"), steps(gpt2, "per_tensor")
    ratio = {a: pt[f"allreduce={a}"] / b[f"allreduce={a}"] for a in ("native", "ring", "rabenseifner")}
    overlap = [r.overlap_pct for r in runs[("overlap", "resnet50")].rows]

    def slowdowns(coll, nbytes=None, algs=None):
        return [r.slowdown for r in runs[("straggler", coll)].rows
                if (nbytes is None or r.nbytes == nbytes) and (algs is None or r.algorithm.split("=")[1] in algs)]

    allred = slowdowns("allreduce")
    tree = slowdowns("bcast", 1024, ("binomial", "linear", "pipelined_chain", "native"))
    (sa,) = slowdowns("bcast", 1024, ("scatter_allgather",))
    big = slowdowns("bcast", 256 << 10)
    delay = runs[("straggler", "allreduce")].rows[0]
    P = 1024
    alpha, bw = fmt_time(pingpong.alpha_s).replace(" ", ""), f"{pingpong.bandwidth_gbs:.3g}GB/s"
    params, _ = given_params(None, alpha, bw, None)
    model = load_model("gpt2")
    pred = {(mode, alg): t(predict_step_s(ddp_schedule(model, 4, mode), {"allreduce": REGISTRY["allreduce"][alg]},
                                          P, 4, params))
            for mode in ("bucketed", "per_tensor") for alg in ("rabenseifner", "double_binary_tree", "ring")}
    metas = [r.meta for r in runs.values()]
    return [
        ("h", 2, "Training workloads"),
        ("p", "Step times (medians) of the training workloads at 4 ranks on 2 cores (oversubscribed, thread level "
              "multiple), float32."),
        _measured(metas, [_command(m) for m in metas], "reference/workloads/"),
        _table(["workload", "variant", "native", "ring / pairwise", "rabenseifner"], rows, {2, 3, 4}),
        ("p", f"Per tensor against bucketed, GPT-2's step took {ratio['native']:.2f}x (native), {ratio['ring']:.2f}x "
              f"(ring) and {ratio['rabenseifner']:.2f}x (rabenseifner).  Overlap of native Iallreduce with ResNet-50's "
              f"buckets: {_span(overlap, lambda v: f'{v:.0f}')}%."),
        ("p", f"Stragglers (rank {delay.delayed_rank} late by {fmt_time(delay.delay_s)}): every allreduce algorithm "
              f"passed the whole delay on (slowdown {_span(allred, lambda v: f'{v:.2f}')}).  A 1 KiB broadcast by "
              f"binomial tree, linear, pipelined chain or the library's own passed almost none of it "
              f"({_span(tree, lambda v: f'{v:.2f}')}); scatter + allgather passed all of it ({sa:.2f}).  At 256 KiB "
              f"every broadcast passed it on ({_span(big, lambda v: f'{v:.2f}')})."),
        ("p", f"Predicted from the 4-rank ping-pong fit of \"Model checks\" (`ccbench workload predict ddp -m gpt2 "
              f"-n {P} --alpha {alpha} --beta {bw}`), GPT-2's bucketed DDP step at {P:,} ranks takes "
              f"{pred['bucketed', 'rabenseifner']} with Rabenseifner, {pred['bucketed', 'double_binary_tree']} with "
              f"the double binary tree and {pred['bucketed', 'ring']} with ring; per tensor "
              f"{pred['per_tensor', 'rabenseifner']}, {pred['per_tensor', 'double_binary_tree']} and "
              f"{pred['per_tensor', 'ring']}."),
    ]


# --------------------------------------------------------------------------- tuning


def _tuning(ref: Path) -> list:
    (src,) = [p for p in _runs(ref, "tuning") if not p.name.endswith("_verify-mpich-json")]
    (ver_dir,) = [p for p in _runs(ref, "tuning") if p.name.endswith("_verify-mpich-json")]
    run = open_run(src)
    ver = json.loads((ver_dir / "verification.json").read_text())
    rows = [[r["collective"], format_size(r["nbytes"]), r["file_choice"], f"{r['ratio']:.2f}", f"{r['q_value']:.2f}",
             r["verdict"]] for r in ver["rows"]]
    keeps = all(not r["changed"] for r in ver["rows"])
    return [
        ("h", 2, "Tuning MPICH"),
        ("p", "A tuning file made from a 3-launch run, then verified in alternating launches without and with it.  "
              "Measured while other work used both cores."),
        _measured([run.meta], [_command(run.meta), f"ccbench tune RUN --format {ver['format']} --verify"],
                  "reference/tuning/"),
        ("p", ("The file keeps every default: no variant was decidedly faster than MPICH's own choice.  " if keeps
               else "") + f"Verification ({ver['launches']} pairs of launches), with-file / without:"),
        _table(["collective", "size", "file's choice", "ratio", "q", "verdict"], rows, {1, 3, 4}),
    ]


def _newcomer(ref: Path) -> tuple[list, list[str]]:
    (path,) = sorted((ref / "newcomer").glob("newcomer_aa_*.json"))
    doc = json.loads(path.read_text())
    rows = [[x["experiment"], x["setting"], str(x["cases"]), f"{x['called']} ({x['share']:.0%})",
             "/".join(f"{v:.0%}" for v in x["other_load"]), "yes" if x["withheld"] else "no", x["goal"]] for x in doc]
    aa = [x for x in doc if x["experiment"].startswith("A/A")]
    known = [x for x in doc if not x["experiment"].startswith("A/A")]
    short = [f"The README's main job run twice and compared: {_span([x['share'] for x in aa], lambda v: f'{v:.0%}')} "
             f"of {aa[0]['cases']} cases called different, idle and with other work on the cores; thread level "
             f"single against multiple called in {_pct([x['share'] for x in known])} of its cases."]
    return [("h", 2, "The README's main job, compared with itself"),
            ("p", "The same command twice, then `ccbench compare`: every case called faster or slower is a false "
                  "verdict.  A known difference (thread level single against multiple, 4 ranks on 2 cores) shows "
                  "that the verdicts still find what is there.  Other load: the share of the machine's CPU other "
                  "processes took during each run; compare withholds the verdicts of a run measured under load."),
            ("p", f"Machine: 2 cores (the benchmark file records no more).  Measured {_file_date(path)}.  Command: "
                  f"`python benchmarks/newcomer_aa.py`.  Files: `{_rel(path)}`."),
            _table(["experiment", "setting", "cases", "called", "other load", "withheld", "goal"], rows, {2, 3})], short


def _doctor(ref: Path) -> tuple[list, list[str]]:
    paths = sorted((ref / "doctor").glob("doctor_aa_*.json"))
    rows, docs = [], []
    for path in paths:
        doc = json.loads(path.read_text())
        docs.append(doc)
        busy = doc.get("busy_loops", 0)
        stamp = path.stem.rsplit("_", 1)[1]
        when = f"{_file_date(path)} {stamp[9:11]}:{stamp[11:13]}, " + (
            f"{busy} busy loop{'s' if busy > 1 else ''}" if busy else "no busy loop")
        for name, t in (("healthy", doc["healthy"]), (f"one rank slowed ({doc['fault']})", doc["slowed"])):
            f = t.get("forced")
            rows.append([when, name, _pct([t["median_other_load"]]), str(t.get("withheld", 0)), str(t["nobody"]),
                         "-" if t["slowed_named"] is None else str(t["slowed_named"]), str(t["others_named"]),
                         "-" if f is None else (str(f["slowed_named"]) if t["slowed_named"] is not None else
                                                f"{f['nobody']} nobody") + f", {f['others_named']} another",
                         f"{t['median_seconds']:.1f} s"])
    idle = [d for d in docs if not d.get("busy_loops")][-1]
    busy = [d for d in docs if d.get("busy_loops")]
    h, s = idle["healthy"], idle["slowed"]
    short = [f"`ccbench doctor` named a slowed rank in {s['slowed_named']} of {s['diagnoses']} diagnoses and another "
             f"rank in {s['others_named'] + h['others_named']} of {s['diagnoses'] + h['diagnoses']}"
             + (f", withholding {s.get('withheld', 0) + h.get('withheld', 0)} decisions for other load" if
                s.get("withheld", 0) + h.get("withheld", 0) else "")
             + (f"; with a busy loop beside it it withheld {busy[-1]['healthy']['withheld']} of "
                f"{busy[-1]['healthy']['diagnoses']} healthy diagnoses, where forced to decide it named nobody in "
                f"{busy[-1]['healthy']['forced']['nobody']}." if busy else ".")]
    return [("h", 2, "Finding a slow rank"),
            ("p", "Repeated diagnoses of one machine, healthy and with one rank slowed by a fault, alternated; with "
                  "busy loops beside them in some series (other load).  Withheld: diagnoses that decided nothing "
                  "because other processes took over 20% of the CPU (the diagnosis's rule since the series of "
                  "busy loops; earlier series decided whatever the load).  Forced: the same runs decided whatever "
                  "the load (`--allow-load 1`): the slowed rank named, or nobody named, and anyone else named."),
            ("p", f"Machine: 2 cores, 4 ranks (oversubscribed on purpose).  Measured "
                  f"{' and '.join(sorted({_file_date(p) for p in paths}))}.  Command: `python benchmarks/doctor_aa.py"
                  f" [--busy B]` (each diagnosis `{docs[-1]['command']}`).  Files: "
                  + ", ".join(f"`{_rel(p)}`" for p in paths) + "."),
            _table(["series", "setting", "other load", "withheld", "named nobody", "named the slowed rank",
                    "named another", "forced", "time each"], rows, {2, 3, 4, 5, 6, 8})], short


def _lab_doctor(ref: Path) -> tuple[list, list[str]]:
    paths = sorted((ref / "doctor").glob("lab_doctor_*.json"))
    if not paths:
        return [], []
    rows, slow, healthy, told, docs = [], [], [], [], []
    for path in paths:
        doc = json.loads(path.read_text())
        docs.append(doc)
        for shape in doc["shapes"]:
            for name, t in shape["settings"].items():
                d, f = t["decided"], t["forced"]
                rows.append([doc["date"][11:16], f"{shape['hosts']} x {shape['ppn']}", name, t["target"] or "nobody",
                             _pct([t["median_other_load"]]), f"{t['withheld']} of {t['diagnoses']}",
                             *(str(c["target_named"] if t["target"] else c["nobody"]) for c in (d, f)),
                             str(f["others_named"]), f"{t['median_seconds']:.0f} s"])
                if t["target"] and shape["hosts"] >= 3:  # with 2 hosts nothing slow can be named (the note)
                    slow.append(t)
                elif name == "healthy":
                    healthy.append(t)
                elif not t["target"]:
                    told.append(t)
    fours = [s["settings"]["healthy"]["median_seconds"] for doc in docs for s in doc["shapes"]
             if s["hosts"] * s["ppn"] == 4]
    n = healthy[0]["diagnoses"]
    m = docs[-1]["machine"]
    short = [f"In the emulated lab, decided whatever the load, `ccbench doctor` named the slow host, link or rank in "
             f"{_span([t['forced']['target_named'] for t in slow], str)} of {n} diagnoses and nobody on a healthy lab "
             f"in {_span([t['forced']['nobody'] for t in healthy], str)} of {n}; by default it withheld its decision "
             f"in {sum(t['withheld'] for t in slow + healthy)} of {n * len(slow + healthy)} of them (other work took "
             f"over 20% of the CPU).  One diagnosis at 4 ranks took {_span(fours, lambda v: f'{v:.0f}')} s."]
    quiet = [t for t in slow + healthy if t["withheld"] == 0]
    if quiet:  # a series during which other work never took over 20%: every diagnosis decided
        alone = _span([t["decided"]["exactly_target"] for t in quiet if t["target"]], str)
        nobody = _span([t["decided"]["nobody"] for t in quiet if not t["target"]], str)
        short[0] += (f"  Where other work stayed under 20% every diagnosis decided: it named the target alone in "
                     f"{alone} of {n} and nobody on a healthy lab in {nobody} of {n}.")
    return [("h", 2, "Finding a slow host or link in the lab"),
            ("p", "Repeated diagnoses of the emulated lab, healthy and with one host's link slowed (added delay, or a "
                  "quarter of the rate), one link between two hosts slowed (`lab set --pair`), or one rank slowed by "
                  "a fault, the settings alternated.  Other load: the median share of the CPU other processes took "
                  "during a diagnosis (the other work on the machine meanwhile).  Withheld: diagnoses that decided "
                  "nothing because it was over 20%.  Named: diagnoses that named the target (on a healthy lab: that "
                  "named nobody), as decided, and forced: as `--allow-load 1` decides the same runs, whatever the "
                  "load.  Another: forced diagnoses that named anyone but the target.  Time: the command's wall "
                  "time, median."
                  + (f"  With 2 hosts a slow host is not named: the diagnosis said that a slow host and a slow link "
                     f"cannot be told apart in {_span([t['said_cannot_tell'] for t in told], str)} of {n}; and with 2 "
                     "ranks per host every level has two measurements, too few to name a rank."
                     if told else "")),
            ("p", f"Machine: {m['cpu']}, {m['cores']} cores, {format_size(m['memory_bytes'])}, "
                  f"{' '.join(m['mpi_library'].replace('Version:', '').split())}, Python {m['python']}; every lab "
                  f"host on it, links at zero added delay and {docs[-1]['rate']}.  Measured "
                  f"{' and '.join(sorted({d['date'][:10] for d in docs}))}.  Command: "
                  + "; ".join(f"`{_script(d)}`" for d in docs) + f" (each diagnosis `{docs[-1]['command']}`).  "
                  "Files: " + ", ".join(f"`{_rel(p)}`" for p in paths) + "."),
            _table(["series (UTC)", "hosts x ranks", "setting", "target", "other load", "withheld", "named",
                    "named, forced", "another, forced", "time each"], rows, {4, 5, 6, 7, 8, 9})], short


def _newest(folder: Path, pattern: str) -> Path | None:
    """The newest of a benchmark's summaries (their names end in the time they were made), or None."""
    paths = sorted(folder.glob(pattern))
    return paths[-1] if paths else None


def _lab_tune(ref: Path) -> tuple[list, list[str]]:
    path = _newest(ref / "lab", "lab_tune_*.json")
    if path is None:
        return [], []
    doc = json.loads(path.read_text())
    shapes = list(doc["shapes"])
    checked = {(v["shape"], v["nbytes"]): v for v in doc["verification"]}

    def cell(shape, n):
        c = doc["shapes"][shape]["sizes"][str(n)]
        v = checked.get((shape, n))
        alone = c["times_s"].get(c["choice"])
        got = (f"; {fmt_time(v['without_s'])} -> {fmt_time(v['with_file_s'])} with the file ({v['verdict']})"
               if v and v["without_s"] and v["with_file_s"] else "")
        fast = c["fastest"]
        best = f", fastest {fast} ({fmt_time(c['times_s'][fast])})" if fast != c["choice"] else ""
        return f"{c['choice']} ({fmt_time(alone)}{best})" + (" toss-up" if c["toss_up"] else "") + got

    sizes = sorted({int(n) for s in shapes for n in doc["shapes"][s]["sizes"]})
    rows = [[format_size(n), *(cell(s, n) for s in shapes)] for n in sizes]
    differ = [format_size(int(n)) for n in doc["differ"]]
    fastest = [format_size(int(n)) for n in doc["fastest_differ"]]
    short = [f"Tuning in the lab: the MPICH file's choices for 4 hosts x 1 rank and 2 hosts x 2 ranks differ at "
             f"{', '.join(differ) or 'no size'} of {len(sizes)} sizes (the fastest measured differs at "
             f"{', '.join(fastest) or 'none'}; the file names a variant only where it beat the default decidedly, "
             f"over {doc['argv'][doc['argv'].index('--launches') + 1] if '--launches' in doc['argv'] else 3} "
             "launches); `tune --verify` ran each shape's launches at that shape."]
    return [("h", 2, "Tuning per shape in the lab"),
            ("p", f"{doc['collective'].capitalize()} on 4 ranks of the emulated lab at two shapes, the library's "
                  "default and every algorithm it can be forced to, in alternating launches; `ccbench tune` writes "
                  "one MPICH file whose choices are keyed on the shape each was measured on (`comm_avg_ppn`), and "
                  "`--verify` measures the library's default without and with the file at each shape.  Per size "
                  "and shape: the file's choice and its measured median, and the fastest measured where it is "
                  "another (the file names a variant only where it beat the default decidedly, at the launch level; "
                  "toss-up: the choice not decidedly faster than the runner-up); then the library's median without "
                  "and with the file, and the verdict."),
            ("p", f"Machine: one machine ({doc.get('machine', 'AMD EPYC, 2 cores')}), every lab host on it; links "
                  f"{doc['delay']} and "
                  f"{doc['rate']}.  Measured {doc['date'][:10]}.  Command: `{_script(doc)}`, which runs "
                  + "; then ".join(f"`{c}`" for c in doc["commands"]) + f".  Files: `{_rel(path)}`."),
            _table(["size", *(f"{s.replace('x', ' hosts x ')} rank(s)" for s in shapes)], rows)], short


def _lab_shape(ref: Path) -> tuple[list, list[str]]:
    path = _newest(ref / "lab", "lab_shape_*.json")
    if path is None:
        return [], []
    doc = json.loads(path.read_text())
    lv, delay = doc["levels"], doc["delay_s"]
    inter = lv["inter_alpha_s"] - doc["baseline_alpha_s"]
    rows = [[format_size(p["nbytes"]), fmt_time(p["block"]["median_s"]), fmt_time(p["cyclic"]["median_s"]),
             f"{p['measured_ratio']['median']:.2f}", f"{p['predicted_ratio']:.2f}",
             "yes" if p["goal"]["median"]["direction_right"] else "no"] for p in doc["placement"]]
    hier = [[format_size(h["nbytes"]), *(fmt_time(h["measured_s"]["median"][a]) for a in h["measured_s"]["median"]),
             h["winner"]["median"], h["winner"]["model"], h["winner"]["closed form"]] for h in doc["hierarchical"]]
    algs = list(doc["hierarchical"][0]["measured_s"]["median"])
    big = [p for p in doc["placement"] if p["nbytes"] >= 65536]
    within = sum(p["goal"]["median"]["within_1_5x"] for p in big)
    right = sum(p["goal"]["median"]["direction_right"] for p in doc["placement"])
    model_ok = sum(h["winner"]["model"] == h["winner"]["median"] for h in doc["hierarchical"])
    n = len(doc["hierarchical"])
    short = [f"A lab with shape (2 hosts x 2 ranks, {delay * 1e3:g} ms and {doc['rate']} between them): "
             f"the fitted inter-host alpha less the zero-delay baseline is {inter * 1e3:.3f} ms for "
             f"{delay * 1e3:g} ms injected, the intra-host alpha {fmt_time(lv['intra_alpha_s'])}; ring allreduce "
             f"cyclic against block, the schedule model within 1.5x of the measured ratio at {within} of "
             f"{len(big)} sizes of 64 KiB or more, on the right side of 1 at {right} of {len(doc['placement'])}; "
             f"the fastest of flat and hierarchical allreduce predicted at {model_ok} of {n} sizes."]
    return [("h", 2, "Placement and hierarchy in the lab"),
            ("p", "Four ranks on two emulated hosts (shared memory inside a host, the emulated link between them).  "
                  "The link levels are fitted from ping-pong: inside a host from a one-node run, across hosts from "
                  "a run whose ranks 0 and 1 sit on different hosts.  Ring allreduce runs with `--placement block` "
                  "(each ring neighbour pair inside a host where it can be) and `--placement cyclic` (every "
                  "neighbour across the link); the schedule model (`ccbench.analysis.placed`) times each "
                  "algorithm's executed schedule on the run's node map from those two levels."),
            ("p", f"Machine: one machine ({doc.get('machine', '?')}), both lab hosts on it.  Measured "
                  f"{doc.get('date', '?')}.  Command: `{_script(doc)}` (as root).  Fitted levels: between hosts alpha "
                  f"{fmt_time(lv['inter_alpha_s'])} (zero-delay baseline {fmt_time(doc['baseline_alpha_s'])}), "
                  f"{1e-9 / lv['inter_beta_s_per_byte']:.3g} GB/s; inside a host alpha "
                  f"{fmt_time(lv['intra_alpha_s'])}, {1e-9 / lv['intra_beta_s_per_byte']:.3g} GB/s.  "
                  f"Files: `{_rel(path)}`."),
            _table(["size", "ring, block", "ring, cyclic", "measured cyclic / block", "predicted", "same side of 1"],
                   rows),
            ("p", "Allreduce with `--placement block`: the median of each algorithm, the fastest measured, the "
                  "fastest by the schedule model and by the closed forms (`ccbench predict --intra-from RUN "
                  "--ppn 2`, which price the flat algorithms at the level between hosts)."),
            _table(["size", *algs, "fastest measured", "model", "closed form"], hier)], short


# --------------------------------------------------------------------------- the page


def render(ref: Path = REPO / "reference") -> str:
    """The whole page, from the files under `ref`."""
    replication, s1 = _replication(ref)
    fidelity, s2 = _fidelity(ref)
    models, s3, pingpong = _models(ref)
    crossval, s4 = _crossval(ref)
    limits, s5 = _limits(ref)
    newcomer, s6 = _newcomer(ref)
    doctor, s7 = _doctor(ref)
    lab_doctor, s8 = _lab_doctor(ref)
    lab_tune, s9 = _lab_tune(ref)
    lab_shape, s10 = _lab_shape(ref)
    blocks = [
        ("h", 1, "Results on reference machines"),
        ("p", "What ccbench measured on this project's own machines.  Use it to know what to expect, not as a "
              "promise for yours: run the command beside each table to measure your own."),
        ("p", f"This page is generated from the files in `reference/` by `{REGENERATE}`; do not edit it by hand.  "
              "The tests regenerate it and fail when it differs."),
        ("h", 2, "In short"),
        ("ul", s1 + s6 + s2 + s3 + s4 + s5 + s10 + s7 + s8 + s9),
        *replication, *newcomer, *_durations(ref), *fidelity, *_algorithms(ref), *models, *crossval, *limits,
        *_lab(ref), *lab_shape, *_workloads(ref, pingpong), *_tuning(ref), *lab_tune, *doctor, *lab_doctor,
    ]
    return render_markdown(blocks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with docs/results.md instead of writing it")
    ap.add_argument("--out", type=Path, default=PAGE, help="where to write the page (default docs/results.md)")
    ap.add_argument("--reference", type=Path, default=REPO / "reference", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    text = render(args.reference)
    if args.check:
        committed = PAGE.read_text() if PAGE.is_file() else ""
        if committed == text:
            print(f"{_rel(PAGE)} is up to date")
            return 0
        sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), text.splitlines(True),
                                                   f"{_rel(PAGE)} (committed)", "from reference/"))
        print(f"{_rel(PAGE)} is out of date: regenerate it with `{REGENERATE}`")
        return 1
    args.out.write_text(text)
    print(f"wrote {_rel(args.out.resolve())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
