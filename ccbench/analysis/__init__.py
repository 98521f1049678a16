"""Analyses of stored runs and of models: fits (``fit``), predictions (``predict``), fitting a run and
predicting from it (``runs``), the fastest of rows (``fastest``), the one comparison engine for every
run kind (``compare``), tuning-file choice (``tune``), the lab check, workload predictions, simulated
traces (``trace``).

May import: core, store, algorithms, the domain packages and measure (``tune --verify`` relaunches).
Returns data (dicts, dataclasses); prints nothing: no rich, no matplotlib, no MPI.
"""
