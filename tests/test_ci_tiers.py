"""The CI tier scripts (Slurm, Open MPI, the lab): a tier that cannot run fails the build in CI
(CI=true) and skips, with its reason, elsewhere (tests/ci_tier.sh).

Every script runs under a PATH of stubs only: a fake ``id`` (root or not, whoever runs the
test), the few real tools the scripts use before deciding, and failing stand-ins for the
heavy commands (apt-get, pip, the daemons) that record any call.  So each run takes the
cannot-run path in a fraction of a second and installs or starts nothing, as root or not.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BASH = shutil.which("bash") or "/bin/bash"
TIERS = {
    "slurm": REPO / "tests" / "slurm" / "ci_slurm.sh",
    "openmpi": REPO / "tests" / "openmpi" / "ci_openmpi.sh",
    "lab": REPO / "tests" / "lab" / "ci_lab.sh",
    "reframe": REPO / "tests" / "reframe" / "ci_reframe.sh",
}
REAL_TOOLS = ("dirname", "mktemp", "rm")
HEAVY = ("apt-get", "python", "python3", "pip", "sbatch", "slurmctld", "slurmd", "munged",
         "iptables", "ip", "mpiexec")


def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def make_bin(tmp_path: Path, uid: int, stubs: dict[str, str]) -> tuple[Path, Path]:
    """A bin directory: fake id, the real REAL_TOOLS, and STUBS (name -> sh body); and the file
    every stub appends its name to when it is called."""
    bindir, calls = tmp_path / "bin", tmp_path / "calls"
    bindir.mkdir()
    _stub(bindir / "id", f"echo {uid}")
    for tool in REAL_TOOLS:
        real = shutil.which(tool)
        assert real, f"{tool} not found"
        (bindir / tool).symlink_to(real)
    for name, body in stubs.items():
        _stub(bindir / name, f'echo {name} >> "{calls}"\n{body}')
    return bindir, calls


def run_tier(tier: str, bindir: Path, tmp_path: Path, ci: str | None, **extra: str):
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "LC_ALL": "C",
           # a virtual environment is "active": the Slurm script must not activate the repo's
           "VIRTUAL_ENV": str(tmp_path / "venv"), **extra}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([BASH, str(TIERS[tier])], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)


def check_outcome(r, tier: str, ci: str | None, reason: str) -> None:
    out = r.stdout + r.stderr
    if ci == "true":
        assert r.returncode == 1, out
        fails = [ln for ln in r.stderr.splitlines() if ln.startswith(f"{tier}: FAIL: ")]
        assert len(fails) == 1 and reason in fails[0], out
        assert ": SKIP:" not in out, out
    else:
        assert r.returncode == 0, out
        skips = [ln for ln in r.stdout.splitlines() if ln.startswith(f"{tier}: SKIP: ")]
        assert len(skips) == 1 and reason in skips[0], out
        assert ": FAIL:" not in out, out


FAILING_APT = 'echo "E: could not reach the archive" >&2; exit 100'
CI_VALUES = [pytest.param("true", id="CI=true"), pytest.param(None, id="CI-unset"),
             pytest.param("false", id="CI=false")]
CASES = [
    # tier, fake uid, stubs, reason the tier gives
    ("slurm", 1000, {}, "not root"),
    ("slurm", 0, {}, "no apt-get"),
    ("slurm", 0, {"apt-get": FAILING_APT, "python": "exit 0"},
     "apt-get update failed: E: could not reach the archive"),
    ("lab", 1000, {}, "not root"),
    ("lab", 0, {}, "no iptables or ip, and no apt-get"),
    ("lab", 0, {"apt-get": FAILING_APT}, "apt-get update failed: E: could not reach the archive"),
    ("openmpi", 0, {}, "no python3"),
    ("openmpi", 1000, {"python3": 'echo "No module named venv" >&2; exit 1'},
     "python3 -m venv failed"),
]


@pytest.mark.parametrize("ci", CI_VALUES)
@pytest.mark.parametrize("tier,uid,stubs,reason", CASES,
                         ids=[f"{t}-uid{u}-{'+'.join(s) or 'bare'}" for t, u, s, _ in CASES])
def test_tier_that_cannot_run_fails_in_ci_and_skips_elsewhere(tmp_path, tier, uid, stubs, reason, ci):
    bindir, _ = make_bin(tmp_path, uid, stubs)
    check_outcome(run_tier(tier, bindir, tmp_path, ci), tier, ci, reason)


@pytest.mark.parametrize("ci", CI_VALUES)
@pytest.mark.parametrize("tier", sorted(TIERS))
def test_forced_skip_decides_before_anything_runs(tmp_path, tier, ci):
    # as root, with every heavy command at hand: the forced reason must win before any is called
    bindir, calls = make_bin(tmp_path, 0, {name: "exit 1" for name in HEAVY})
    r = run_tier(tier, bindir, tmp_path, ci, CCBENCH_TIER_FORCE_SKIP="no cluster in this test")
    check_outcome(r, tier, ci, "no cluster in this test")
    assert not calls.exists(), f"called before the skip decision: {calls.read_text()}"


def test_ci_run_exports_ci_true_before_the_tiers():
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    export = next(i for i, ln in enumerate(lines) if ln.strip() == "export CI=${CI:-true}")
    first_tier = next(i for i, ln in enumerate(lines) if "bash tests/" in ln and not ln.startswith("#"))
    assert export < first_tier


def test_every_tier_uses_the_shared_helper():
    for tier, script in TIERS.items():
        text = script.read_text()
        assert "source tests/ci_tier.sh" in text and f"tier_init {tier}" in text, script
        code = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
        assert not [ln for ln in code if "exit 0" in ln], f"{script}: an exit 0 that is not skip_or_fail"
    assert os.access(REPO / "tests" / "ci_tier.sh", os.R_OK)
