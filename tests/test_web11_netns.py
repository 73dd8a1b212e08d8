"""Runs tests/test_web11_netns_cases.py inside a fresh network namespace with only loopback up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("ip") is None or os.geteuid() != 0,
    reason="needs root, unshare and ip",
)
def test_cases_inside_a_loopback_only_namespace() -> None:
    env = {**os.environ, "ZUNO_WEB11_NETNS": "1"}
    inner = (
        f"ip link set lo up && exec {sys.executable} -m pytest -q -p no:cacheprovider "
        f"-o addopts='' {HERE / 'test_web11_netns_cases.py'}"
    )
    r = subprocess.run(
        ["unshare", "-n", "sh", "-c", inner], cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout, r.stdout[-2000:]
