"""The lab tier: real namespaces, iptables and the link emulator, as root, once per CI run.

Skipped unless CCBENCH_LAB_TESTS=1 (``tests/lab/ci_lab.sh`` sets it), so the plain tier
and every rank count of the MPI tier leave them out.
"""

import os

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: builds an emulated cluster (root; run by tests/lab/ci_lab.sh)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CCBENCH_LAB_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="lab tier: run with CCBENCH_LAB_TESTS=1 (bash tests/lab/ci_lab.sh)")
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)
