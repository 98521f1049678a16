"""The run kinds: one `RunKind` object per kind, registered once, that every stage looks up by name.

A kind of run (a collective sweep, a training workload, or a kind a plug-in adds) is declared
in one place: what its rows are, what identifies a row, and -- optionally -- how each stage
treats it: how it is measured, compared, shown, reported and exported.  The engines
(``open_run``, ``compare_runs``, ``show``, ``report``, ``export``, the measuring driver) ask
``kind_named(run.kind)`` and call what it declares; where a kind declares nothing for a stage,
the engine's generic treatment applies (rows matched on ``key_fields``, a table of their
medians and intervals), so a new kind needs only its rows, its key and its plan.

A stage's part of a kind may be given as the object itself or as ``"module:attribute"``: the
built-in kinds name theirs that way, so that reading a run imports neither the measuring code
nor the report's, and a lower stage never imports a higher one (the same lazy reference
Python's entry points use, PEP 621 / ``importlib.metadata``).

Plug-ins.  A module that calls `register` (or an object `RunKind` it exposes) is loaded

- from the entry-point group ``ccbench.kinds`` of any installed package (``[project.entry-points."ccbench.kinds"]
  probe = "mypkg.probe:KIND"``), and
- from ``ccbench --plugin MODULE_OR_FILE`` (or the ``CCBENCH_PLUGINS`` environment variable, the same
  values separated by ``os.pathsep``), which ``ccbench`` exports to the jobs it starts so that the
  ranks load the same kinds.

Plug-ins are loaded on first need only: when a run, a command or ``--help`` names a kind this
ccbench does not know yet.
"""

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.core.errors import UsageError

__all__ = ["ENTRY_POINT_GROUP", "PLUGINS_VAR", "RunKind", "add_plugin", "kind_named", "kind_of_row_type",
           "known_kinds", "load_plugins", "register", "registered"]

#: The entry-point group installed packages declare their run kinds in.
ENTRY_POINT_GROUP = "ccbench.kinds"
#: The environment variable that names plug-in modules or files (separated by ``os.pathsep``).
PLUGINS_VAR = "CCBENCH_PLUGINS"

_FACETS = ("row_type", "options", "check", "plan", "exit_code", "matching", "compare_view", "view", "exports")


@dataclass(frozen=True)
class RunKind:
    """One kind of run: its rows, their identity, and what each stage does with it (None: the generic way).

    Identity: `name` (run.json's ``kind``), `row_type` (a frozen dataclass derived from
    ``ccbench.store.results.StoredRow``, with a ``KIND`` class variable naming the kind, and the
    statistics columns ``samples``, ``median_s``, ``ci_low_s``, ``ci_high_s``, ``nranks``), `marker`
    (a column every row has), `label` ("collective sweep"), `noun` (what messages call a run),
    `item` (what one row is called), `key_fields` (the row fields that identify a row: rows of
    two runs with the same values are one comparison; rows of launches with the same values are
    pooled into one).

    Measuring, for a kind whose command ccbench builds (``ccbench NAME``): `summary` (its one-line
    help), `options` (click options; their values are the run's ``params``), `check`
    (``check(params) -> params``: refuses bad values with a ``UsageError``), `plan` (``plan(ctx) ->
    [Item]``, see ``ccbench.measure.kind_run``), `exit_code` (``exit_code(run) -> int``: what the command ends
    with once its run is complete, 0 when all is well: a diagnosis's "suspects found"), `settings` (its own
    defaults of the settings every run has, e.g. ``{"rounds": 3}``; what the user gives still wins).  The sweep
    and the workload have commands of their own.

    Each stage's own part, None for the generic one: `matching` (comparing rows of two runs:
    ``ccbench.analysis.compare.Matching``), `compare_view` (showing a comparison:
    ``ccbench.present.compare.CompareView``), `view` (showing and reporting a run:
    ``ccbench.present.kinds.KindView``), `exports` ({format: function of [(name, meta, rows)] ->
    text}; every kind exports ``csv``).
    """

    name: str
    row_type: object
    marker: str
    label: str
    noun: str
    item: str
    key_fields: tuple[str, ...] = ()
    summary: str = ""
    options: Sequence = ()
    check: object = None
    plan: object = None
    exit_code: object = None
    matching: object = None
    compare_view: object = None
    view: object = None
    exports: object = None
    settings: dict = field(default_factory=dict, compare=False)  # (a dict: kept out of the hash)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def get(self, facet: str):
        """What the kind declares for `facet` (one of its fields), a ``"module:attribute"`` reference imported on
        first use; None when it declares nothing (the engine's generic way applies)."""
        value = getattr(self, facet)
        if not isinstance(value, str) or facet not in _FACETS or ":" not in value:
            return value
        if facet not in self._cache:
            module, _, attr = value.partition(":")
            obj = importlib.import_module(module)
            for part in attr.split("."):
                obj = getattr(obj, part)
            self._cache[facet] = obj
        return self._cache[facet]

    @property
    def rows(self) -> type:
        """The row type (`row_type` imported when given by reference)."""
        return self.get("row_type")

    def key_of(self, row) -> tuple:
        """The values of `row`'s `key_fields`."""
        return tuple(getattr(row, f) for f in self.key_fields)


_REGISTRY: dict[str, RunKind] = {}
_LOADED: set[str] = set()


def register(kind: RunKind) -> RunKind:
    """Add a kind (a plug-in module calls this when imported); its name and its command must be new."""
    if not isinstance(kind, RunKind):
        raise TypeError(f"register takes a RunKind, got {type(kind).__name__}")
    if not kind.name.isidentifier():
        raise UsageError(f"a run kind's name must be a word (letters, digits, _), got {kind.name!r}")
    old = _REGISTRY.get(kind.name)
    if old is not None and old is not kind:
        raise UsageError(f"run kind {kind.name!r} is registered twice")
    _REGISTRY[kind.name] = kind
    return kind


@contextlib.contextmanager
def registered(kind: RunKind):
    """Register `kind` for the duration of a ``with`` block (a test's kind, a script's own), then remove it."""
    register(kind)
    try:
        yield kind
    finally:
        _REGISTRY.pop(kind.name, None)


def known_kinds(load: bool = False) -> dict[str, RunKind]:
    """{name: kind} of the kinds registered so far (with `load`, after loading every plug-in)."""
    if load:
        load_plugins()
    return dict(_REGISTRY)


def kind_named(name: str) -> RunKind | None:
    """The kind called `name`, loading the plug-ins when it is not registered yet; None when none is."""
    if name not in _REGISTRY:
        load_plugins()
    return _REGISTRY.get(name)


def kind_of_row_type(row_type: type) -> str:
    """The kind a row type stores (its ``KIND`` class variable; a sweep's row has none)."""
    return getattr(row_type, "KIND", "sweep")


def add_plugin(spec: str) -> None:
    """Load the plug-in `spec` (a module name, or a ``.py`` file) now, and name it in ``CCBENCH_PLUGINS`` so
    that the jobs this process starts load it too (``ccbench --plugin``)."""
    if spec.endswith(".py") or os.sep in spec:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise UsageError(f"--plugin {spec!r}: no such file")
        spec = str(path.resolve())
    _load_one(spec)
    names = [s for s in os.environ.get(PLUGINS_VAR, "").split(os.pathsep) if s]
    if spec not in names:
        os.environ[PLUGINS_VAR] = os.pathsep.join([*names, spec])


def load_plugins() -> None:
    """Load every plug-in not loaded yet: ``CCBENCH_PLUGINS``, then the ``ccbench.kinds`` entry points."""
    for spec in os.environ.get(PLUGINS_VAR, "").split(os.pathsep):
        if spec and spec not in _LOADED:
            _load_one(spec)
    if "entry points" in _LOADED:
        return
    _LOADED.add("entry points")
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party package must not break ccbench: say which and go on
            print(f"ccbench: warning: run-kind plug-in {ep.name} ({ep.value}) failed to load: {exc}", file=sys.stderr)
            continue
        if isinstance(obj, RunKind):
            register(obj)


def _load_one(spec: str) -> None:
    """Import one plug-in (a module name or a file path) and register the `RunKind` it exposes as ``KIND``."""
    _LOADED.add(spec)
    try:
        if spec.endswith(".py") or os.sep in spec:
            name = "ccbench_plugin_" + Path(spec).stem
            module = sys.modules.get(name)
            if module is None:
                loader_spec = importlib.util.spec_from_file_location(name, spec)
                if loader_spec is None or loader_spec.loader is None:
                    raise ImportError(f"cannot load {spec}")
                module = importlib.util.module_from_spec(loader_spec)
                sys.modules[name] = module
                loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(spec)
    except ImportError as exc:
        raise UsageError(f"plug-in {spec!r} cannot be loaded: {exc}") from None
    kind = getattr(module, "KIND", None)
    if isinstance(kind, RunKind):
        register(kind)


# -- the kinds of ccbench itself: their stage parts named by reference (module docstring) ------------
register(RunKind(
    "sweep", "ccbench.store.results:Row", "collective", "collective sweep", "sweep", "case",
    key_fields=("collective", "algorithm", "nbytes", "dtype", "op", "in_place", "root"),
    matching="ccbench.analysis.compare:SWEEP_MATCHING", compare_view="ccbench.present.compare:SWEEP_VIEW",
    view="ccbench.present.kinds:SWEEP_VIEW", exports="ccbench.present.export:SWEEP_EXPORTS"))
register(RunKind(
    "workload", "ccbench.store.workload_rows:WorkloadRow", "workload", "training-workload run", "workload", "row",
    key_fields=("workload", "variant", "model", "algorithm", "dtype", "part", "label", "collective", "nbytes",
                "delay_s", "delayed_rank"),
    matching="ccbench.analysis.compare:WORKLOAD_MATCHING", compare_view="ccbench.present.compare:WORKLOAD_VIEW",
    view="ccbench.present.kinds:WORKLOAD_VIEW"))
register(RunKind(
    "doctor", "ccbench.store.doctor_rows:DoctorRow", "subject", "diagnosis", "diagnosis", "measurement",
    key_fields=("test", "subject", "nbytes"), options="ccbench.commands.doctor:OPTIONS",
    summary="Find the slow node, link or rank: every pair, each node, groups, all ranks; names suspects.",
    check="ccbench.measure.doctor:check", plan="ccbench.measure.doctor:plan",
    exit_code="ccbench.analysis.doctor:exit_code", view="ccbench.present.doctor:DOCTOR_VIEW",
    settings={"rounds": 3}))
