"""Where what is derived from a run goes (fits, reports, comparisons, tuning files, plots), and how it is written.

Reading a run never changes it: a command that reads ``results/RUN`` writes into
``results-derived/RUN/`` (a tree beside the results tree, named in the command's last line),
or into the folder the user names with ``--out``.  Files are created, never replaced: a second
fit of the same run writes ``fits-2.json``, a second report ``report-2/`` (as pytest-benchmark
numbers its saved runs and pyperf refuses to replace a file).
"""

import os
from collections.abc import Mapping
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.store.results import free_stem, new_numbered_dir

__all__ = ["DERIVED_SUFFIX", "derived_root", "output_dir", "write_new_dir", "write_new_file", "write_new_set"]

#: The derived tree of ``results/`` is ``results-derived/``.
DERIVED_SUFFIX = "-derived"


def derived_root(run_path: str | Path) -> Path:
    """The folder beside the run's results tree that holds what is derived from the run: ``TREE-derived/RUN``."""
    path = Path(run_path)
    tree = path.parent
    if not tree.name:  # a run given relative to the current directory, or at the root
        tree = tree.resolve()
    if not tree.name:
        raise UsageError(f"{str(path)!r} has no results tree to put derived files beside: give --out DIR")
    return tree.parent / (tree.name + DERIVED_SUFFIX) / path.name


def output_dir(run_path: str | Path, out: str | Path | None = None) -> Path:
    """The folder a command that read `run_path` writes into, created: `out` when given, else `derived_root`.

    Where it cannot be created or written (a read-only results tree, a file in the way), one
    clear error that names it and asks for ``--out DIR``.
    """
    folder = Path(out) if out is not None else derived_root(run_path)
    hint = "" if out is not None else ": give --out DIR"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"cannot write into {str(folder)!r}: it is a file, not a folder{hint}") from None
    except OSError as exc:
        raise UsageError(f"cannot write into {str(folder)!r} ({exc.strerror}){hint}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write into {str(folder)!r} (not writable){hint}")
    return folder


def _create(path: Path, content: str | bytes, exists: CCBenchError) -> Path:
    """Create `path` holding `content`, never over an existing file (`exists` is raised instead)."""
    try:
        with open(path, "xb") as f:
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
    except FileExistsError:
        raise exists from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    return path


def _appeared(path: Path) -> CCBenchError:
    return CCBenchError(f"{str(path)!r} appeared while writing; nothing is overwritten")


def write_new_set(folder: Path, stem: str, files: Mapping[str, str | bytes]) -> dict[str, Path]:
    """Write files that belong together (``{".json": text, ".csv": text}``) as ``stem`` + suffix in `folder`,
    under the first of ``stem``, ``stem-2``, ... that none of them has yet; return {suffix: path}."""
    base = free_stem(folder, stem, tuple(files))
    out = {}
    for suffix, content in files.items():
        out[suffix] = _create(folder / f"{base}{suffix}", content, _appeared(folder / f"{base}{suffix}"))
    return out


def write_new_dir(folder: Path, stem: str, files: Mapping[str, str | bytes]) -> Path:
    """Create a new directory ``stem`` (``stem-2``, ...) in `folder` holding `files` ({name: content}); return it."""
    where = new_numbered_dir(folder, stem, f"a {stem} folder")
    for name, content in files.items():
        _create(where / name, content, _appeared(where / name))
    return where


def write_new_file(path: str | Path, content: str | bytes, *, what: str = "results",
                   make_parents: bool = False) -> Path:
    """Write a file the user named (``-o FILE``), never over an existing one (a dangling link included): one clear
    error instead, saying that `what` are never overwritten.  `make_parents` creates the folders above it."""
    path = Path(path)
    if make_parents:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:     # a parent that is a file, not a directory
            raise UsageError(f"cannot write {path}: {path.parent} is not a directory") from None
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    return _create(path, content, UsageError(f"{path} exists; {what} are never overwritten: give another -o FILE"))
