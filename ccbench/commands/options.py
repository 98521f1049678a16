"""Click options shared by commands in different modules (`ccbench predict`, `ccbench workload predict`)."""

import click

__all__ = ["network_options"]

_NETWORK_OPTIONS = [
    click.option("--from", "from_run", metavar="RUN", help="Take alpha, beta, gamma from a run's ping-pong "
                 "and local reduction benchmark."),
    click.option("--results-dir", default="results", help="Where to look for --from RUN by name or 'latest'."),
    click.option("--alpha", help="Network latency: 2us, 1.5ms, 3e-6 (bare numbers are seconds)."),
    click.option("--beta", help="Inverse bandwidth in s/byte (1e-10) or a bandwidth in bytes/s (10GB/s, 800MiB/s)."),
    click.option("--gamma", help="Reduction time per byte, as --beta (default 0: reductions free)."),
]


def network_options(fn):
    """The options that give a prediction its parameters (see `ccbench.analysis.runs.given_params`)."""
    for opt in reversed(_NETWORK_OPTIONS):
        fn = opt(fn)
    return fn
