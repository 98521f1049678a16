"""A ReFrame check that runs ccbench and reports latency and bus bandwidth as performance variables.

    reframe -C contrib/reframe/settings.py -c contrib/reframe/ccbench_check.py -r

ReFrame (reframe-hpc) runs the sweep through the partition's own launcher (``mpiexec -n N``,
``srun``, ...), as ``python3 -m mpi4py -m ccbench run`` -- ccbench's launch-free entry, so the
site's launcher and its options apply -- then prints the run in OSU Micro-Benchmarks' format
(``ccbench export --format osu``) and in nccl-tests' (``--format nccl-tests``), and reads the
figures the way ReFrame's own OSU checks do (a line ``^{size}\\s+(\\S+)``).  Sanity: ccbench
checked every element of every case ("all correct").  Set ``sizes``, ``collective`` and
``num_tasks`` with ``-S`` (``-S num_tasks=4``); give references with ReFrame's own
``reference`` mechanism in a site copy of this file.
"""

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, sanity_function, variable


@rfm.simple_test
class CcbenchCollective(rfm.RunOnlyRegressionTest):
    """One collective's native algorithm at a few sizes: latency (us) and bus bandwidth (GB/s) per size."""

    descr = "ccbench: the MPI library's collective, checked element by element"
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    collective = variable(str, value="allreduce")
    sizes = variable(str, value="8,4K,1M")
    num_tasks = 2
    executable = "python3"
    tags = {"ccbench", "mpi", "collectives"}

    @run_before("run")
    def set_command(self):
        self.executable_opts = ["-m", "mpi4py", "-m", "ccbench", "run", "-C", self.collective, "-s", self.sizes,
                                "--results-dir", "ccbench-results", "--no-show"]
        export = "python3 -m ccbench export latest --results-dir ccbench-results --format"
        self.postrun_cmds = [f"{export} osu", f"{export} nccl-tests"]

    @sanity_function
    def all_correct(self):
        return sn.assert_found(r"cases in \S+, all correct", self.stdout)

    def _size_bytes(self, size: str) -> int:
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1].upper(), 1)
        return int(size[:-1] if scale > 1 else size) * scale

    @performance_function("us")
    def latency(self, size: str = "8"):
        """The OSU block's latency at `size` (ccbench's median)."""
        return sn.extractsingle(rf"^{self._size_bytes(size)}\s+(\S+)$", self.stdout, 1, float)

    @performance_function("GB/s")
    def busbw(self, size: str = "8"):
        """The nccl-tests table's bus bandwidth at `size` (its 8th column)."""
        n = self._size_bytes(size)
        return sn.extractsingle(rf"^\s*{n}\s+\d+\s+\S+\s+\S+\s+-?\d+\s+\S+\s+\S+\s+(\S+)\s+\d+$", self.stdout, 1,
                                float)

    @run_before("performance")
    def set_perf_variables(self):
        self.perf_variables = {}
        for size in self.sizes.split(","):
            self.perf_variables[f"latency_{size}"] = self.latency(size)
            self.perf_variables[f"busbw_{size}"] = self.busbw(size)
