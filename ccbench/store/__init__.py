"""Stored results: row types (``results.Row``, ``workload_rows.WorkloadRow``), run directories and
their writer (``results``), and the one way to open a run (``run.open_run``, which knows its kind).

May import: ``ccbench.core``.  Never rewrites a finished result.
"""
