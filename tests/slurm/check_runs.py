"""Check the run directories one Slurm job left under a results root (used by ci_slurm.sh).

    python tests/slurm/check_runs.py RESULTS JOBID [--runs N] [--nranks 2,4] [--per-p]
                                     [--interrupted | --failed] [--log FILE --expect-log TEXT]

Every run directory whose name carries the job id (..._job<ID> or ..._job<ID>_P<P>) must
hold a run.json whose status is complete (or interrupted by SIGTERM with --interrupted,
or failed because a rank died with --failed, keeping some but not all rows), rows with
zero wrong elements, and a "slurm" provenance block naming the job. Prints what is wrong
and exits 1, or exits 0 silently.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("jobid")
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--nranks", default="")
    ap.add_argument("--per-p", action="store_true")
    ap.add_argument("--interrupted", action="store_true")
    ap.add_argument("--failed", action="store_true", help="a rank died: status failed, some rows kept")
    ap.add_argument("--log")
    ap.add_argument("--expect-log")
    a = ap.parse_args()
    errors: list[str] = []
    name_re = re.compile(rf"_job{re.escape(a.jobid)}(?:_P(\d+))?(?:-\d+)?$")
    runs = sorted(d for d in Path(a.results).glob("*") if d.is_dir() and name_re.search(d.name))
    if len(runs) != a.runs:
        errors.append(f"{len(runs)} run directories for job {a.jobid}, want {a.runs}: {[d.name for d in runs]}")
    seen_nranks = []
    for d in runs:
        where = d.name
        try:
            meta = json.loads((d / "run.json").read_text())
            rows = [json.loads(line) for line in (d / "cases.jsonl").read_text().splitlines() if line.strip()]
        except (OSError, ValueError) as exc:
            errors.append(f"{where}: unreadable: {exc}")
            continue
        want = "interrupted" if a.interrupted else "failed" if a.failed else "complete"
        if meta.get("status") != want:
            errors.append(f"{where}: status {meta.get('status')!r}, want {want!r}")
        if a.failed:
            if "a rank crashed, was killed or aborted" not in str(meta.get("failure")):
                errors.append(f"{where}: failure {meta.get('failure')!r} does not say a rank died")
            if not rows or len(rows) >= meta.get("planned_cases", 0):
                errors.append(f"{where}: {len(rows)} rows of {meta.get('planned_cases')} planned: "
                              "want some but not all")
        if a.interrupted:
            if meta.get("signal") != "SIGTERM":
                errors.append(f"{where}: signal {meta.get('signal')!r}, want 'SIGTERM'")
            if not rows or len(rows) >= meta.get("planned_cases", 0):
                errors.append(f"{where}: {len(rows)} rows of {meta.get('planned_cases')} planned: "
                              "want some but not all")
        elif not a.failed and (not rows or len(rows) != meta.get("planned_cases")):
            errors.append(f"{where}: {len(rows)} rows, {meta.get('planned_cases')} planned")
        if meta.get("finished_cases") != len(rows):
            errors.append(f"{where}: finished_cases {meta.get('finished_cases')} but {len(rows)} rows kept")
        bad = [r for r in rows if r.get("nwrong", 1) != 0]
        if bad:
            errors.append(f"{where}: {len(bad)} rows with wrong elements")
        slurm = meta.get("slurm") or {}
        if slurm.get("SLURM_JOB_ID") != a.jobid:
            errors.append(f"{where}: slurm.SLURM_JOB_ID {slurm.get('SLURM_JOB_ID')!r}, want {a.jobid!r}")
        P = meta.get("nranks")
        seen_nranks.append(P)
        m = name_re.search(d.name)
        if a.per_p and (m.group(1) is None or int(m.group(1)) != P):
            errors.append(f"{where}: name says P={m.group(1)} but the run has {P} ranks")
        if f"_np{P}_" not in d.name:
            errors.append(f"{where}: name lacks _np{P}_")
    if a.nranks:
        want_n = sorted(int(x) for x in a.nranks.split(","))
        if sorted(seen_nranks) != want_n:
            errors.append(f"rank counts {sorted(seen_nranks)}, want {want_n}")
    if a.expect_log:
        text = Path(a.log).read_text() if a.log and Path(a.log).is_file() else ""
        if a.expect_log not in text:
            errors.append(f"job log {a.log} lacks {a.expect_log!r}")
    for e in errors:
        print(f"    {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
