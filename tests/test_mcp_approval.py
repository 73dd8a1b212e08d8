"""Strict-mode approval through the MCP client: InputRequiredResult on 2026-07-28, elicitation/create
on a legacy connection that declared elicitation, a clear refusal when nobody can answer."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from mcp_peers import MODES, zuno_client

STRICT = {"permission": {"strict": True}}


def answering(action: str, approve: bool | None):
    asked: list[str] = []

    async def callback(context, params):
        asked.append(params.message)
        content = None if approve is None else {"approve": approve}
        return types.ElicitResult(action=action, content=content)

    return callback, asked


@pytest.mark.parametrize("mode", MODES)
async def test_approved_through_the_client_runs_once(workspace: Path, mode: str) -> None:
    callback, asked = answering("accept", True)
    async with zuno_client(workspace, mode, config=STRICT, elicitation_callback=callback) as c:
        r = await c.call_tool("write", {"path": "ok.txt", "content": "yes\n"})
        read = await c.call_tool("read", {"path": "ok.txt"})
    assert not r.is_error, r.content[0].text
    assert (workspace / "ok.txt").read_text() == "yes\n"
    assert len(asked) == 1 and "write" in asked[0]
    assert not read.is_error  # ReadOnly: no strict prompt


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("action", "approve"), [("decline", None), ("cancel", None), ("accept", False)])
async def test_anything_but_an_explicit_accept_is_a_refusal(
    workspace: Path, mode: str, action: str, approve: bool | None
) -> None:
    callback, asked = answering(action, approve)
    async with zuno_client(workspace, mode, config=STRICT, elicitation_callback=callback) as c:
        r = await c.call_tool("write", {"path": "no.txt", "content": "no\n"})
    assert r.is_error and r.structured_content["block_kind"] == "denied"
    assert "declined" in r.content[0].text and asked
    assert not (workspace / "no.txt").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_without_elicitation_the_call_is_denied_naming_how_to_allow_it(workspace: Path, mode: str) -> None:
    async with zuno_client(workspace, mode, config=STRICT) as c:
        r = await c.call_tool("write", {"path": "no.txt", "content": "no\n"})
    assert r.is_error and r.structured_content["block_kind"] == "denied"
    assert "--approve" in r.content[0].text
    assert not (workspace / "no.txt").exists()


async def test_approve_flag_approves_without_asking(workspace: Path) -> None:
    callback, asked = answering("decline", None)
    async with zuno_client(workspace, "2026-07-28", "--approve", config=STRICT, elicitation_callback=callback) as c:
        r = await c.call_tool("write", {"path": "ok.txt", "content": "yes\n"})
    assert not r.is_error and not asked
