"""Outside testing of webfetch / web_search (ninth round): the tools used the way models and users
use them — through ``zuno call``, ``zuno steps`` and ``Session.step`` — against real servers on
loopback. Each test here failed before the fix it names (docs/spec-coverage.md, ninth round)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import zuno

from conftest import zuno_env
from webhelp import Origin, Request, response

ALLOW = {"webfetch": {"allow_private": ["localhost", "127.0.0.0/8", "::1"]}}


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
        monkeypatch.delenv(k.upper(), raising=False)


async def zcall(
    root: Path, args: dict[str, Any], name: str = "webfetch", cfg: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any], str]:
    """``zuno call NAME ARGS --json`` as a user runs it; the loop keeps serving meanwhile."""
    (root / "zuno.json").write_text(json.dumps(cfg if cfg is not None else ALLOW))
    env = zuno_env()
    for k in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        env.pop(k, None)
        env.pop(k.upper(), None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "zuno",
        "call",
        name,
        json.dumps(args),
        "--json",
        cwd=root,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert b"Traceback" not in err, err.decode()
    return proc.returncode or 0, json.loads(out), err.decode()


async def step(root: Path, calls: list[dict[str, Any]], **cfg: Any) -> list[dict[str, Any]]:
    async with zuno.Runtime(root=root, config_overrides=cfg or ALLOW) as rt, rt.session() as s:
        res = await s.step(calls)
        return [r.to_json() for r in res.results]


def fetch(url: str, **more: Any) -> dict[str, Any]:
    return {"name": "webfetch", "arguments": {"url": url, **more}}


# --- one call alone in its step: the tool's task -------------------------------------------------


async def test_an_ip_literal_host_fetched_alone_through_zuno_call(workspace: Path) -> None:
    """Before: an IP-literal URL (no lookup to wait on) entered httpcore's cancel scope in the
    step's task and left it in another: ``RuntimeError: Attempted to exit cancel scope in a
    different task`` for every http://127.0.0.1/ or http://[::1]/ fetched alone."""
    async with Origin() as origin:
        origin.routes["/"] = response(200, b"hello")
        rc, rec, _ = await zcall(workspace, {"url": origin.url("127.0.0.1")})
    assert rec["outcome"] == "ok", rec["text"]
    assert rc == 0 and rec["text"].endswith("hello")


async def test_a_timeout_of_a_fetch_alone_is_an_error_result_not_a_traceback(workspace: Path) -> None:
    """Before: the fetch's deadline was bound to the step's task, so it firing cancelled the whole
    step: ``zuno call`` died with a CancelledError traceback and no record."""

    async def stall(req: Request, w: asyncio.StreamWriter) -> bytes | None:
        await asyncio.sleep(30)
        return None

    async with Origin() as origin:
        origin.routes["/slow"] = stall
        rc, rec, _ = await zcall(workspace, {"url": f"http://localhost:{origin.port}/slow", "timeout_ms": 300})
    assert rc == 1 and rec["outcome"] == "error" and not rec["cancelled"], rec
    assert "timed out" in rec["text"] and "headers phase" in rec["text"] and "route direct" in rec["text"]


async def test_a_timeout_alone_in_a_session_step_settles_the_call(workspace: Path) -> None:
    async def stall(req: Request, w: asyncio.StreamWriter) -> bytes | None:
        await asyncio.sleep(30)
        return None

    async with Origin() as origin:
        origin.routes["/slow"] = stall
        [rec] = await step(workspace, [fetch(f"http://localhost:{origin.port}/slow", timeout_ms=200)])
    assert rec["outcome"] == "error" and "timed out" in rec["text"], rec
