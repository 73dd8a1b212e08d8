"""What ``zuno tools`` says and what the model is offered under a deny rule without a pattern (outside
testing, thirteenth round): a patternless ``read`` deny refuses every call of the tools that read
under read's rules (glob, grep, and chord's view_image); they are not offered (``Session.visible_tools``,
``zuno mcp``'s tools/list), and ``zuno tools`` marks them with the rule (``deniedBy``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import zuno

from conftest import RunZuno
from mcp_peers import zuno_client

READ_DENY = {"tool": "read", "action": "deny"}
DENIED = {"zuno": {"read", "glob", "grep"}, "chord": {"read", "glob", "grep", "view_image"}}


def _configure(workspace: Path, rules: list[dict[str, Any]]) -> None:
    (workspace / "zuno.json").write_text(json.dumps({"permission": {"rules": rules}}))


@pytest.mark.parametrize("profile", ["zuno", "chord"])
async def test_zuno_tools_marks_what_a_patternless_read_deny_takes_off_the_tools_offered(
    workspace: Path, run_zuno: RunZuno, profile: str
) -> None:
    _configure(workspace, [READ_DENY])
    listed = run_zuno("tools", "--json", "--profile", profile)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)["tools"]}
    marked = {name for name, r in rows.items() if "deniedBy" in r}
    assert marked == DENIED[profile], marked
    assert all(rows[name]["deniedBy"] == READ_DENY for name in marked)
    assert all({"description", "declarations", "inputSchema"} <= r.keys() for r in rows.values())
    # what zuno tools leaves unmarked is what an MCP client is offered
    async with zuno_client(workspace, "legacy", "--profile", profile) as c:
        offered = {t.name for t in (await c.list_tools()).tools}
    assert offered == set(rows) - marked, (offered, set(rows) - marked)
    human = run_zuno("tools", "--profile", profile).stdout.splitlines()
    note = '               not offered: every call is denied by permission rule {"tool": "read", "action": "deny"}'
    for name in DENIED[profile]:
        row = next(i for i, line in enumerate(human) if line.startswith(f"{name} "))
        assert human[row + 1] == note, human[row : row + 2]
    assert human.count(note) == len(DENIED[profile])


@pytest.mark.parametrize("profile", ["zuno", "chord"])
def test_a_read_deny_with_a_pattern_marks_nothing(workspace: Path, run_zuno: RunZuno, profile: str) -> None:
    _configure(workspace, [{"tool": "read", "pattern": "secret/**", "action": "deny"}])
    rows = json.loads(run_zuno("tools", "--json", "--profile", profile).stdout)["tools"]
    assert not [r["name"] for r in rows if "deniedBy" in r]
    assert "not offered" not in run_zuno("tools", "--profile", profile).stdout


async def test_chord_view_image_is_not_offered_under_a_patternless_read_deny(workspace: Path) -> None:
    from PIL import Image

    Image.new("RGB", (4, 3), (10, 200, 30)).save(workspace / "dot.png")
    config: dict[str, Any] = {"permission": {"rules": [READ_DENY]}}
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=config) as rt:
        async with rt.session() as s:
            offered = {t.name for t in s.visible_tools()}
            assert "view_image" in rt.surface.tools and "view_image" not in offered, offered
            res = await s.step([{"name": "view_image", "arguments": {"path": "dot.png"}}])  # called anyway
    (r,) = res.results
    assert r.outcome == "blocked", r.text
    assert 'denied by permission rule {"tool": "read", "action": "deny"}' in r.text, r.text
    patterned: dict[str, Any] = {"permission": {"rules": [{"tool": "read", "pattern": "secret/**", "action": "deny"}]}}
    async with zuno.Runtime(root=workspace, profile="chord", config_overrides=patterned) as rt:
        async with rt.session() as s:  # a read deny with a pattern keeps view_image offered, and it loads
            assert "view_image" in {t.name for t in s.visible_tools()}
            res = await s.step([{"name": "view_image", "arguments": {"path": "dot.png"}}])
    assert res.results[0].outcome == "ok", res.results[0].text
