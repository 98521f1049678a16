"""``ccbench tune`` as a workflow: the tuning file chosen from stored runs, written, and verified by launches.

The choice is pure (`ccbench.analysis.tune`); here the MPI library's default selection tree is
read, the file written where the user points or into the derived tree, and ``--verify`` launches
the jobs that measure the library without and with it.
"""

import dataclasses
import functools
import json
import os
import secrets
import sys
from pathlib import Path

from ccbench.analysis.tune import (
    CARRIED,
    DEFAULT,
    DEFAULT_VERIFY_LAUNCHES,
    LEVEL,
    TuningFile,
    Verification,
    VerificationLaunch,
    VerificationRun,
    check_verify_launches,
    file_env,
    pool_side,
    run_shape,
    tuning_choice,
    tuning_file,
    verification_rows,
)
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.measure.launcher import prepare_launcher, run_job
from ccbench.measure.library import mpich_default_tree
from ccbench.store.derived import output_dir, write_new_file, write_new_set
from ccbench.store.results import new_run_dir
from ccbench.store.run import open_run

__all__ = ["tune_runs", "verify"]


def _write(out: Path, text: str) -> None:
    write_new_file(out, text, what="tuning files", make_parents=True)


def tune_runs(runs, fmt: str, output: str | None = None, results_dir="results", out=None) -> TuningFile:
    """Choose from the runs' variants and write the tuning file: to `output`, else as ``tuning.EXT`` (numbered,
    never over an existing one) into `out`, by default the derived tree of the first run.  The runs are only read.

    Returns `ccbench.analysis.tune.tuning_file`'s `TuningFile` with ``path``, the file written.
    """
    opened = [open_run(r, results_dir) for r in runs]
    choice = tuning_choice(opened, fmt)  # bad runs are refused before the MPI library is loaded
    doc = tuning_file(choice, mpich_default_tree() if fmt == "mpich-json" else None)
    if output:
        target = Path(output)
        side = target.with_name(target.name + ".source.json") if doc.side else None
        for p in (target, side):
            if p is not None and p.exists():
                raise UsageError(f"{p} exists; tuning files are never overwritten: give another -o FILE")
        _write(target, doc.text)
    else:
        suffix = "." + doc.choice.ext
        target = write_new_set(output_dir(opened[0].path, out), "tuning", {suffix: doc.text})[suffix]
        side = target.with_name(target.name + ".source.json") if doc.side else None
    doc = dataclasses.replace(doc, path=str(target))
    if side is not None:
        _write(side, json.dumps(doc.to_dict(), indent=2) + "\n")
    return doc


def _lab_job(runner, cmd: list[str], env: dict):
    """`runner`'s job of ``ccbench lab run ... -- ... --results-dir DIR --tag TAG``, with its run directory: the lab
    run's own launcher records the run, not the outer job, so it is found by its tag."""
    job = runner(cmd, env)
    if job.run_dir is None and not job.code:
        root, tag = Path(cmd[cmd.index("--results-dir") + 1]), cmd[cmd.index("--tag") + 1]
        found = sorted(p for p in root.iterdir() if p.is_dir() and p.name.endswith("_" + tag))
        job = dataclasses.replace(job, run_dir=found[-1] if found else None)
    return job


def verify(doc: TuningFile, results_dir: str | Path | None = None, say=print,
           launches: int = DEFAULT_VERIFY_LAUNCHES, seed: int | None = None, job_runner=None) -> Verification:
    """Measure the library's default selection without and with the tuning file in alternating launches.

    Per source run: `launches` pairs of `ccbench run` jobs of `native` at the same rank
    count, sizes, dtype, op and timing settings, A (without the file) and B (with it, set the
    way the library reads it: MPICH's MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE; Open MPI's
    coll_tuned_use_dynamic_rules + coll_tuned_dynamic_rules_filename) in the order
    A B A B ..., each through `ccbench.measure.launcher.run_job` (`job_runner` replaces it in
    tests) with ``--launches K --launch-index k --seed S``: each launch records its number
    and takes 1/K of the source's budget and sample cap, and launch k of both sides runs the
    cases in the same shuffled order.  Every launch is stored as a run in one verification
    directory under the results directory (``<stamp>_npP_verify-FORMAT/``, runs tagged
    ``Lkk-without`` / ``Lkk-with``); each side's launches are pooled per case
    (`ccbench.analysis.tune.pool_side`), pair k is the two launches adjacent in time, and
    `ccbench.analysis.tune.decide_sizes` compares them (paired t on per-launch log-ratios,
    Benjamini-Hochberg over the sizes).  Launches differ by 15-75%, so fewer than 3 pairs are
    refused.  The record (the runs, the order, the seed and every size's comparison: ``Verification.to_dict()``)
    is written to ``verification.json`` in that directory and returned, with ``records`` their paths.  A source run
    measured on the emulated lab is verified there, at its shape: each job is ``ccbench lab run -n P --ppn R
    --order O -- run ...`` (a lab at least that large must be up).
    """
    check_verify_launches(True, launches)
    env = file_env(doc)
    seed = secrets.randbelow(2**32) if seed is None else int(seed)
    default_runner = job_runner or run_job
    runs, items, where_of = [], [], []   # items: (selection, choice, row without, row with)
    for src in doc.choice.sources:
        sels = [s for s in doc.choice.selections if s.run == src.run]
        src_meta = open_run(src.path).meta
        cfg, lab = src_meta.get("config", {}), src_meta.get("lab")
        runner = default_runner
        if lab:  # on the lab's hosts, at the source's shape (ccbench.measure.lab.run_on_lab)
            runner = functools.partial(_lab_job, default_runner)
            launch_env = dict(os.environ)
            cmd = [sys.executable, "-m", "ccbench", "lab", "run", "-n", str(src.nranks), "--ppn", str(lab["ppn"]),
                   "--order", lab.get("order", "block"), "--bind", cfg.get("bind", "auto"), "--", "-C"]
        else:  # the ranks bound as the source run's were (ccbench.measure.launcher.choose_binding)
            exe, _, launch_env, extra = prepare_launcher(None, src.nranks, cfg.get("bind", "auto"))
            cmd = [exe, "-n", str(src.nranks), *extra, sys.executable, "-m", "mpi4py", "-m", "ccbench", "run",
                   "-C"]
        plain_env = {k: v for k, v in launch_env.items() if k not in env}  # A: no file, even if the caller set one
        root = Path(results_dir) if results_dir else Path(src.path).parent
        sizes = sorted({c.nbytes for s in sels for c in s.choices})
        cmd += [",".join(dict.fromkeys(s.collective for s in sels)), "-a", DEFAULT,
               "-s", ",".join(map(str, sizes)), "-t", ",".join(dict.fromkeys(s.dtype for s in sels)),
               "--op", ",".join(dict.fromkeys(s.op for s in sels if s.op != "none")) or "sum",
               "--in-place", "no", "--root", "0"]
        for key, flag in CARRIED:
            if key in cfg:
                cmd += [flag, str(cfg[key])]
        cmd += ["--launches", str(launches), "--seed", str(seed), "--order", str(cfg.get("order", "shuffled")),
                "--no-show"]
        where = new_run_dir(root, src.nranks, f"verify-{doc.choice.format}")
        launched: dict[str, list[VerificationLaunch]] = {"without": [], "with": []}
        shown = " ".join(f"{k}={v}" for k, v in env.items())
        done: dict[str, list[tuple[int, list]]] = {"without": [], "with": []}
        for k in range(1, launches + 1):
            for side, side_env in (("without", plain_env), ("with", {**plain_env, **env})):  # pair k adjacent in time
                job_cmd = [*cmd, "--launch-index", str(k), "--results-dir", str(where), "--tag", f"L{k:02d}-{side}"]
                say(f"verify: launch {k}/{launches} {side} the file: "
                    + (f"{shown} " if side == "with" else "") + " ".join(job_cmd))
                job = runner(job_cmd, side_env)  # signals forwarded, a dead job's run marked failed
                launched[side].append(VerificationLaunch(k, str(job.run_dir) if job.run_dir else None, job.code))
                if job.code or job.run_dir is None:
                    raise CCBenchError(f"verification launch {k} {side} the file failed ({job.why}); its runs are "
                                       f"in {where}")
                done[side].append((k, open_run(job.run_dir).rows))
        here = run_shape(open_run(launched["with"][0].run).meta)
        moved = sorted({str(s.shape) for s in sels if s.shape is not None and here is not None and s.shape != here})
        note = None
        if moved:  # a choice made at one shape, verified at another: the library keeps its default here
            note = (f"the file's choices were measured on {', '.join(moved)}; these launches ran on {here}, where the "
                    "file keeps the library's default")
            say(f"verify: note: {note}")
        runs.append(VerificationRun(src.run, str(where), tuple(launched["without"]), tuple(launched["with"]), note))
        without, with_file = pool_side(done["without"]), pool_side(done["with"])
        for s in sels:
            for c in s.choices:
                key = (s.collective, c.nbytes, s.dtype, s.op)
                items.append((s, c, without.get(key), with_file.get(key)))
                where_of.append(str(where))
    out = Verification(str(Path(doc.path)), doc.choice.format, launches, seed,
                       tuple(f"L{k:02d}-{side}" for k in range(1, launches + 1) for side in ("without", "with")),
                       LEVEL, tuple(runs), tuple(verification_rows(items, where_of)))
    text = json.dumps(out.to_dict(), indent=2) + "\n"
    # the whole record in each source's verification directory
    records = [str(write_new_set(Path(r.dir), "verification", {".json": text})[".json"]) for r in runs]
    return dataclasses.replace(out, records=tuple(records))
