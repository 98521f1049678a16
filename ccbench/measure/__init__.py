"""Measuring under MPI: sweep configuration and plan (``config``), the one timing loop (``timing``),
the sweep driver (``sweep``), the training-workload driver (``workload``, ``workload_engine``,
``workload_config``), provenance, the launcher (``launcher.run_job``), one launch per forced native
variant (``multilaunch``), runs on the emulated lab (``lab``), what the MPI library holds (``library``).

May import: core, store, algorithms, and the domain packages ``workloads`` and ``lab``; never
analysis, present or commands.
"""
