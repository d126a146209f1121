"""`background_priority`: a batch command lowers its own CPU priority, never raises it (run in a child process, so
the suite's own priority is untouched)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import os
from cli.common import background_priority
from settings import Settings
background_priority(Settings(ingest_nice={nice}))
print(os.getpriority(os.PRIO_PROCESS, 0))
"""


def _priority_after(nice: int, *, started_at: int = 0) -> int:
    argv = [sys.executable, "-c", PROBE.format(nice=nice)]
    if started_at:
        argv = ["nice", "-n", str(started_at), *argv]
    return int(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)


@pytest.mark.parametrize(("nice", "started_at", "expected"), [(10, 0, 10), (0, 0, 0), (5, 12, 12), (15, 12, 15)])
def test_the_priority_is_lowered_to_the_setting_never_raised(nice: int, started_at: int, expected: int) -> None:
    assert _priority_after(nice, started_at=started_at) == expected
