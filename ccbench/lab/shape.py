"""The lab's shape: hosts x ranks per host, how ranks are laid on the hosts, what the machine can hold (pure).

A lab run of ``-n N --ppn R`` uses ``N / R`` hosts with ``R`` ranks each.  ``block`` puts
ranks ``0 .. R-1`` on host 0, the next R on host 1, and so on; ``cyclic`` deals them out
one at a time (rank r on host ``r mod hosts``).  hydra does both from its host list: a host
``name:R`` takes R consecutive ranks, and a list of ``name:1`` entries is used round robin
when there are more ranks than entries (MPICH's "Using the Hydra Process Manager",
https://wiki.mpich.org/mpich/index.php/Using_the_Hydra_Process_Manager, host files).

Every lab host shares this machine's cores and memory, so a shape is refused when its
ranks exceed `MAX_RANKS_PER_CORE` per usable core or `RANK_MEMORY_BYTES` each of the
free memory; the refusal says which shapes fit.
"""

from dataclasses import dataclass

from ccbench.core.errors import UsageError

__all__ = ["MAX_HOSTS", "MAX_RANKS_PER_CORE", "ORDERS", "RANK_MEMORY_BYTES", "Shape", "capacity", "check_fits",
           "check_hosts", "check_ppn_divides", "resolve"]

#: Hosts a lab may have (the subnet is a /24 and every host is a namespace with its own emulated link).
MAX_HOSTS = 64
#: Ranks per usable core the lab accepts: 2 is the oversubscribed test shape (4 ranks on 2 cores); beyond 4 every
#: rank gets under a quarter of a core, and what is timed is the scheduler's slicing, not the links.
MAX_RANKS_PER_CORE = 4
#: Memory set aside per rank: a ccbench rank peaked at 157 MB resident in a 4 MiB allreduce sweep here.
RANK_MEMORY_BYTES = 256 << 20
ORDERS = ("block", "cyclic")


@dataclass(frozen=True)
class Shape:
    """`hosts` lab hosts with `ppn` ranks each, laid out in `order` (block or cyclic)."""

    hosts: int
    ppn: int
    order: str = "block"

    @property
    def ranks(self) -> int:
        return self.hosts * self.ppn

    def host_of_rank(self) -> list[int]:
        """The host index of every rank, in rank order."""
        if self.order == "cyclic":
            return [r % self.hosts for r in range(self.ranks)]
        return [r // self.ppn for r in range(self.ranks)]

    def hydra_hosts(self, names: list[str]) -> str:
        """hydra's ``-hosts`` value for this shape over the first `hosts` of `names`."""
        slots = 1 if self.order == "cyclic" else self.ppn
        return ",".join(f"{name}:{slots}" for name in names[: self.hosts])

    def describe(self) -> str:
        return (f"{self.hosts} hosts x {self.ppn} rank{'s' if self.ppn != 1 else ''}"
                + (f" ({self.order})" if self.ppn > 1 and self.order != "block" else ""))


def check_hosts(hosts: int) -> None:
    if not 2 <= hosts <= MAX_HOSTS:
        raise UsageError(f"--hosts must be between 2 and {MAX_HOSTS}, got {hosts}")


def check_ppn_divides(nranks: int, ppn: int) -> None:
    """Refuse a rank count that ``ppn`` ranks per host cannot lay out on whole hosts."""
    if ppn < 1:
        raise UsageError(f"--ppn must be at least 1, got {ppn}")
    if nranks < 1:
        raise UsageError(f"-n must be at least 1, got {nranks}")
    if nranks % ppn:
        lo, hi = (nranks // ppn) * ppn, (nranks // ppn + 1) * ppn
        raise UsageError(f"--ppn {ppn} does not divide -n {nranks}: every host gets {ppn} ranks, so give -n "
                         + (f"{lo} or {hi}" if lo else f"{hi}") + f" (or a --ppn that divides {nranks})")


def capacity(cores: int, free_memory_bytes: int | None) -> tuple[int, str]:
    """(most ranks this machine holds, why): `MAX_RANKS_PER_CORE` per core, `RANK_MEMORY_BYTES` per rank."""
    by_cores = max(1, cores) * MAX_RANKS_PER_CORE
    why = f"{cores} usable cores x {MAX_RANKS_PER_CORE} ranks per core"
    if free_memory_bytes is None:
        return by_cores, why
    by_memory = max(0, free_memory_bytes // RANK_MEMORY_BYTES)
    mem = f"{free_memory_bytes / 2**30:.1f} GiB free memory at {RANK_MEMORY_BYTES >> 20} MiB a rank"
    if by_memory < by_cores:
        return by_memory, f"{mem}; the cores would hold {by_cores}"
    return by_cores, f"{why}; the free memory would hold {by_memory}"


def _fits(hosts: int, ppn: int, most: int) -> list[str]:
    """Shapes of at most `most` ranks near the one asked for: its ppn on fewer hosts, its hosts with fewer ranks."""
    out = []
    if most // ppn >= 2:
        out.append(f"--hosts {min(most // ppn, MAX_HOSTS)} --ppn {ppn}")
    if hosts <= most and most // hosts >= 1 and most // hosts != ppn:
        out.append(f"--hosts {hosts} --ppn {most // hosts}")
    if not out and most >= 2:
        out.append(f"--hosts 2 --ppn {most // 2}")
    return out


def check_fits(hosts: int, ppn: int, cores: int, free_memory_bytes: int | None) -> None:
    """Refuse a shape larger than the machine holds (`capacity`), saying what fits."""
    check_hosts(hosts)
    if ppn < 1:
        raise UsageError(f"--ppn must be at least 1, got {ppn}")
    most, why = capacity(cores, free_memory_bytes)
    if hosts * ppn <= most:
        return
    fits = _fits(hosts, ppn, most)
    raise UsageError(f"a lab of {Shape(hosts, ppn).describe()} ({hosts * ppn} ranks) is more than this machine "
                     f"holds: at most {most} rank{'s' if most != 1 else ''} ({why}); "
                     + (f"what fits: {' or '.join(fits)}" if fits else "not even 2 hosts of 1 rank fit"))


def resolve(nranks: int | None, ppn: int | None, lab_hosts: int, lab_ppn: int = 1, order: str = "block") -> Shape:
    """The shape of a lab run: `nranks` (default: every host) at `ppn` per host (default: the lab's).

    Refused: a `ppn` that does not divide `nranks`, fewer than 2 hosts (nothing would cross a
    link) or more hosts than the lab has, an unknown order.
    """
    if order not in ORDERS:
        raise UsageError(f"--order {order!r}: choose from {', '.join(ORDERS)}")
    ppn = lab_ppn if ppn is None else ppn
    if ppn < 1:
        raise UsageError(f"--ppn must be at least 1, got {ppn}")
    n = lab_hosts * ppn if nranks is None else nranks
    check_ppn_divides(n, ppn)
    hosts = n // ppn
    if not 2 <= hosts <= lab_hosts:
        fits = (f"-n {2 * ppn}" if lab_hosts == 2 else f"-n between {2 * ppn} and {lab_hosts * ppn} in steps of {ppn}")
        raise UsageError(f"-n {n} at --ppn {ppn} needs {hosts} host{'s' if hosts != 1 else ''}: a lab run uses 2 to "
                         f"the lab's {lab_hosts} hosts, so give {fits}")
    return Shape(hosts, ppn, order)
