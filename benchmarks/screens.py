"""What a person sees: the README's main job in a real terminal (tmux), Ctrl-C and its resume, and the report in
a browser (headless Chromium).  A scripted check, not a timed test: it prints one line per check and exits 1 if
one fails.

    python benchmarks/screens.py [--out DIR] [--keep]

Checks, each as a newcomer meets it (the newcomer's-path issue, points 1, 9 and 10):

- no blank start: the first line is on the screen within 1 s of the command;
- the progress bar shows the case it runs, a count and an ETA ("left H:MM:SS");
- at most one rank per core: the README's command gives ``-n`` no larger than this machine's cores;
- the last screen: at most 60 lines after the progress bar, ending with the run, "all correct" and where the
  tables are;
- Ctrl-C during a sweep: the last lines name the command that resumes it, and that command, run as printed,
  finishes the run with every planned case;
- the report opens in a browser: the page renders (a screenshot that is not blank), every image it references
  exists, and it holds figures.

Needs tmux and chromium (or chromium-browser / google-chrome) on PATH; a check whose tool is missing is reported
as skipped.  About 1-2 minutes on 2 cores.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 120, 50
MARK = "__screens_exit__"


def readme_command() -> list[str]:
    """The ``ccbench launch ...`` part of the README's first command (the main job), as a list of words."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```\n(.*?)\n```", text, re.S).group(1)
    part = next(p.strip() for p in block.split("&&") if p.strip().startswith("ccbench launch"))
    return shlex.split(part)


class Pane:
    """A tmux session running one shell command; its screen read as text."""

    def __init__(self, name: str, command: str):
        self.name = f"ccbench-screens-{name}-{os.getpid()}"
        wrapped = f"{command}; echo {MARK}=$?; sleep 3600"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(WIDTH), "-y", str(HEIGHT),
                        "bash", "-c", wrapped], check=True)
        self.started = time.monotonic()

    def screen(self, history: bool = False) -> str:
        args = ["tmux", "capture-pane", "-p", "-J", "-t", self.name] + (["-S", "-"] if history else [])
        return subprocess.run(args, capture_output=True, text=True).stdout

    def exit_code(self) -> int | None:
        m = re.search(rf"{MARK}=(\d+)", self.screen(history=True))
        return None if m is None else int(m.group(1))

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip() and MARK not in ln]


PROGRESS = re.compile(r"(\d+)/(\d+)\s+\d+:\d\d:\d\d left \d+:\d\d:\d\d")


def watch(pane: Pane, timeout: float, until=None) -> dict:
    """Poll the screen every 0.1 s until the command ends (or `until(screen)` holds): when the first line showed,
    the progress lines seen, the exit code."""
    first = None
    progress: list[str] = []
    code = None
    while time.monotonic() - pane.started < timeout:
        text = pane.screen()
        lines = _lines(text)
        if lines and first is None:
            first = time.monotonic() - pane.started
        progress += [ln for ln in lines if PROGRESS.search(ln) and ln not in progress[-1:]]
        if until is not None and until(text):
            break
        code = pane.exit_code()
        if code is not None:
            break
        time.sleep(0.1)
    return {"first_line_s": first, "progress": progress, "exit": code,
            "elapsed_s": time.monotonic() - pane.started}


class Checks:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, name: str, ok: bool | None, detail: str) -> None:
        self.rows.append({"check": name, "result": "skipped" if ok is None else "pass" if ok else "FAIL",
                          "detail": detail})
        print(f"{self.rows[-1]['result']:>7}  {name}: {detail}", flush=True)

    @property
    def failed(self) -> bool:
        return any(r["result"] == "FAIL" for r in self.rows)


def _shell(words: list[str]) -> str:
    venv = Path(sys.executable).parent
    return f"export PATH={shlex.quote(str(venv))}:$PATH COLUMNS={WIDTH}; cd {shlex.quote(str(ROOT))}; " + shlex.join(
        words)


def main_job(checks: Checks, results: Path) -> Path | None:
    words = readme_command()
    n = int(words[words.index("-n") + 1])
    cores = len(os.sched_getaffinity(0))
    checks.add("one rank per core", n <= cores, f"the README's command runs -n {n} on {cores} usable cores")
    pane = Pane("main", _shell([*words, "--results-dir", str(results)]))
    try:
        seen = watch(pane, timeout=600)
        final = _lines(pane.screen(history=True))
    finally:
        pane.close()
    first = seen["first_line_s"]
    checks.add("no blank start", first is not None and first <= 1.0,
               f"first line after {first:.2f} s" if first is not None else "nothing shown")
    bar = seen["progress"]
    checks.add("progress bar with ETA", bool(bar), f"{len(bar)} distinct progress lines, e.g. {bar[-1].strip()!r}"
               if bar else "no line with 'N/M H:MM:SS left H:MM:SS'")
    after = [ln for ln in final if not PROGRESS.search(ln)]
    end = " ".join(after[-3:])
    ok = seen["exit"] == 0 and len(after) <= 60 and "all correct" in end and "ccbench show" in end
    checks.add("last screen answers", ok, f"exit {seen['exit']}, {len(after)} lines after the bar, ending "
               f"{after[-1].strip()!r}" if after else f"exit {seen['exit']}, nothing printed")
    runs = sorted(p for p in results.iterdir() if (p / "run.json").is_file())
    return runs[-1] if runs else None


def interrupt(checks: Checks, results: Path) -> None:
    words = ["ccbench", "launch", "-n", "2", "-C", "allreduce,allgather,bcast", "-a", "all", "-s", "8:1M",
             "--results-dir", str(results)]
    pane = Pane("ctrlc", _shell(words))
    try:
        def some_done(text):
            m = PROGRESS.search(text)
            return m is not None and int(m.group(1)) >= 5

        watch(pane, timeout=300, until=some_done)
        pane.keys("C-c")
        seen = watch(pane, timeout=120)
        final = _lines(pane.screen(history=True))
    finally:
        pane.close()
    tail = final[-3:]
    resume = next((m.group(0) for ln in reversed(tail) if (m := re.search(r"ccbench launch .*--resume \S+", ln))),
                  None)
    checks.add("Ctrl-C names the resume command last", resume is not None,
               f"exit {seen['exit']}; last line {final[-1].strip()!r}" if final else "nothing printed")
    if resume is None:
        return
    pane = Pane("resume", _shell(shlex.split(resume)))
    try:
        seen = watch(pane, timeout=600)
        final = _lines(pane.screen(history=True))
    finally:
        pane.close()
    run = Path(shlex.split(resume)[shlex.split(resume).index("--resume") + 1])
    run = run if run.is_absolute() else ROOT / run
    meta = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    rows = sum(1 for ln in (run / "cases.jsonl").read_text().splitlines() if ln.strip()) if meta else 0
    planned = meta.get("planned_cases")
    ok = seen["exit"] == 0 and meta.get("status") == "complete" and (planned is None or rows == planned)
    checks.add("the printed resume finishes the run", ok,
               f"exit {seen['exit']}, status {meta.get('status')}, {rows} rows"
               + (f" of {planned} planned" if planned is not None else ""))


def browser() -> str | None:
    return next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def report(checks: Checks, run: Path | None, out: Path) -> None:
    if run is None:
        checks.add("report in a browser", False, "no run to report")
        return
    r = subprocess.run([sys.executable, "-m", "ccbench", "report", str(run), "--out", str(out)], capture_output=True,
                       text=True, timeout=600)
    pages = sorted(out.rglob("*.html"))
    if r.returncode != 0 or not pages:
        checks.add("report in a browser", False, f"ccbench report exit {r.returncode}: {r.stderr.strip()[-200:]}")
        return
    page = pages[0]
    html = page.read_text()
    images = re.findall(r'<img[^>]+src="([^"]+)"', html)
    missing = [s for s in images if not s.startswith("data:") and not (page.parent / s).is_file()]
    chrome = browser()
    if chrome is None:
        checks.add("report in a browser", None, "no chromium on PATH")
        return
    shot = out / "report.png"
    subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,1600", page.as_uri()], capture_output=True, timeout=120)
    blank = True
    if shot.is_file():
        import matplotlib.image as mpimg  # the test extra has it; decoding a PNG by hand is not worth it

        px = mpimg.imread(str(shot))
        blank = float(px[..., :3].std()) < 0.02
    ok = shot.is_file() and not blank and not missing and len(images) > 0
    checks.add("report in a browser", ok, f"{page.name}: {len(images)} images, {len(missing)} missing, screenshot "
               + ("blank" if blank else f"rendered ({shot})"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep the runs, report and screenshot here (default: a temp dir)")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not on PATH: nothing checked", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="ccbench-screens-"))
    out.mkdir(parents=True, exist_ok=True)
    checks = Checks()
    run = main_job(checks, out / "results")
    interrupt(checks, out / "results-ctrlc")
    report(checks, run, out / "report")
    (out / "screens.json").write_text(json.dumps(checks.rows, indent=2) + "\n")
    print(f"{sum(r['result'] == 'pass' for r in checks.rows)} of {len(checks.rows)} checks pass; "
          f"details in {out / 'screens.json'}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
