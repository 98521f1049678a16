#!/usr/bin/env python3
"""Write the version and sha256 of a released sdist into the Spack recipe and the EasyBuild easyconfig.

    python contrib/release_checksums.py dist/ccbench-X.Y.Z.tar.gz          # update both, in place
    python contrib/release_checksums.py --check dist/ccbench-X.Y.Z.tar.gz  # exit 1 unless they match it
    python contrib/release_checksums.py --dest DIR dist/ccbench-X.Y.Z.tar.gz  # write updated copies to DIR

Release order (docs/releasing.md): build the sdist once, run this on it, commit, upload that
same file to PyPI -- Spack and EasyBuild check the download against these checksums, so the
file that is uploaded must be the file that was hashed.  The version must be the one in
ccbench/core/version.py (the only place it is written).  Standard library only.
"""

import argparse
import hashlib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPACK = HERE / "spack" / "packages" / "py-ccbench" / "package.py"
EASYBUILD_DIR = HERE / "easybuild"
SDIST = re.compile(r"^ccbench-(?P<version>\d+(?:\.\d+)*(?:[a-z]+\d*)?)\.tar\.gz$")
SHA = re.compile(r"^[0-9a-f]{64}$")


def package_version(root: Path = ROOT) -> str:
    """ccbench.__version__, read from the source (no import)."""
    m = re.search(r'^__version__ = "([^"]+)"', (root / "ccbench" / "core" / "version.py").read_text(), re.M)
    if not m:
        raise SystemExit("release_checksums: no __version__ in ccbench/core/version.py")
    return m.group(1)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def easyconfig(folder: Path = EASYBUILD_DIR) -> Path:
    """The one ccbench easyconfig in `folder`."""
    found = sorted(folder.glob("ccbench-*.eb"))
    if len(found) != 1:
        raise SystemExit(f"release_checksums: expected one ccbench-*.eb in {folder}, found {len(found)}")
    return found[0]


def spack_text(text: str, version: str, digest: str) -> str:
    """The recipe with `version` (sha256 `digest`) first in its versions and the pypi path at that version."""
    text = re.sub(r'pypi = "ccbench/ccbench-[^"]+\.tar\.gz"', f'pypi = "ccbench/ccbench-{version}.tar.gz"', text)
    line = f'    version("{version}", sha256="{digest}")'
    mine = re.compile(rf'^    version\("{re.escape(version)}", sha256="[^"]*"\)$', re.M)
    if mine.search(text):
        return mine.sub(line, text)
    first = re.search(r"^    version\(", text, re.M)
    if first is None:
        raise SystemExit("release_checksums: the Spack recipe has no version() line")
    return text[:first.start()] + line + "\n" + text[first.start():]


def easyconfig_text(text: str, version: str, digest: str) -> str:
    """The easyconfig at `version` with the sdist's checksum."""
    text, n1 = re.subn(r"^version = '[^']*'$", f"version = '{version}'", text, flags=re.M)
    text, n2 = re.subn(r"^checksums = \['[^']*'\]$", f"checksums = ['{digest}']", text, flags=re.M)
    if n1 != 1 or n2 != 1:
        raise SystemExit("release_checksums: the easyconfig needs one version = '...' and one checksums = ['...'] line")
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sdist", type=Path)
    ap.add_argument("--check", action="store_true", help="only check that the recipes carry this sdist")
    ap.add_argument("--dest", type=Path, help="write the updated recipes here instead of in place")
    args = ap.parse_args(argv)
    m = SDIST.match(args.sdist.name)
    if not m or not args.sdist.is_file():
        print(f"release_checksums: {args.sdist} is not a ccbench-VERSION.tar.gz file", file=sys.stderr)
        return 2
    version = m.group("version")
    if version != package_version():
        print(f"release_checksums: {args.sdist.name} is version {version}, ccbench/core/version.py says "
              f"{package_version()}", file=sys.stderr)
        return 2
    digest = sha256(args.sdist)
    eb = easyconfig()
    new_spack = spack_text(SPACK.read_text(), version, digest)
    new_eb = easyconfig_text(eb.read_text(), version, digest)
    eb_name = re.sub(r"^ccbench-[^-]+-", f"ccbench-{version}-", eb.name)
    if args.check:
        ok = new_spack == SPACK.read_text() and new_eb == eb.read_text() and eb_name == eb.name
        print(f"release_checksums: recipes {'match' if ok else 'do NOT match'} {args.sdist.name} ({digest})")
        return 0 if ok else 1
    if args.dest:
        (args.dest / "spack").mkdir(parents=True, exist_ok=True)
        (args.dest / "spack" / "package.py").write_text(new_spack)
        (args.dest / eb_name).write_text(new_eb)
    else:
        SPACK.write_text(new_spack)
        (EASYBUILD_DIR / eb_name).write_text(new_eb)
        if eb_name != eb.name:
            eb.unlink()
    print(f"release_checksums: {version} sha256 {digest} written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
