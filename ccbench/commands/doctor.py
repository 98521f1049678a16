"""The options of ``ccbench doctor`` (the diagnosis run kind; its command is built by ``ccbench.commands.kinds``).

A helper module: it defines no command of its own.  Exit codes of ``ccbench doctor``: 0 nobody
out of line, 4 suspects found (``ccbench.analysis.doctor.SUSPECTS_FOUND``), 5 no decision (the
machine was loaded while every launch measured: ``WITHHELD``), 1 wrong results, 2 bad input,
128 + N stopped by signal N.
"""

import click

__all__ = ["OPTIONS"]

OPTIONS = [
    click.option("-s", "--sizes", help="Message sizes of every test, e.g. 8,1M (default): the smallest gives the "
                                       "latency, the largest the bandwidth."),
    click.option("--groups", type=int, help="Split the ranks into this many equal groups of consecutive nodes, each "
                                            "group's collective timed at once (default 2 when the ranks are even "
                                            "and at least 4; 1: no groups). Must divide the ranks."),
    click.option("--exclude", metavar="HOSTS", help="Hosts (comma separated) whose ranks take no part: the "
                                                    "diagnosis of the rest, to confirm a suspect host."),
    click.option("--allow-load", type=float, metavar="SHARE",
                 help="Decide on launches during which other processes took up to this share of the machine's CPU "
                      "(default 0.2; 1: always decide); a launch above it takes no part, and with none left "
                      "nothing is decided (exit code 5)."),
]
