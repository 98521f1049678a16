# A Spack recipe for ccbench: copy contrib/spack into a Spack repository
# (`spack repo add contrib/spack` after adding a repo.yaml with `namespace: ccbench`), then
# `spack install py-ccbench ^mpich` (or ^openmpi, or the site's MPI as an external).
# mpi4py is built against the MPI in the spec, so ccbench measures that library.
# Version and checksum: written by contrib/release_checksums.py from the released sdist.

from spack.package import *


class PyCcbench(PythonPackage):
    """MPI collective benchmarks: the MPI library's own algorithms next to hand-written
    textbook algorithms, every result checked, launches as the unit of replication,
    alpha-beta-gamma models and predictions at scale."""

    homepage = "https://pypi.org/project/ccbench/"
    pypi = "ccbench/ccbench-0.1.0.tar.gz"

    license("MIT")

    version("0.1.0", sha256="d0448f271f9eac677e620a2e39e856f2b122eeb150fe737df6c78d7feb1d92a1")

    variant("report", default=False, description="Figures in reports and plots (matplotlib)")

    depends_on("python@3.11:", type=("build", "run"))
    depends_on("py-setuptools@77:", type="build")
    depends_on("py-mpi4py@4.1:", type=("build", "run"))
    depends_on("py-numpy@1.24:", type=("build", "run"))
    depends_on("py-click@8.1:", type=("build", "run"))
    depends_on("py-rich@13:", type=("build", "run"))
    depends_on("py-matplotlib@3.7:", when="+report", type=("build", "run"))

    def test_version(self):
        """ccbench --version names the installed version"""
        ccbench = which(self.prefix.bin.ccbench)
        out = ccbench("--version", output=str.split, error=str.split)
        assert str(self.spec.version) in out

    def test_list(self):
        """ccbench list shows the registry of algorithms (imports every layer but MPI)"""
        ccbench = which(self.prefix.bin.ccbench)
        out = ccbench("list", output=str.split, error=str.split)
        assert "allreduce" in out
