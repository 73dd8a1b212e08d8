"""Runs tests/test_web13_netns_cases.py inside fresh network and mount namespaces: only loopback is
up, and /etc/hosts is a copy that names private addresses (bind-mounted over the real one inside
the mount namespace only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HOSTS = "127.0.0.1 w13-loop.test\n10.1.2.3 w13-private.test\n169.254.169.254 w13-metadata.test\n"


@pytest.mark.skipif(
    shutil.which("unshare") is None or shutil.which("ip") is None or os.geteuid() != 0,
    reason="needs root, unshare and ip",
)
def test_cases_inside_a_loopback_only_namespace_with_private_hosts(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + "\n" + HOSTS)
    env = {**os.environ, "ZUNO_WEB13_NETNS": "1"}
    inner = (
        f"ip link set lo up && mount --bind {hosts} /etc/hosts && exec {sys.executable} -m pytest -q "
        f"-p no:cacheprovider -o addopts='' {HERE / 'test_web13_netns_cases.py'}"
    )
    r = subprocess.run(
        ["unshare", "-n", "-m", "sh", "-c", inner],
        cwd=HERE.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "skipped" not in r.stdout, r.stdout[-2000:]
