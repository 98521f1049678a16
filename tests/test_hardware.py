"""Hardware provenance read from fake /proc and /sys trees: full, cgroup v1 and v2, and nearly empty (containers)."""

import os
from pathlib import Path

import pytest

from ccbench.core import hardware as record
from ccbench.core.errors import UsageError
from ccbench.measure import hardware as hw
from ccbench.measure.session import require_memory

GIB = 1 << 30

CPUINFO = "".join(
    f"processor\t: {c}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n"
    f"physical id\t: {c // 4}\ncore id\t\t: {c % 4 // 2}\n\n" for c in range(8))
MEMINFO = ("MemTotal:       65536000 kB\nMemFree:        1000 kB\nMemAvailable:   32768000 kB\n"
           "HugePages_Total:      16\nHugePages_Free:        8\nHugepagesize:       2048 kB\n")


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _node(root: Path) -> None:
    """A 2-socket, 4-core, 8-thread node with 2 NUMA nodes, one NIC, one virtual interface, one HCA."""
    _write(root, "proc/cpuinfo", CPUINFO)
    _write(root, "proc/meminfo", MEMINFO)
    _write(root, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
    _write(root, "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    _write(root, "sys/devices/system/cpu/online", "0-7\n")
    for c in range(8):
        _write(root, f"sys/devices/system/cpu/cpu{c}/topology/physical_package_id", f"{c // 4}\n")
        _write(root, f"sys/devices/system/cpu/cpu{c}/topology/core_id", f"{c % 4 // 2}\n")
    for n in range(2):
        _write(root, f"sys/devices/system/node/node{n}/cpulist", f"{4 * n}-{4 * n + 3}\n")
        _write(root, f"sys/devices/system/node/node{n}/meminfo", f"Node {n} MemTotal:       32768000 kB\n")
    net = root / "sys/class/net"
    for name, speed, mtu in (("ib0", "100000", "4092"), ("lo", "", "65536"), ("veth1", "10000", "1500")):
        _write(root, f"sys/class/net/{name}/mtu", mtu + "\n")
        _write(root, f"sys/class/net/{name}/speed", speed + "\n")
        _write(root, f"sys/class/net/{name}/operstate", "up\n")
    drivers = root / "sys/bus/pci/drivers/mlx5_core"
    drivers.mkdir(parents=True)
    (net / "ib0/device").mkdir()
    os.symlink(drivers, net / "ib0/device/driver")
    ib = "sys/class/infiniband/mlx5_0"
    _write(root, f"{ib}/hca_type", "MT4123\n")
    _write(root, f"{ib}/fw_ver", "20.31.1014\n")
    _write(root, f"{ib}/ports/1/rate", "200 Gb/sec (4X HDR)\n")
    _write(root, f"{ib}/ports/1/link_layer", "InfiniBand\n")
    _write(root, f"{ib}/ports/1/state", "4: ACTIVE\n")
    (root / ib / "device/net/ib0").mkdir(parents=True)


def _cgroup_v2(root: Path, job_limit: int | None, usage: int, inactive: int = 0) -> None:
    """A Slurm-like v2 tree: the limit on the job, the process in a task below it."""
    base = "sys/fs/cgroup"
    _write(root, f"{base}/cgroup.controllers", "cpuset cpu io memory pids\n")
    job = f"{base}/system.slice/slurmstepd.scope/job_42"
    task = f"{job}/step_0/user/task_0"
    _write(root, "proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n")
    _write(root, f"{job}/memory.max", f"{job_limit if job_limit is not None else 'max'}\n")
    _write(root, f"{job}/memory.current", f"{usage}\n")
    _write(root, f"{job}/memory.stat", f"anon {usage - inactive}\ninactive_file {inactive}\n")
    _write(root, f"{job}/cpu.max", "400000 100000\n")
    _write(root, f"{task}/memory.max", "max\n")
    _write(root, f"{task}/memory.current", "1000\n")
    _write(root, f"{task}/cpu.max", "max 100000\n")


def _cgroup_v1(root: Path, limit: int, usage: int) -> None:
    base = "sys/fs/cgroup"
    _write(root, "proc/self/cgroup", "4:memory:/slurm/uid_0/job_7\n3:cpu,cpuacct:/slurm/uid_0/job_7\n0::/\n")
    _write(root, f"{base}/memory/memory.limit_in_bytes", "9223372036854771712\n")
    _write(root, f"{base}/memory/slurm/uid_0/job_7/memory.limit_in_bytes", f"{limit}\n")
    _write(root, f"{base}/memory/slurm/uid_0/job_7/memory.usage_in_bytes", f"{usage}\n")
    _write(root, f"{base}/cpu,cpuacct/slurm/uid_0/job_7/cpu.cfs_quota_us", "200000\n")
    _write(root, f"{base}/cpu,cpuacct/slurm/uid_0/job_7/cpu.cfs_period_us", "100000\n")
    _write(root, f"{base}/cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
    _write(root, f"{base}/cpu,cpuacct/cpu.cfs_period_us", "100000\n")


def test_cpu_lists_round_trip():
    assert record.parse_cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert record.cpu_list([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert record.parse_cpu_list(None) == [] and record.parse_cpu_list("garbage") == [] and record.cpu_list([]) == ""


def test_a_full_node(tmp_path):
    _node(tmp_path)
    node = hw.node_hardware(tmp_path)
    assert node["cpu"] == {"model": "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "sockets": 2, "cores": 4,
                           "threads": 8, "online": "0-7"}
    assert node["numa"] == [{"node": 0, "cpus": "0-3", "memory_bytes": 32768000 * 1024},
                            {"node": 1, "cpus": "4-7", "memory_bytes": 32768000 * 1024}]
    assert node["memory"] == {"total_bytes": 65536000 * 1024, "available_bytes": 32768000 * 1024,
                              "hugepages": {"total": 16, "free": 8, "size_bytes": 2 << 20},
                              "transparent_hugepages": "madvise"}
    assert node["kernel"] == "6.1.0-18-amd64"
    assert node["cgroup"]["version"] is None
    assert node["net"] == [
        {"name": "ib0", "speed_mbps": 100000, "driver": "mlx5_core", "mtu": 4092, "state": "up", "virtual": False},
        {"name": "veth1", "speed_mbps": 10000, "driver": None, "mtu": 1500, "state": "up", "virtual": True}]
    assert node["rdma"] == [{"device": "mlx5_0", "hca_type": "MT4123", "fw_ver": "20.31.1014", "netdevs": ["ib0"],
                             "ports": [{"port": 1, "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand",
                                        "state": "4: ACTIVE"}]}]
    line = record.summary({"nodes": {"n1": node}, "ranks": [{"rank": 0, "host": "n1", "cpus": "0-3"}]})
    assert line == ("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz | 2 socket(s), 4 cores / 8 threads | 2 NUMA node(s) | "
                    "memory 62.5 GiB | NICs ib0 (100 Gb/s, mlx5_core), mlx5_0 (200 Gb/sec (4X HDR), InfiniBand)")


def test_topology_from_cpuinfo_when_sys_lacks_it(tmp_path):
    _write(tmp_path, "proc/cpuinfo", CPUINFO)
    assert hw.cpu_info(tmp_path) == {"model": "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", "sockets": 2, "cores": 4,
                                     "threads": 8, "online": "0-7"}


def test_an_empty_tree_reads_as_unknown(tmp_path):
    node = hw.node_hardware(tmp_path)
    assert node["cpu"] == {"model": None, "sockets": None, "cores": None, "threads": None, "online": None}
    assert node["numa"] == [] and node["net"] == [] and node["rdma"] == [] and node["kernel"] is None
    assert node["memory"]["total_bytes"] is None and node["memory"]["hugepages"]["total"] is None
    assert node["cgroup"] == {"version": None, "path": None, "cpu_quota": None, "memory_limit_bytes": None,
                              "memory_usage_bytes": None}
    assert hw.memory_available(tmp_path) == (None, "MemAvailable")
    assert record.summary({"nodes": {"h": node}}) == "CPU ? | NUMA ? | memory ? | NICs none"
    assert record.summary(None) is None and record.summary({}) is None


def test_unreadable_and_odd_files_are_tolerated(tmp_path):
    _write(tmp_path, "sys/class/net/eth0/mtu", "1500\n")
    _write(tmp_path, "sys/class/net/eth0/speed", "-1\n")  # a link down reads -1 (or EINVAL)
    (tmp_path / "sys/class/net/eth1").mkdir()
    _write(tmp_path, "sys/class/infiniband/rxe0/hca_type", "rxe\n")  # no ports, no device
    _write(tmp_path, "proc/cpuinfo", "processor\t: 0\n\nprocessor\t: 1\n")  # no model, no topology
    assert [(n["name"], n["speed_mbps"], n["mtu"]) for n in hw.network_interfaces(tmp_path)] == [
        ("eth0", None, 1500), ("eth1", None, None)]
    assert hw.rdma_devices(tmp_path) == [{"device": "rxe0", "hca_type": "rxe", "fw_ver": None, "netdevs": [],
                                          "ports": []}]
    assert hw.cpu_info(tmp_path) == {"model": None, "sockets": None, "cores": None, "threads": 2, "online": "0-1"}


def test_cgroup_v2_takes_the_job_limit_above_the_task(tmp_path):
    _write(tmp_path, "proc/meminfo", MEMINFO)
    _cgroup_v2(tmp_path, 8 * GIB, 3 * GIB, inactive=1 * GIB)
    cg = hw.cgroup_limits(tmp_path)
    assert cg == {"version": 2, "path": "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0", "cpu_quota": 4.0,
                  "memory_limit_bytes": 8 * GIB, "memory_usage_bytes": 2 * GIB}  # inactive file cache reclaimable
    avail, why = hw.memory_available(tmp_path)
    assert avail == 6 * GIB and "cgroup memory limit" in why


def test_cgroup_v2_without_a_limit_and_in_a_namespace(tmp_path):
    _write(tmp_path, "proc/meminfo", MEMINFO)
    _cgroup_v2(tmp_path, None, 3 * GIB)
    assert hw.cgroup_limits(tmp_path)["memory_limit_bytes"] is None
    assert hw.memory_available(tmp_path) == (32768000 * 1024, "MemAvailable")
    ns = tmp_path / "ns"  # a container: /proc/self/cgroup says "/", the limit is on the mount's root
    _write(ns, "proc/self/cgroup", "0::/\n")
    _write(ns, "sys/fs/cgroup/cgroup.controllers", "memory\n")
    _write(ns, "sys/fs/cgroup/memory.max", f"{2 * GIB}\n")
    _write(ns, "sys/fs/cgroup/memory.current", f"{GIB // 2}\n")
    assert hw.cgroup_limits(ns)["memory_limit_bytes"] == 2 * GIB
    assert hw.memory_available(ns)[0] == GIB * 3 // 2  # no meminfo: the cgroup's headroom alone


def test_cgroup_v1(tmp_path):
    _write(tmp_path, "proc/meminfo", MEMINFO)
    _cgroup_v1(tmp_path, 4 * GIB, 1 * GIB)
    cg = hw.cgroup_limits(tmp_path)
    assert cg == {"version": 1, "path": "/slurm/uid_0/job_7", "cpu_quota": 2.0, "memory_limit_bytes": 4 * GIB,
                  "memory_usage_bytes": 1 * GIB}
    assert hw.memory_available(tmp_path)[0] == 3 * GIB


def test_cgroup_v1_unlimited_is_no_limit(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/docker/abc\n")  # not mounted at that path: the root is read
    _write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    _write(tmp_path, "sys/fs/cgroup/memory/memory.usage_in_bytes", "1000\n")
    cg = hw.cgroup_limits(tmp_path)
    assert cg["version"] == 1 and cg["memory_limit_bytes"] is None and cg["cpu_quota"] is None


@pytest.mark.parametrize("version", [1, 2])
def test_require_memory_respects_the_cgroup_limit(tmp_path, version):
    _write(tmp_path, "proc/meminfo", MEMINFO)  # 31 GiB available on the node
    if version == 2:
        _cgroup_v2(tmp_path, 4 * GIB, 2 * GIB)
    else:
        _cgroup_v1(tmp_path, 4 * GIB, 2 * GIB)
    require_memory(GIB, 2, "a small case", "lower the sizes", root=tmp_path)  # 1 GiB < 80% of 2 GiB
    with pytest.raises(UsageError, match=r"a big case needs about 3 GiB .* only 2 GiB is available under the cgroup "
                                         r"memory limit \(4 GiB, 2 GiB in use\); lower the sizes"):
        require_memory(3 * GIB, 2, "a big case", "lower the sizes", root=tmp_path)
    bare = tmp_path / "bare"  # the same need fits the node when no cgroup limits it
    _write(bare, "proc/meminfo", MEMINFO)
    require_memory(3 * GIB, 2, "a big case", "lower the sizes", root=bare)


def test_transport_from_the_environment():
    env = {"UCX_TLS": "rc,sm", "UCX_NET_DEVICES": "mlx5_0:1", "FI_PROVIDER": "verbs", "OMPI_MCA_pml": "ucx",
           "OMPI_MCA_btl": "^openib", "MPIR_CVAR_CH4_NETMOD": "ofi", "HOME": "/root"}
    assert hw.transport(env) == {k: v for k, v in env.items() if k != "HOME"}
    assert hw.transport({}) == {}


def test_differences_name_cpu_cores_and_nics(tmp_path):
    _node(tmp_path)
    a = {"nodes": {"n1": hw.node_hardware(tmp_path)}}
    b = {"nodes": {"m1": hw.node_hardware(tmp_path)}}
    assert record.differences(a, b) == []
    b["nodes"]["m1"]["cpu"].update(model="AMD EPYC 7763", cores=128)
    b["nodes"]["m1"]["net"][0]["speed_mbps"] = 200000
    assert [d[0] for d in record.differences(a, b)] == ["CPU model", "core count", "NICs"]
    assert record.differences(a, None) == [] and record.differences({}, b) == []  # an older run recorded nothing
    two = {"nodes": {"n1": a["nodes"]["n1"], "m1": b["nodes"]["m1"]}}
    assert record.summary(two).endswith("| nodes differ (2 kinds)")


class _Comm:
    """A stand-in for an MPI communicator: this rank, and what every rank contributes."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def allgather(self, x):
        return [x] * self.size


def test_provenance_gathers_nodes_and_ranks(monkeypatch):
    from ccbench.measure import provenance

    monkeypatch.setenv("UCX_TLS", "sm,self")
    rec = provenance.gather_hardware(_Comm(0, 2), ["a", "a"])
    assert list(rec["nodes"]) == ["a"] and "cpu" in rec["nodes"]["a"]
    assert [(r["rank"], r["host"]) for r in rec["ranks"]] == [(0, "a"), (1, "a")]
    assert rec["ranks"][0]["cpus"] == record.cpu_list(os.sched_getaffinity(0))
    assert rec["transport"] == {"UCX_TLS": "sm,self"}
    assert provenance.gather_hardware(_Comm(1, 2), ["a", "a"])["nodes"] == {}  # only a node's first rank reads it
