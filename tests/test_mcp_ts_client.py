"""``zuno mcp`` driven by the official TypeScript SDK's client (what most MCP clients are built on):
its output schemas hold for every outcome, so the client's validation of structuredContent passes
on error results too. Needs Node and the SDK installed by scripts/test under .peers/node."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import zuno_env

PEERS = Path(__file__).resolve().parents[1] / ".peers" / "node"
SCRIPT = Path(__file__).with_name("peers") / "ts_client.mjs"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (PEERS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(),
    reason="the TypeScript MCP SDK is not installed (scripts/test installs it under .peers/node with npm)",
)


def test_typescript_client_validates_every_outcome(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    script = PEERS / SCRIPT.name
    shutil.copyfile(SCRIPT, script)  # ESM resolves packages from the script's own folder
    p = subprocess.run(
        ["node", str(script), sys.executable, str(workspace)],
        env=zuno_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    calls = seen["calls"]
    assert not any("thrown" in c for c in calls.values()), calls
    assert not calls["ok"]["isError"] and calls["ok"]["outcome"] == "ok" and "alpha" in calls["ok"]["text"]
    assert calls["error"]["isError"] and calls["error"]["outcome"] == "error"
    assert calls["blocked"]["isError"] and calls["blocked"]["outcome"] == "blocked"
    assert calls["unavailable"]["outcome"] == "blocked"
    assert calls["write"]["outcome"] == "ok" and (workspace / "b.txt").read_text() == "beta\n"
    read = next(t for t in seen["tools"] if t["name"] == "read")
    assert read["annotations"]["readOnlyHint"] is True
