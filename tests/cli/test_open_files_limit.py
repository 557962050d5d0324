"""A broker process raises its soft limit on open files to the hard limit (as the JVM does for
Kafka): it holds three descriptors per partition, and the usual soft limit of 1,024 would fail
near 300 partitions. Checked in a real child process whose soft limit starts low."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

CHILD = """
import resource
from roost.cli.servers.node_runner import raise_open_files_limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
print(raise_open_files_limit(), *resource.getrlimit(resource.RLIMIT_NOFILE))
"""


def test_the_soft_open_files_limit_is_raised_to_the_hard_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip(f"the hard limit here ({hard}) leaves nothing to raise")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    reported, soft_after, hard_after = (int(n) for n in done.stdout.split())
    assert hard_after == hard
    assert soft_after == reported
    assert soft_after > 256
    if hard != resource.RLIM_INFINITY:
        assert soft_after == hard
