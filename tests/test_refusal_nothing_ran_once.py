"""A refusal a tool raises itself says "Nothing ran" once (outside testing, twelfth round).

Before, the permission check of the location a tool opens (``ToolContext.check_location``, and the
search tools' check of the root they search) ended its message with "Nothing ran." and the call
runner appended another: the model and the user read "… Nothing ran. Nothing ran." (or "Nothing
ran; send a call that names it to be asked. Nothing ran."). Each refusal is made for real: the
link a path goes through is swapped to a guarded directory while the approval for the call is
being asked (after admission, before the tool resolves the path).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.permissions import ApprovalRequest


class SwapsTheLink:
    """An approver that, while it is being asked, points ``alias`` at ``secret``, then approves."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[str] = []

    async def approve(self, request: ApprovalRequest) -> bool:
        self.asked.append(request.subject)
        tmp = self.root / "alias.tmp"
        os.symlink("secret", tmp)
        os.replace(tmp, self.root / "alias")
        return True


def _layout(root: Path) -> None:
    (root / "secret").mkdir()
    (root / "secret" / "key.txt").write_text("hunter2\n")
    (root / "public").mkdir()
    (root / "public" / "key.txt").write_text("open\n")
    os.symlink("public", root / "alias")  # what admission sees; swapped while the approval is asked


CALLS: dict[str, dict[str, Any]] = {
    "write": {"name": "write", "arguments": {"path": "alias/x.txt", "content": "x"}},
    "read": {"name": "read", "arguments": {"path": "alias/key.txt"}},
    "apply_patch": {
        "name": "apply_patch",
        "arguments": {"patch": "*** Begin Patch\n*** Add File: alias/p.txt\n+x\n*** End Patch\n"},
    },
    "grep": {"name": "grep", "arguments": {"pattern": "hunter", "path": "alias"}},
    # Rules only on what lies below the directories: the search tool's own check of its root.
    "grep below": {"name": "grep", "arguments": {"pattern": "hunter", "path": "alias"}},
}


@pytest.mark.parametrize("secret_rule", ["deny", "ask"])
@pytest.mark.parametrize("tool", sorted(CALLS))
async def test_a_refusal_at_the_location_the_tool_opens_says_nothing_ran_once(
    workspace: Path, tool: str, secret_rule: str
) -> None:
    _layout(workspace)
    name = CALLS[tool]["name"]
    patterns = ("/**",) if tool.endswith(" below") else ("", "/**")
    rules = [{"tool": name, "pattern": f"public{p}", "action": "ask"} for p in patterns]
    rules += [{"tool": name, "pattern": f"secret{p}", "action": secret_rule} for p in patterns]
    approver = SwapsTheLink(workspace)
    overrides = {"permission": {"rules": rules}}
    async with zuno.Runtime(root=workspace, config_overrides=overrides, approver=approver) as rt:
        async with rt.session() as s:
            res = await s.step([CALLS[tool]])
    # Admitted and approved (as public/…): the tool's own check of where the path leads refused.
    assert len(approver.asked) == 1, (approver.asked, res.results[0].text)
    (r,) = res.results
    assert (r.outcome, r.block_kind) == ("blocked", "denied"), r.text
    assert "secret" in r.text, r.text
    assert "hunter2" not in r.text
    said = "is denied by permission rule" if secret_rule == "deny" else "no approval was given for it"
    assert said in r.text, r.text
    assert r.text.lower().count("nothing ran") == 1, r.text
    assert (workspace / "secret" / "key.txt").read_text() == "hunter2\n"
    assert sorted(os.listdir(workspace / "secret")) == ["key.txt"]  # nothing written there


class NeverAnswers:
    """An approver that is still thinking when the step is cancelled."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def approve(self, request: ApprovalRequest) -> bool:
        self.asked.set()
        await asyncio.Event().wait()
        return True


async def test_an_approval_the_step_was_cancelled_before_says_nothing_ran_once(workspace: Path) -> None:
    """The refusal of a call whose approval was still being asked when the step was cancelled says
    so ("…; nothing ran.") and was given a second "Nothing ran." when it was settled."""
    approver = NeverAnswers()
    overrides = {"permission": {"rules": [{"tool": "write", "pattern": "*", "action": "ask"}]}}
    async with zuno.Runtime(root=workspace, config_overrides=overrides, approver=approver) as rt:
        async with rt.session() as s:
            step = asyncio.ensure_future(s.step([{"name": "write", "arguments": {"path": "a.txt", "content": "x"}}]))
            await asyncio.wait_for(approver.asked.wait(), 30)
            s.cancel()
            res = await asyncio.wait_for(step, 30)
    (r,) = res.results
    assert r.outcome == "blocked" and "cancelled before an answer" in r.text, r.text
    assert r.text.lower().count("nothing ran") == 1, r.text
    assert not (workspace / "a.txt").exists()
