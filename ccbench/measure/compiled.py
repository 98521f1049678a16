"""The compiled timing loop of the library's own collectives (``--loop compiled``): C, built once, loaded by ctypes.

A Python loop pays mpi4py's argument handling and the interpreter on every timed call, about
0.7 us over a C loop at 8 B here (docs/measuring.md); OSU Micro-Benchmarks and IMB pay none of
it.  ``csrc/ccbench_loop.c`` runs the same per-sample protocol as `ccbench.measure.timing.measure`
(barrier or window start, a timer around one call or K back-to-back calls) for all the samples of
one check in one ctypes call; the warm-up, the maximum over ranks, the stop rules and the
statistics stay in Python.  It is built on first use with the compiler wrapper of the MPI that
mpi4py runs (``$MPICC``, else the ``mpicc`` beside the loaded libmpi, beside ``mpiexec`` or on the
PATH) into a per-user cache (``$CCBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/ccbench``, else
``~/.cache/ccbench``), keyed by the source's hash and the wrapper's own description of itself;
one rank per node builds, under a file lock, and renames the result into place, so a build is
never seen half written nor made twice at once.  A library linked to another MPI than mpi4py's
is refused.  Hand-written algorithms always run in Python (they are Python).

A training workload's step is a sequence of native calls (``ccbench workload ... --loop``):
`CompiledLoop.sequence` turns their kernels into one `Sequence`, a sampler that runs them back to
back per sample in C (``ccb_take_seq``), with each call timed on its own as well, the way the
Python step timer does (`ccbench.measure.workload_engine.StepTimer`).
"""

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.measure.config import LOOPS

__all__ = ["CODES", "C_INT_MAX", "LOOPS", "CompiledLoop", "Kernel", "LoopUnavailableError", "Sequence", "build",
           "cache_dir", "choose", "find_mpicc", "fits_c_int", "load", "source"]

#: The collectives of the C loop, numbered as its enum.
CODES = {name: i for i, name in enumerate(("barrier", "pingpong", "bcast", "scatter", "gather", "allgather",
                                           "reduce", "reduce_scatter", "allreduce", "alltoall"))}

_ABI = 2  # CCB_ABI of the C file this module speaks to
_BUF, _IN_PLACE, _NULL = 0, 1, 2


#: The largest count the C loop passes to MPI (its ``int``; MPI's classic count argument is an ``int`` too).
C_INT_MAX = 2**31 - 1


def fits_c_int(count: int) -> bool:
    """Whether `count` elements can go through the C loop: 2^31 elements and more would wrap (2 GiB of uint8 became
    -2147483648 elements, 4 GiB became 0)."""
    return 0 <= count <= C_INT_MAX


class LoopUnavailableError(CCBenchError):
    """The compiled loop cannot be built or loaded here (no compiler, another MPI, ...)."""


class _Case(ctypes.Structure):
    """The C file's ``ccb_case``."""

    _fields_ = [("coll", ctypes.c_int), ("comm", ctypes.c_int), ("dtype", ctypes.c_int), ("op", ctypes.c_int),
                ("root", ctypes.c_int), ("count", ctypes.c_int), ("sbuf", ctypes.c_void_p),
                ("rbuf", ctypes.c_void_p), ("skind", ctypes.c_int), ("rkind", ctypes.c_int)]


def source() -> Path:
    """The C file shipped with the package."""
    return Path(str(resources.files("ccbench.measure").joinpath("csrc", "ccbench_loop.c")))


def _mapped_libmpi() -> set[str]:
    """The libmpi files mapped into this process (Linux; empty where /proc is missing)."""
    try:
        with open("/proc/self/maps") as f:
            return {line.split()[-1] for line in f if "/libmpi" in line and ".so" in line}
    except OSError:
        return set()


def find_mpicc() -> str | None:
    """The MPI compiler wrapper of the MPI mpi4py runs: $MPICC, beside the loaded libmpi, beside mpiexec, on PATH."""
    given = os.environ.get("MPICC")
    if given:
        return shutil.which(given) or (given if os.access(given, os.X_OK) else None)
    dirs = [Path(p).parent.parent / "bin" for p in sorted(_mapped_libmpi())]
    mpiexec = shutil.which("mpiexec")
    if mpiexec:
        dirs.append(Path(mpiexec).parent)
    dirs.append(Path(sys.executable).parent)
    for d in dirs:
        cand = d / "mpicc"
        if os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which("mpicc")


def cache_dir() -> Path:
    """Where built loops are kept: $CCBENCH_CACHE_DIR, else $XDG_CACHE_HOME/ccbench, else ~/.cache/ccbench."""
    given = os.environ.get("CCBENCH_CACHE_DIR")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ccbench"


def _describe(mpicc: str) -> str:
    """What the wrapper compiles with: its -show (MPICH) or --showme (Open MPI) line and its compiler's version."""
    out = [os.path.realpath(mpicc)]
    for args in (["-show"], ["--showme"]):
        r = subprocess.run([mpicc, *args], capture_output=True, text=True, timeout=60)
        if r.returncode == 0 and r.stdout.strip():
            out.append(r.stdout.strip())
            break
    r = subprocess.run([mpicc, "--version"], capture_output=True, text=True, timeout=60)
    out.append(r.stdout.strip())
    return "\n".join(out)


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on `path` (fcntl.flock), held for the block."""
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(mpicc: str | None = None, where: Path | None = None) -> Path:
    """The shared library of the C loop, built with `mpicc` into `where` unless already there; its path.

    Built under a lock, to a temporary name renamed into place: concurrent callers wait, and
    none sees a half-written file.  LoopUnavailableError when no wrapper is found or the build fails.
    """
    mpicc = mpicc or find_mpicc()
    if mpicc is None:
        raise LoopUnavailableError("the compiled loop needs an MPI compiler wrapper (mpicc): none found "
                              "(set MPICC, or put the MPI's bin directory on the PATH)")
    src = source()
    text = src.read_bytes()
    try:
        desc = _describe(mpicc)
    except (OSError, subprocess.SubprocessError) as exc:
        raise LoopUnavailableError(f"cannot run {mpicc}: {exc}") from None
    key = hashlib.sha256(text + b"\0" + desc.encode()).hexdigest()[:16]
    where = cache_dir() if where is None else where
    target = where / f"ccbench_loop-{key}.so"
    if target.exists():
        return target
    try:
        where.mkdir(parents=True, exist_ok=True)
        with _locked(where / f"ccbench_loop-{key}.lock"):
            if target.exists():  # built by another process while this one waited
                return target
            tmp = where / f".ccbench_loop-{key}.{os.getpid()}.so"
            cmd = [mpicc, "-O2", "-shared", "-fPIC", "-std=c99", "-o", str(tmp), str(src)]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.SubprocessError) as exc:
                raise LoopUnavailableError(f"cannot build the compiled loop with {mpicc}: {exc}") from None
            if r.returncode != 0 or not tmp.exists():
                tmp.unlink(missing_ok=True)
                last = (r.stderr.strip().splitlines() or ["no message"])[-1]
                raise LoopUnavailableError(f"cannot build the compiled loop with {mpicc}: {last}")
            os.replace(tmp, target)
    except OSError as exc:
        raise LoopUnavailableError(f"cannot build the compiled loop in {where}: {exc.strerror or exc}") from None
    return target


def _check(err: int) -> None:
    """A CCBenchError for an MPI error code the C loop returned."""
    if err:
        from mpi4py import MPI

        raise CCBenchError(f"compiled loop: MPI error {err}: {MPI.Get_error_string(err)}")


class Kernel:
    """One case's compiled calls: `take` samples like the Python loop's inner loop, `call` once untimed."""

    def __init__(self, lib, case: _Case, keep: tuple) -> None:
        self._lib, self._case, self._keep = lib, case, keep  # keep: the arrays the pointers point into
        self.now = lib.ccb_now

    def take(self, local: np.ndarray, start: int, stop: int, batch: int, window: bool, gap_s: float,
             offset_s: float) -> None:
        """Samples start..stop-1 into `local` (this rank's time per call; see `ccbench.measure.timing.measure`)."""
        if stop <= start:
            return
        ptr = ctypes.c_void_p(local.ctypes.data + start * local.itemsize)
        _check(self._lib.ccb_take(ctypes.byref(self._case), ptr, stop - start, batch, int(window), gap_s, offset_s))

    def call(self) -> None:
        """One call, untimed (what the validation runs)."""
        _check(self._lib.ccb_call(ctypes.byref(self._case)))


class Sequence:
    """Kernels run back to back per sample (a training step's calls), synchronised on `sync`: a `Sampler`.

    With `rows` > 0 every call is timed on its own as well, into ``times`` (rows x calls): the
    r-th run of the sequence (warm-up runs included, counted from the first `take`) writes row
    r % rows, as `ccbench.measure.workload_engine.StepTimer` does.  `delay_s` > 0: this rank
    sleeps that long after each barrier, before its timer starts
    (`ccbench.measure.workload_engine.DelayedSync`, the straggler workload).
    """

    def __init__(self, lib, sync, kernels: list[Kernel], rows: int = 0, delay_s: float = 0.0) -> None:
        self._lib = lib
        self._cases = (_Case * max(1, len(kernels)))(*[k._case for k in kernels])
        self._n = len(kernels)
        self._keep = tuple(k._keep for k in kernels)  # the arrays the cases point into
        self._sync = sync.py2f()
        self.delay_s = float(delay_s)
        self.times = np.zeros((rows, self._n)) if rows > 0 else None
        self.runs = 0  # runs of the sequence so far (the next one's row: runs % rows)
        self.now = lib.ccb_now

    def take(self, local: np.ndarray, start: int, stop: int, batch: int, window: bool, gap_s: float,
             offset_s: float) -> None:
        """Samples start..stop-1 into `local` (this rank's time per run of the sequence)."""
        if stop <= start:
            return
        ptr = ctypes.c_void_p(local.ctypes.data + start * local.itemsize)
        times = None if self.times is None else ctypes.c_void_p(self.times.ctypes.data)
        rows = 0 if self.times is None else len(self.times)
        _check(self._lib.ccb_take_seq(self._cases, self._n, self._sync, ptr, stop - start, batch, int(window),
                                      gap_s, offset_s, self.delay_s, times, rows, self.runs % max(1, rows)))
        self.runs += (stop - start) * batch


class CompiledLoop:
    """The loaded C loop: a `Kernel` per case, a `Sequence` of them per step."""

    def __init__(self, path: Path) -> None:
        before = _mapped_libmpi()
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise LoopUnavailableError(f"cannot load the compiled loop {path}: {exc}") from None
        extra = _mapped_libmpi() - before
        if before and extra:
            raise LoopUnavailableError(f"the compiled loop links {sorted(extra)[0]}, not the MPI library mpi4py loaded "
                                       f"({sorted(before)[0]}); set MPICC to that MPI's mpicc")
        lib.ccb_abi.restype = ctypes.c_int
        if lib.ccb_abi() != _ABI:
            raise LoopUnavailableError(f"{path} is another version of the compiled loop")
        lib.ccb_now.restype = ctypes.c_double
        lib.ccb_now.argtypes = []
        lib.ccb_library_version.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.ccb_take.argtypes = [ctypes.POINTER(_Case), ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_double, ctypes.c_double]
        lib.ccb_call.argtypes = [ctypes.POINTER(_Case)]
        lib.ccb_take_seq.argtypes = [ctypes.POINTER(_Case), ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                     ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_double,
                                     ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        from mpi4py import MPI

        buf = ctypes.create_string_buffer(8192)
        lib.ccb_library_version(buf, len(buf))
        theirs, mine = buf.value.decode(errors="replace").strip(), MPI.Get_library_version().strip()
        if theirs != mine:
            raise LoopUnavailableError(f"the compiled loop was built against {theirs.splitlines()[0]!r} but mpi4py "
                                       f"runs {mine.splitlines()[0]!r}; set MPICC to that MPI's mpicc")
        self.lib, self.path = lib, path

    def kernel(self, comm, collective: str, count: int, args: tuple, kwargs: dict) -> Kernel | None:
        """The kernel of a native call ``fn(comm, *args, **kwargs)`` with `count` elements per buffer or block;
        None for a count the C loop's ``int`` cannot hold (`fits_c_int`), or a collective it has no code for (the
        v-collectives): the Python loop times that case (with mpi4py's MPI-4 large-count calls), and its row says so
        (``loop``: python)."""
        if not fits_c_int(count) or collective not in CODES:  # the v-collectives: the Python loop
            return None
        from mpi4py import MPI

        arrays = [a for a in args if isinstance(a, np.ndarray)]
        # the predefined type mpi4py's buffer interface infers from the array's typecode
        try:
            dtype = MPI.Datatype.fromcode(arrays[0].dtype.char) if arrays else MPI.BYTE
        except (KeyError, ValueError):  # no predefined MPI type (bfloat16): the Python loop, with its user type
            return None
        op = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}.get(kwargs.get("op"), MPI.SUM)

        def pointer(a) -> tuple[int | None, int]:
            if isinstance(a, np.ndarray):
                if not a.flags.c_contiguous:
                    raise CCBenchError("compiled loop: buffers must be contiguous")
                return a.ctypes.data, _BUF
            return None, (_IN_PLACE if a is MPI.IN_PLACE else _NULL)

        bufs = list(args) + [None] * (2 - len(args))
        (s, sk), (r, rk) = pointer(bufs[0]), pointer(bufs[1])
        case = _Case(CODES[collective], comm.py2f(), dtype.py2f(), op.py2f(), int(kwargs.get("root", 0)), count,
                     s, r, sk, rk)
        return Kernel(self.lib, case, tuple(arrays))

    def sequence(self, sync, kernels: list, rows: int = 0, delay_s: float = 0.0) -> Sequence | None:
        """The `Sequence` of `kernels` synchronised on the communicator `sync`; None where a kernel is None (a
        count the C loop cannot hold: the Python loop times the whole sequence then)."""
        if any(k is None for k in kernels):
            return None
        return Sequence(self.lib, sync, list(kernels), rows, delay_s)


def load(comm) -> CompiledLoop:
    """Build (one rank per node) and load the C loop on every rank of `comm`; LoopUnavailableError on all alike."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    path, err = None, None
    if node.Get_rank() == 0:
        try:
            path = str(build())
        except LoopUnavailableError as exc:
            err = str(exc)
    path, err = node.bcast((path, err), root=0)
    node.Free()
    loop = None
    if err is None:
        try:
            loop = CompiledLoop(Path(path))
        except LoopUnavailableError as exc:
            err = str(exc)
    errs = [e for e in comm.allgather(err) if e]
    if errs:
        raise LoopUnavailableError(errs[0])
    return loop


#: Why ``auto`` times a run with hand-written algorithms in Python (its record's ``why``).
MIXED = ("hand-written and persistent algorithms are timed in Python, so the native cases are too: the algorithms "
         "compare under one loop (--loop compiled times plain native in C)")


def choose(comm, requested: str, hand_written: bool = False) -> tuple[CompiledLoop | None, dict]:
    """(The compiled loop or None, its record for run.json): the loop a run asked for (``LOOPS``), on every rank alike.

    ``compiled`` that cannot be built is a UsageError (one line, exit 2); ``auto`` falls back
    to the Python loop and says why, in the record and in one line on rank 0's stderr.  ``auto`` in a run that
    also times `hand_written` algorithms (or persistent ones, which only Python times) is the Python loop
    (``MIXED``): OSU-comparable native figures where the run asks for native alone, one loop for every row where it
    compares algorithms.
    """
    if requested not in LOOPS:
        raise UsageError(f"loop {requested!r}: choose from {', '.join(LOOPS)}")
    if requested == "python":
        return None, {"requested": "python", "used": "python"}
    if requested == "auto" and hand_written:
        return None, {"requested": "auto", "used": "python", "why": MIXED, "mixed": True}
    try:
        loop = load(comm)
    except LoopUnavailableError as exc:
        if requested == "compiled":
            raise UsageError(f"--loop compiled: {exc}") from None
        if comm.Get_rank() == 0:
            print(f"ccbench: note: --loop auto: timing in Python ({exc})", file=sys.stderr, flush=True)
        return None, {"requested": requested, "used": "python", "why": str(exc)}
    return loop, {"requested": requested, "used": "compiled", "library": str(loop.path)}
