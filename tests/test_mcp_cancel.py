"""A cancelled tools/call settles per the shell cancellation table, partial output kept; a long call
reports progress when the client sent a progress token."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from mcp_peers import MODES, zuno_client


def _calls(root: Path) -> list[dict]:
    db = sqlite3.connect(root / ".zuno" / "zuno.db")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM calls ORDER BY seq")]
    db.close()
    return rows


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_shell_call_settles_with_its_partial_output(workspace: Path, mode: str) -> None:
    async with zuno_client(workspace, mode) as c:
        call = asyncio.create_task(
            c.call_tool(
                "shell",
                {"command": "echo partial-out; touch started; sleep 30", "yield_time_ms": 0, "timeout_ms": 60000},
            )
        )
        for _ in range(300):  # cancel once the command has printed
            if (workspace / "started").exists():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        after = await c.call_tool("read", {"path": "."})
        assert not after.is_error
    shell = [r for r in _calls(workspace) if r["name"] == "shell"]
    assert len(shell) == 1 and shell[0]["state"] == "settled" and shell[0]["cancelled"] == 1
    assert shell[0]["outcome"] in ("uncertain", "error")
    assert "partial-out" in shell[0]["text"]
    assert shell[0]["ended_at"] - shell[0]["started_at"] < 20


@pytest.mark.parametrize("mode", MODES)
async def test_progress_is_reported_for_a_long_call(workspace: Path, mode: str) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with zuno_client(workspace, mode) as c:
        r = await c.call_tool("shell", {"command": "sleep 2.5; echo done"}, progress_callback=progress)
    assert not r.is_error and "done" in r.content[0].text
    assert len(seen) >= 1 and seen == sorted(seen)
