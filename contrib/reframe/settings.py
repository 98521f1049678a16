"""ReFrame configuration for running contrib/reframe/ccbench_check.py on this machine (CI, a workstation).

One local partition whose launcher is the MPI library's ``mpiexec``; the environment is the
shell's (activate the virtual environment that holds ccbench and its MPI first).  On a
cluster, use the site's own ReFrame configuration instead (a Slurm partition with ``srun``).
"""

site_configuration = {
    "systems": [
        {
            "name": "local",
            "descr": "this machine, ranks started by mpiexec",
            "hostnames": [".*"],
            "modules_system": "nomod",
            "partitions": [
                {
                    "name": "default",
                    "scheduler": "local",
                    "launcher": "mpiexec",
                    "environs": ["shell"],
                    "max_jobs": 1,
                }
            ],
        }
    ],
    "environments": [{"name": "shell", "target_systems": ["local"]}],
}
