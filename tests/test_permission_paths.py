"""Permission patterns over paths match where a path resolves, not only how it is spelt: a deny
rule on ``secret/**`` cannot be dodged with ``./secret/a``, an absolute path, a ``..`` detour or a
link into ``secret/``; and a link swapped between admission and the tool's own resolution (here:
while the approval is being asked) is caught by the tool's check of the location it opens."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.permissions import ApprovalRequest

DENY_SECRET = [
    {"tool": "write", "pattern": "secret/**", "action": "deny"},
    {"tool": "read", "pattern": "secret/**", "action": "deny"},
    {"tool": "apply_patch", "pattern": "secret/**", "action": "deny"},
    {"tool": "grep", "pattern": "secret*", "action": "deny"},
]


def _layout(root: Path) -> None:
    (root / "secret").mkdir()
    (root / "secret" / "key.txt").write_text("hunter2\n")
    (root / "public").mkdir()
    (root / "sub").mkdir()
    os.symlink("secret", root / "alias")


def _spellings(root: Path, name: str) -> list[str]:
    return [f"./secret/{name}", f"{root}/secret/{name}", f"sub/../secret/{name}", f"alias/{name}", f"secret//{name}"]


async def test_a_deny_rule_on_a_directory_holds_however_the_path_is_spelt(workspace: Path) -> None:
    _layout(workspace)
    calls: list[dict[str, Any]] = []
    for i, p in enumerate(_spellings(workspace, "new.txt")):
        calls.append({"name": "write", "arguments": {"path": p.replace("new.txt", f"new{i}.txt"), "content": "x"}})
    for p in _spellings(workspace, "key.txt"):
        calls.append({"name": "read", "arguments": {"path": p}})
    calls.append(
        {
            "name": "apply_patch",
            "arguments": {"patch": "*** Begin Patch\n*** Add File: alias/p.txt\n+x\n*** End Patch\n"},
        }
    )
    calls.append({"name": "grep", "arguments": {"pattern": "hunter", "path": "alias"}})
    async with zuno.Runtime(root=workspace, config_overrides={"permission": {"rules": DENY_SECRET}}) as rt:
        async with rt.session() as s:
            res = await s.step(calls)
    assert [(r.outcome, r.block_kind) for r in res.results] == [("blocked", "denied")] * len(calls)
    assert sorted(os.listdir(workspace / "secret")) == ["key.txt"]  # nothing written there
    assert not any("hunter2" in r.text for r in res.results)
    assert "(matched as 'secret/new3.txt')" in res.results[3].text  # says where the link leads
    # The same rules leave the other directory alone, spelt any way.
    async with zuno.Runtime(root=workspace, config_overrides={"permission": {"rules": DENY_SECRET}}) as rt:
        async with rt.session() as s:
            ok = await s.step(
                [{"name": "write", "arguments": {"path": f"./sub/../public/{n}.txt", "content": "y"}} for n in "ab"]
            )
    assert [r.outcome for r in ok.results] == ["ok", "ok"]
    assert sorted(os.listdir(workspace / "public")) == ["a.txt", "b.txt"]


class SwapsTheLink:
    """An approver that, while it is being asked, points ``alias`` at ``secret`` (the attacker's
    swap in the window between admission and the tool's run), then approves."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> bool:
        self.asked.append(request)
        tmp = self.root / "alias.tmp"
        os.symlink("secret", tmp)
        os.replace(tmp, self.root / "alias")
        return True


@pytest.mark.parametrize("secret_rule", ["deny", "ask"])
async def test_a_link_swapped_after_admission_is_caught_where_the_tool_resolves_it(
    workspace: Path, secret_rule: str
) -> None:
    _layout(workspace)
    os.remove(workspace / "alias")
    os.symlink("public", workspace / "alias")  # alias/x.txt is public/x.txt when the call is admitted
    rules = [
        {"tool": "write", "pattern": "public/**", "action": "ask"},
        {"tool": "write", "pattern": "secret/**", "action": secret_rule},
    ]
    approver = SwapsTheLink(workspace)
    async with zuno.Runtime(root=workspace, config_overrides={"permission": {"rules": rules}}, approver=approver) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "write", "arguments": {"path": "alias/x.txt", "content": "x"}}])
    assert len(approver.asked) == 1 and approver.asked[0].subject == "alias/x.txt"
    r = res.results[0]
    assert (r.outcome, r.block_kind) == ("blocked", "denied"), r.text
    assert "'alias/x.txt' (which is 'secret/x.txt')" in r.text and "Nothing ran" in r.text
    assert not (workspace / "secret" / "x.txt").exists() and not (workspace / "public" / "x.txt").exists()


async def test_an_approval_covers_the_location_it_was_asked_about(workspace: Path) -> None:
    _layout(workspace)

    class Yes:
        async def approve(self, request: ApprovalRequest) -> bool:
            return True

    rules = [{"tool": "write", "pattern": "secret/**", "action": "ask"}]
    async with zuno.Runtime(root=workspace, config_overrides={"permission": {"rules": rules}}, approver=Yes()) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "write", "arguments": {"path": "alias/ok.txt", "content": "x"}}])
    assert res.results[0].outcome == "ok", res.results[0].text
    assert (workspace / "secret" / "ok.txt").read_text() == "x"


def test_the_cli_refuses_a_dotted_spelling_of_a_denied_path(workspace: Path, run_zuno: Any) -> None:
    _layout(workspace)
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"permission": {"rules": DENY_SECRET}})}
    out = run_zuno("call", "write", json.dumps({"path": "./secret/cli.txt", "content": "x"}), "--json", env=env)
    assert out.returncode == 1
    record = json.loads(out.stdout)
    assert (record["outcome"], record["block_kind"]) == ("blocked", "denied")
    assert not (workspace / "secret" / "cli.txt").exists()


RM_DENIED = [{"tool": "shell", "pattern": "rm *", "action": "deny"}]


@pytest.mark.parametrize(
    "command",
    [
        "rm -f keep.txt",
        "echo hi; rm -f keep.txt",
        "true && rm -f keep.txt | cat",
        "/bin/rm -f keep.txt",
        "sudo -n rm -f keep.txt",
        "env X=1 nice -n 5 rm -f keep.txt",
        "FOO=1 rm -f keep.txt",
        "bash -c 'rm -f keep.txt'",
        "eval 'rm -f keep.txt'",
        "(cd . && rm -f keep.txt)",
        "echo $(rm -f keep.txt)",
    ],
)
async def test_a_shell_rule_matches_each_simple_command_however_it_is_wrapped(workspace: Path, command: str) -> None:
    (workspace / "keep.txt").write_text("x")
    async with zuno.Runtime(root=workspace, config_overrides={"permission": {"rules": RM_DENIED}}) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "shell", "arguments": {"command": command}}])
    r = res.results[0]
    assert (r.outcome, r.block_kind) == ("blocked", "denied"), r.text
    assert (workspace / "keep.txt").exists()
    if command != "rm -f keep.txt":
        assert "(matched as 'rm -f keep.txt')" in r.text


async def test_a_shell_rule_does_not_match_text_that_only_names_the_program(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, config_overrides={"permission": {"rules": RM_DENIED}}) as rt:
        async with rt.session() as s:
            res = await s.step([{"name": "shell", "arguments": {"command": "echo 'rm -f keep.txt'; echo rm"}}])
    assert res.results[0].outcome == "ok", res.results[0].text
