"""The ground floor: errors, units (parse and format sizes, times, rates), dtypes and ops, the
per-collective hooks (sizes, bus-bandwidth factors, buffers, exact checks), statistics.

May import: nothing of ccbench above it; numpy only.  Pure: no MPI, no terminal, no plots.
"""
