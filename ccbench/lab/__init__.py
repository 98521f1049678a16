"""An emulated cluster on one machine: hosts (network and UTS namespaces) joined by links of chosen delay and rate.

`core` builds and removes the namespaces, links and NFQUEUE rules; `emulator` is the
userspace link emulator; `link` its release-time schedule, the hosts' and pairs' links and unit
parsing; `netlink` the nfnetlink_queue messages; `shape` the lab's hosts x ranks per host
and what the machine holds; `hostexec` the launcher hydra starts each host's proxy with; `slurm`
a Slurm controller and one slurmd per host (``lab up --slurm``).
Sweeps on the lab are launched by ``ccbench.measure.lab``; a lab run is checked (fitted
against injected) by ``ccbench.analysis.lab_check``.

May import: core (and the standard library); needs root to build a lab.
"""
