"""An emulated cluster on one machine: network namespaces joined by links of chosen delay and rate.

`core` builds and removes the namespaces, links and NFQUEUE rules; `emulator` is the
userspace link emulator; `link` its release-time schedule and unit parsing; `netlink` the
nfnetlink_queue messages; `run` launches a sweep with one rank per host; `check` fits a
lab run and sets the fitted parameters beside the injected ones.
"""
