"""Permission rules (deny > ask > allow whatever the order), strict mode by effect, the approval
port, and pre-dispatch hooks."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.config import PermissionConfig
from zuno.declarations import READ_ONLY_PARALLEL, Declarations, Effect
from zuno.permissions import ApprovalRequest, decide

EXT = str(Path(__file__).with_name("ext_tools.py"))
SIDE = Declarations()


def perm(*rules: dict[str, Any], strict: bool = False) -> PermissionConfig:
    return PermissionConfig.model_validate({"rules": list(rules), "strict": strict})


@pytest.mark.parametrize(
    "rules",
    [
        [
            {"tool": "shell", "action": "allow"},
            {"tool": "shell", "pattern": "git *", "action": "ask"},
            {"tool": "sh*", "pattern": "git push*", "action": "deny"},
        ],
        [
            {"tool": "sh*", "pattern": "git push*", "action": "deny"},
            {"tool": "shell", "pattern": "git *", "action": "ask"},
            {"tool": "shell", "action": "allow"},
        ],
    ],
)
def test_precedence_is_deny_over_ask_over_allow_in_any_order(rules: list[dict[str, Any]]) -> None:
    cfg = perm(*rules)
    assert decide(cfg, "shell", "git push origin", SIDE).action == "deny"
    assert decide(cfg, "shell", "git status", SIDE).action == "ask"
    assert decide(cfg, "shell", "ls", SIDE).action == "allow"
    assert decide(cfg, "read", "x", READ_ONLY_PARALLEL).action == "allow"  # no rule matched
    assert decide(cfg, "shell", None, SIDE).action == "allow"  # a pattern needs a subject


def test_strict_mode_follows_the_effect_table() -> None:
    cfg = perm({"tool": "write", "action": "allow"}, {"tool": "bad", "action": "deny"}, strict=True)
    assert decide(cfg, "write", "a", SIDE).action == "ask"  # fresh approval even with an allow rule
    assert decide(cfg, "bad", None, SIDE).action == "deny"
    assert decide(cfg, "read", "a", READ_ONLY_PARALLEL).action == "allow"
    assert decide(cfg, "ask_user", None, Declarations(Effect.UserMediated)).action == "allow"
    assert decide(cfg, "delegate_work", None, Declarations(Effect.Delegating)).action == "allow"


class Recorder:
    def __init__(self, answer: bool | None) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> bool | None:
        self.asked.append(request)
        return self.answer


def _rt(root: Path, approver: Any = None, **cfg: Any) -> zuno.Runtime:
    return zuno.Runtime(root=root, config_overrides={"extensions": [EXT], **cfg}, approver=approver)


STEP = [
    {"name": "write", "arguments": {"path": "a.txt", "content": "1"}},
    {"name": "write", "arguments": {"path": "b.txt", "content": "2"}},
    {"name": "read", "arguments": {"path": "."}},
    {"name": "ask_user", "arguments": {"question": "ok?"}},
    {"name": "delegate_work", "arguments": {"objective": "x"}},
]


async def test_strict_mode_with_an_approver_asks_once_per_side_effecting_call(workspace: Path) -> None:
    approver = Recorder(True)
    async with _rt(workspace, approver, permission={"strict": True}) as rt, rt.session() as s:
        res = await s.step(STEP)
        assert [r.outcome for r in res.results] == ["ok"] * 5
        assert [a.tool for a in approver.asked] == ["write", "write"]  # fresh approval for each
        assert approver.asked[0].subject == "a.txt"


async def test_strict_mode_without_an_approver_refuses_side_effects_only(workspace: Path) -> None:
    async with _rt(workspace, None, permission={"strict": True}) as rt, rt.session() as s:
        res = await s.step(STEP)
        assert [(r.outcome, r.block_kind) for r in res.results] == [
            ("blocked", "denied"),
            ("blocked", "denied"),
            ("ok", None),
            ("ok", None),
            ("ok", None),
        ]
        assert "nobody could give it" in res.results[0].text and "--approve" in res.results[0].text
        assert not (workspace / "a.txt").exists()


async def test_a_declined_approval_is_denied(workspace: Path) -> None:
    rules = [{"tool": "write", "pattern": "b*", "action": "ask"}]
    async with _rt(workspace, Recorder(False), permission={"rules": rules}) as rt, rt.session() as s:
        res = await s.step(STEP[:2])
        assert res.results[0].outcome == "ok"
        assert (res.results[1].outcome, res.results[1].block_kind) == ("blocked", "denied")
        assert "declined" in res.results[1].text


def test_cli_strict_mode_with_and_without_approve(workspace: Path, run_zuno: Any) -> None:
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"permission": {"strict": True}})}
    calls = json.dumps([{"name": "write", "arguments": {"path": "c.txt", "content": "x"}}])
    refused = json.loads(run_zuno("batch", "-", input=calls, env=env).stdout)["results"][0]
    assert (refused["outcome"], refused["block_kind"]) == ("blocked", "denied")
    approved = json.loads(run_zuno("batch", "-", "--approve", input=calls, env=env).stdout)["results"][0]
    assert approved["outcome"] == "ok" and (workspace / "c.txt").read_text() == "x"


HOOK = """
import json, sys
call = json.load(sys.stdin)
path = call["arguments"].get("path", "")
if path.startswith("vendor/"):
    print("vendored files are read-only", file=sys.stderr); sys.exit(2)
if path == "soft.txt":
    print(json.dumps({"decision": "deny", "reason": "soft no"})); sys.exit(0)
"""


async def test_pre_dispatch_hooks_see_the_call_and_may_refuse_it(workspace: Path) -> None:
    hook = workspace.parent / "hook.py"
    hook.write_text(HOOK)
    hooks = {"pre_dispatch": [{"command": [sys.executable, str(hook)], "tools": ["wri*"]}]}
    async with _rt(workspace, None, hooks=hooks) as rt, rt.session() as s:
        res = await s.step(
            [
                {"name": "write", "arguments": {"path": "vendor/x.txt", "content": "1"}},
                {"name": "write", "arguments": {"path": "soft.txt", "content": "1"}},
                {"name": "write", "arguments": {"path": "ok.txt", "content": "1"}},
                {"name": "read", "arguments": {"path": "vendor"}},  # not filtered: the hook does not see it
            ]
        )
        assert [(r.outcome, r.block_kind) for r in res.results[:3]] == [
            ("blocked", "denied"),
            ("blocked", "denied"),
            ("ok", None),
        ]
        assert "vendored files are read-only" in res.results[0].text
        assert "soft no" in res.results[1].text
        assert res.results[3].block_kind is None


async def test_a_hook_that_hangs_or_cannot_start_refuses_the_call(workspace: Path) -> None:
    hooks = {
        "pre_dispatch": [
            {"command": "sleep 30", "tools": ["write"], "timeout_ms": 200},
            {"command": ["/nonexistent/hook"], "tools": ["read"]},
        ]
    }
    async with _rt(workspace, None, hooks=hooks) as rt, rt.session() as s:
        w, r = (
            await s.step(
                [
                    {"name": "write", "arguments": {"path": "x", "content": ""}},
                    {"name": "read", "arguments": {"path": "."}},
                ]
            )
        ).results
        assert w.block_kind == "denied" and "did not answer within 200 ms" in w.text
        assert r.block_kind == "denied" and "could not start" in r.text


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def echo_obj(text: str = "") -> str:
    """Echo."""
    return text


def test_a_rule_or_hook_naming_no_tool_is_a_config_error_that_suggests_the_tool(workspace: Path, run_zuno: Any) -> None:
    # A "deny" of a misspelt tool never applied: shell ran while the config read as denying it.
    config = workspace / "zuno.json"
    config.write_text(json.dumps({"permission": {"rules": [{"tool": "shel", "action": "deny"}]}}))
    proc = run_zuno("call", "shell", '{"command": "touch ran"}')
    assert proc.returncode == 2 and not (workspace / "ran").exists(), proc.stderr
    assert 'config key permission.rules.0.tool = "shel" names no tool' in proc.stderr
    assert 'Did you mean "shell"?' in proc.stderr and "Traceback" not in proc.stderr
    config.write_text(json.dumps({"hooks": {"pre_dispatch": [{"command": "true", "tools": ["read", "writ"]}]}}))
    proc = run_zuno("tools")
    assert proc.returncode == 2 and 'hooks.pre_dispatch.0.tools = "writ" names no tool' in proc.stderr
    # What may apply passes: another profile's tool, globs, connected MCP tools, an extension.
    rules = [
        {"tool": "web_fetch", "action": "deny"},
        {"tool": "todo_*", "action": "allow"},
        {"tool": "mcp_git_*", "action": "deny"},
        {"tool": "*", "pattern": "secret/*", "action": "deny"},
    ]
    config.write_text(json.dumps({"permission": {"rules": rules}}))
    assert run_zuno("tools").returncode == 0
    rules.append({"tool": "echo_obj", "action": "deny"})
    config.write_text(json.dumps({"permission": {"rules": rules}}))
    with pytest.raises(zuno.ConfigError, match='"echo_obj" names no tool'):
        zuno.Runtime(root=workspace)
    zuno.Runtime(root=workspace, tools=[echo_obj])
