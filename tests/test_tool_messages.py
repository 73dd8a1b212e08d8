"""Messages of the shell/bg/jobs/search tools and hooks speak JSON and English, never Python: no
``dict``/``NoneType`` renderings, no ``[Errno N]``, no exception class names; a refusal ends as a
sentence before the dispatcher's "Nothing ran."."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import zuno

PYTHONISMS = re.compile(r"\{'[^']*': |NoneType|\[Errno \d+\]|<_io\.|object at 0x|Error: |Traceback|\w\sNothing ran")


def _clean(text: str) -> None:
    assert not PYTHONISMS.search(text), text


DENY = """
import json, sys
reason = json.loads(sys.argv[1])
print(json.dumps({"decision": "deny", "reason": reason}))
"""


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ({"rule": "no-vendor", "paths": ["a"]}, '{"rule": "no-vendor", "paths": ["a"]}.'),
        (None, "it gave no reason."),
        (["a", 1], '["a", 1].'),
        ("not here", "not here."),
    ],
)
async def test_a_hooks_reason_is_shown_in_json_and_as_a_sentence(workspace: Path, reason: object, shown: str) -> None:
    hook = workspace.parent / "deny.py"
    hook.write_text(DENY)
    cfg = {"hooks": {"pre_dispatch": [{"command": [sys.executable, str(hook), json.dumps(reason)]}]}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        (rec,) = (await s.step([{"name": "grep", "arguments": {"pattern": "x"}}])).results
    assert rec.outcome == "blocked", rec.text
    assert rec.text.endswith(f"{shown} Nothing ran."), rec.text
    _clean(rec.text)


async def test_a_hook_that_cannot_start_is_told_in_words(workspace: Path) -> None:
    cfg = {"hooks": {"pre_dispatch": [{"command": ["/nonexistent/hook"]}]}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        (rec,) = (await s.step([{"name": "glob", "arguments": {"pattern": "*"}}])).results
    assert rec.outcome == "blocked" and "No such file or directory" in rec.text, rec.text
    _clean(rec.text)


async def test_refusals_of_shell_search_and_bg_read_as_english(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    calls = [
        {"name": "shell", "arguments": {"command": "echo a\0b"}},
        {"name": "shell", "arguments": {"command": "true", "workdir": "nope"}},
        {"name": "grep", "arguments": {"pattern": "a(b"}},
        {"name": "grep", "arguments": {"pattern": "a", "include": "*.[t"}},
        {"name": "glob", "arguments": {"pattern": "{a"}},
        {"name": "glob", "arguments": {"pattern": "*", "path": "a.txt"}},
        {"name": "bg", "arguments": {"action": "output", "taskID": "job_nope"}},
        {"name": "bg", "arguments": {"action": "output"}},
    ]
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        for call in calls:
            (rec,) = (await s.step([call])).results
            assert rec.outcome == "blocked", rec.text
            _clean(rec.text)


@pytest.mark.parametrize(
    ("profile", "call", "field"),
    [
        (None, {"name": "bg", "arguments": {"action": "artifact", "outputPath": "x" * (3 << 20)}}, "outputPath"),
        (None, {"name": "bg", "arguments": {"action": "output", "taskID": "t" * (3 << 20)}}, "taskID"),
        ("chord", {"name": "job_output", "arguments": {"job_id": "j" * (3 << 20)}}, "job_id"),
    ],
)
async def test_a_huge_value_is_quoted_bounded(workspace: Path, profile: str | None, call: dict, field: str) -> None:
    async with zuno.Runtime(root=workspace, profile=profile) as rt, rt.session() as s:
        (rec,) = (await s.step([call])).results
    assert rec.outcome == "blocked" and f"argument '{field}'" in rec.text, rec.text[:300]
    # Bounded: either the value is quoted cut short, or (a path) only its size is named.
    assert len(rec.text) < 1_000
    assert "more characters)" in rec.text or "bytes; a path holds at most 4095 bytes" in rec.text
    _clean(rec.text)


async def test_a_nul_in_an_id_is_quoted_in_json(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        (rec,) = (await s.step([{"name": "bg", "arguments": {"action": "wait", "taskID": "job\0x"}}])).results
    assert '"job\\u0000x"' in rec.text, rec.text


async def test_a_tools_own_validation_sentence_follows_the_argument_after_a_colon(workspace: Path) -> None:
    # Before: "argument 'key' a memory key is 1-100 characters …" (no verb joined them).
    overrides = {"memory": {"enabled": True}, "tools": {"memory_update": True}}
    async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
        async with rt.session() as s:
            st = await s.step(
                [
                    {"name": "memory_update", "arguments": {"action": "set", "key": "", "content": "x"}},
                    {"name": "read", "arguments": {"path": 5}},
                ]
            )
    key, path = (r.text for r in st.results)
    assert "argument 'key': a memory key is 1-100 characters" in key
    assert "argument 'path' must be a string (got 5)" in path
