"""Admission: calls nested too deep or too large are refused unread and the step still closes; one
rule reads scalar arguments for every tool and extension; refusals speak JSON and English."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits


def _nested(depth: int) -> dict[str, Any]:
    """A call whose arguments make the whole call object ``depth`` levels deep."""
    inner: Any = {}
    for _ in range(depth - 3):  # the call is level 1, its arguments 2, value 3
        inner = {"k": inner}
    return {"name": "echo_obj", "arguments": {"value": inner}}


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def echo_obj(value: dict[str, Any]) -> str:
    """Echo a value."""
    return "ok"


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def scalars(n: int = 0, ratio: float = 0.0, flag: bool = False, counts: list[int] | None = None) -> str:
    """Echo scalars."""
    return json.dumps([n, ratio, flag] + ([counts] if counts is not None else []))


async def _step(workspace: Path, calls: list[Any]) -> Any:
    async with zuno.Runtime(root=workspace, tools=[echo_obj, scalars]) as rt:
        async with rt.session() as s:
            result = await s.step(calls)
            ended = rt.store.query("SELECT ended_at FROM steps WHERE session_id = ?", (s.id,))
            rows = rt.store.calls(s.id)
    return result, ended, rows


async def test_depth_is_bounded_at_admission_and_the_step_closes(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    calls = [
        _nested(limits.CALL_MAX_DEPTH),
        _nested(limits.CALL_MAX_DEPTH + 1),
        _nested(1_000),
        {"name": "read", "arguments": "[" * 5_000 + "]" * 5_000},
        {"name": "read", "arguments": {"path": "a.txt"}},
    ]
    result, ended, rows = await _step(workspace, calls)
    outcomes = [(r.outcome, r.block_kind) for r in result.results]
    assert outcomes[0] == ("ok", None)
    for o in outcomes[1:4]:
        assert o == ("blocked", "invalid_arguments")
    assert outcomes[4] == ("ok", None)  # the rest of the step ran
    assert f"more than {limits.CALL_MAX_DEPTH} levels deep" in result.results[2].text
    assert result.results[2].text.endswith(" Nothing ran.")
    assert "nested too deeply" in result.results[3].text
    assert ended and all(e[0] is not None for e in ended)  # the step closed
    assert rows[2].arguments == {"withheld": result.results[2].text.split("] ", 1)[1].split(".")[0]}


async def test_arguments_sent_as_a_json_string_are_bounded_and_checked_once_parsed(workspace: Path) -> None:
    # A model sends its arguments as JSON text: once parsed they face the same bounds and the same
    # Unicode check as arguments sent as an object (the usual ASCII ones pass without the full walk).
    deep: Any = "x"
    for _ in range(100):
        deep = {"k": deep}
    texts = [
        json.dumps({"value": {"k": "x"}}),
        json.dumps({"value": {"k": "\u00e9t\u00e9"}}),
        '{"value": {"k": "\\ud800"}}',
        json.dumps({"value": deep}),
        json.dumps({"value": {"k": "x" * (limits.CALL_MAX_BYTES + 1)}}),
    ]
    result, ended, _rows = await _step(workspace, [{"name": "echo_obj", "arguments": t} for t in texts])
    outcomes = [(r.outcome, r.block_kind) for r in result.results]
    assert outcomes[:2] == [("ok", None), ("ok", None)]
    assert outcomes[2:] == [("blocked", "invalid_arguments")] * 3
    assert "argument 'value.k' is not valid Unicode text" in result.results[2].text
    assert f"more than {limits.CALL_MAX_DEPTH} levels deep" in result.results[3].text
    assert f"larger than {limits.CALL_MAX_BYTES >> 20} MiB" in result.results[4].text
    assert ended and all(e[0] is not None for e in ended)


async def test_size_is_bounded_at_admission(workspace: Path) -> None:
    big = "x" * (limits.CALL_MAX_BYTES + 1)
    result, _, rows = await _step(
        workspace,
        [{"name": "write", "arguments": {"path": "big.txt", "content": big}}, {"name": "read", "arguments": {}}],
    )
    first = result.results[0]
    assert (first.outcome, first.block_kind) == ("blocked", "invalid_arguments")
    assert f"larger than {limits.CALL_MAX_BYTES >> 20} MiB" in first.text
    assert not (workspace / "big.txt").exists()
    assert len(json.dumps(rows[0].arguments)) < 1_000  # not stored either


def test_the_cli_refuses_a_batch_it_cannot_parse_and_blocks_a_deep_call(workspace: Path, run_zuno: Any) -> None:
    proc = run_zuno("batch", "-", input="[" * 200_000 + "]" * 200_000)
    assert proc.returncode == 2 and "nested too deeply" in proc.stderr and "Traceback" not in proc.stderr
    deep = json.dumps([{"name": "read", "arguments": _nested(200)["arguments"]}])
    proc = run_zuno("batch", "-", input=deep)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (rec,) = json.loads(proc.stdout)["results"]
    assert rec["block_kind"] == "invalid_arguments"


@pytest.mark.parametrize(
    ("call", "accepted"),
    [
        ({"name": "read", "arguments": {"path": "a.txt", "limit": True}}, False),
        ({"name": "read", "arguments": {"path": "a.txt", "limit": 2.5}}, False),
        ({"name": "read", "arguments": {"path": "a.txt", "limit": "two"}}, False),
        ({"name": "read", "arguments": {"path": "a.txt", "limit": 2.0}}, True),
        ({"name": "read", "arguments": {"path": "a.txt", "limit": "2"}}, True),
        ({"name": "read", "arguments": {"path": "a.txt", "offset": False}}, False),
        ({"name": "shell", "arguments": {"command": "true", "timeout_ms": True}}, False),
        ({"name": "shell", "arguments": {"command": "true", "timeout_ms": "5000"}}, True),
        ({"name": "bg", "arguments": {"action": "list", "limit": 1.5}}, False),
        ({"name": "grep", "arguments": {"pattern": "a", "path": 1}}, False),
        ({"name": "scalars", "arguments": {"n": True}}, False),
        ({"name": "scalars", "arguments": {"n": "7"}}, True),
        ({"name": "scalars", "arguments": {"n": 7.5}}, False),
        ({"name": "scalars", "arguments": {"ratio": True}}, False),
        ({"name": "scalars", "arguments": {"ratio": "0.5"}}, True),
        ({"name": "scalars", "arguments": {"flag": 1}}, False),
        ({"name": "scalars", "arguments": {"flag": "yes"}}, False),
        ({"name": "scalars", "arguments": {"flag": "true"}}, True),
        ({"name": "scalars", "arguments": {"counts": [1, "2", 3.0]}}, True),
        ({"name": "scalars", "arguments": {"counts": [1, True]}}, False),
    ],
)
async def test_one_rule_reads_scalars_for_every_tool_and_extension(
    workspace: Path, call: dict[str, Any], accepted: bool
) -> None:
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    result, _, _ = await _step(workspace, [call])
    (rec,) = result.results
    if accepted:
        assert rec.block_kind is None, rec.text
    else:
        assert rec.block_kind == "invalid_arguments", rec.text
        assert "Nothing ran." in rec.text


async def test_integral_and_numeric_strings_are_read_as_their_value(workspace: Path) -> None:
    result, _, _ = await _step(
        workspace, [{"name": "scalars", "arguments": {"n": "7", "ratio": "0.5", "flag": "true"}}]
    )
    assert result.results[0].text == "[7, 0.5, true]"
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    result, _, _ = await _step(workspace, [{"name": "read", "arguments": {"path": "a.txt", "limit": 2.0}}])
    assert result.results[0].text.splitlines()[:2] == ["1\tone", "2\ttwo"]
    assert "3\tthree" not in result.results[0].text


_PYTHON = re.compile(r"\bdict\b|NoneType|\bNone\b|\bTrue\b|\bFalse\b|\{'|'\}|<[a-zA-Z_.]+ object at 0x")


async def test_refusals_speak_json_and_english(workspace: Path) -> None:
    config = {
        "permission": {"rules": [{"tool": "shell", "action": "deny"}]},
        "hooks": {
            "pre_dispatch": [{"command": ["sh", "-c", "echo 'no writes today' >&2; exit 2"], "tools": ["write"]}]
        },
    }
    calls = [
        {"name": "read", "arguments": [1, 2]},
        {"name": "read", "arguments": None},
        {"name": "read", "arguments": {"path": None}},
        {"name": "read", "arguments": {"path": "a", "limit": True}},
        {"name": "read", "arguments": {"path": {"a": 1}}},
        {"name": "read", "arguments": {"bogus": 1, "path": "a"}},
        {"name": "read", "arguments": {}},
        {"name": "shell", "arguments": {"command": "true"}},
        {"name": "write", "arguments": {"path": "w.txt", "content": "x"}},
        {"arguments": {}},
        "not a call",
    ]
    async with zuno.Runtime(root=workspace, config_overrides=config) as rt:
        async with rt.session() as s:
            result = await s.step(calls)
    for rec in result.results:
        assert rec.block_kind is not None, rec.text
        assert not _PYTHON.search(rec.text), rec.text
        assert rec.text.endswith(" Nothing ran."), rec.text
        assert ". Nothing ran." in rec.text or "? Nothing ran." in rec.text, rec.text
    texts = [r.text for r in result.results]
    assert "must be a JSON object, not an array" in texts[0] and "not null" in texts[1]
    assert "(got null)" in texts[2] and "(got true)" in texts[3] and '(got {"a": 1})' in texts[4]
    assert "known: limit, offset, path" in texts[5]
    assert "argument 'path' is required (a string)" in texts[6]
    assert 'denied by permission rule {"tool": "shell", "action": "deny"}.' in texts[7]


async def test_an_action_tool_names_its_actions_once_when_the_action_is_missing_or_unknown(workspace: Path) -> None:
    calls = [
        {"name": "plan_update", "arguments": {}},
        {"name": "plan_update", "arguments": {"action": "remove"}},
        {"name": "goal_update", "arguments": {"action": 7}},
    ]
    async with zuno.Runtime(root=workspace) as rt:
        async with rt.session() as s:
            result = await s.step(calls)
    texts = [r.text for r in result.results]
    assert all(r.block_kind == "invalid_arguments" for r in result.results), texts
    actions = "create, patch, append, push, pop"
    assert f"plan_update: argument 'action' is required (one of: {actions}); add it. Correct" in texts[0]
    assert f"""plan_update: argument 'action' must be one of: {actions} (got "remove"). Correct""" in texts[1]
    assert "goal_update: argument 'action' must be one of: create, " in texts[2] and "(got 7). Correct" in texts[2]
    for text in texts:
        assert text.count("argument '") == 1, text  # never "argument '(arguments)' argument 'action' …"


async def test_length_bounds_are_said_in_plain_words(workspace: Path) -> None:
    calls = [
        {"name": "goal_update", "arguments": {"action": "create", "objective": "", "criteria": ["c"]}},
        {"name": "goal_update", "arguments": {"action": "create", "objective": "o", "criteria": []}},
    ]
    async with zuno.Runtime(root=workspace) as rt:
        async with rt.session() as s:
            result = await s.step(calls)
    texts = [r.text for r in result.results]
    assert all(r.block_kind == "invalid_arguments" for r in result.results), texts
    assert "argument 'objective' must have at least 1 character (got \"\")" in texts[0], texts[0]
    assert "argument 'criteria' must have at least 1 item" in texts[1], texts[1]
    for text in texts:
        assert "should" not in text and "String" not in text and "List" not in text, text


async def test_a_misnamed_tool_is_answered_with_the_tool_meant(workspace: Path) -> None:
    names = ["raed", "Bash", "str_replace_editor", "Read", "web_fetch", "zzz"]
    async with zuno.Runtime(root=workspace) as rt:
        async with rt.session() as s:
            result = await s.step([{"name": n, "arguments": {}} for n in names])
    texts = [r.text for r in result.results]
    assert all(r.block_kind == "unavailable" for r in result.results), texts
    meant = ["read", "shell", "apply_patch", "read", "webfetch"]
    for text, tool in zip(texts, meant, strict=False):
        assert f"Did you mean '{tool}'? Available: " in text, text
    assert "Did you mean" not in texts[-1]
    async with zuno.Runtime(root=workspace, profile="chord") as rt:
        async with rt.session() as s:
            result = await s.step([{"name": "webfetch", "arguments": {}}, {"name": "str_replace", "arguments": {}}])
    assert "Did you mean 'web_fetch'?" in result.results[0].text
    assert "Did you mean 'edit'?" in result.results[1].text


async def test_arguments_encoded_twice_are_read_as_the_object_they_hold(workspace: Path) -> None:
    # Some open models send the arguments' JSON as a JSON string; before, "must be a JSON object, not a string".
    (workspace / "a.txt").write_text("alpha\n")
    twice = json.dumps(json.dumps({"path": "a.txt"}))
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        ok, text, broken = (
            await s.step(
                [
                    {"name": "read", "arguments": twice},
                    {"name": "read", "arguments": json.dumps("a.txt")},  # a string that is no object
                    {"name": "read", "arguments": json.dumps('{"path": ')},  # an object cut short
                ]
            )
        ).results
    assert ok.outcome == "ok" and ok.text == "1\talpha"
    for r in (text, broken):
        assert r.block_kind == "invalid_arguments" and "must be a JSON object, not a string" in r.text
