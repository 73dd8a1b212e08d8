"""Durable state from outside (eleventh round): odd but valid arguments, each limit crossed by one,
control characters, the CLI with bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zuno
from zuno import limits
from zuno.tools.state import fits
from zuno.tools.state.goal import GOAL_MAX_CRITERIA

from statehelp import body, call

MEMORY = {"memory": {"enabled": True}}


@pytest.mark.parametrize("key", ["k\n", "test-command\n", "\nk", "k\r", "k\x00", "k k", "a" * 101, ""])
async def test_a_memory_key_with_a_trailing_newline_is_refused(workspace: Path, key: str) -> None:
    """Before: the key pattern ended in "$", which also matches before a trailing newline, so a
    key "k\\n" was stored beside "k" (and printed on two lines)."""
    async with zuno.Runtime(root=workspace, config_overrides=MEMORY) as rt, rt.session() as s:
        rec = await call(s, "memory_update", {"action": "set", "key": key, "content": "x"})
        assert (rec.outcome, rec.block_kind) == ("blocked", "invalid_arguments"), rec.text
        assert "a memory key is 1-100 characters" in rec.text
        rec = await call(s, "memory_update", {"action": "set", "key": "a" * 100, "content": "x"})
        assert rec.outcome == "ok", rec.text
        assert [e["key"] for e in json.loads((await call(s, "memory_read")).text)["memory"]] == ["a" * 100]


async def test_add_criteria_cannot_grow_a_goal_past_its_bound(workspace: Path) -> None:
    """Before: create took at most 50 criteria, but add_criteria (50 at a time) grew the Goal
    without any bound."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        crit = [{"text": f"criterion {i}"} for i in range(GOAL_MAX_CRITERIA - 1)]
        rec = await call(s, "goal_update", {"action": "create", "objective": "o", "criteria": crit})
        assert rec.outcome == "ok", rec.text
        rec = await call(
            s, "goal_update", {"action": "add_criteria", "expected_revision": 1, "criteria": [{"text": "last"}]}
        )
        assert rec.outcome == "ok", rec.text
        rec = await call(
            s, "goal_update", {"action": "add_criteria", "expected_revision": 2, "criteria": [{"text": "one more"}]}
        )
        assert rec.outcome == "error", rec.text
        refusal = rec.metadata["refusal"]
        assert (refusal["kind"], refusal["criteria"], refusal["limit"]) == (
            "TooManyCriteria",
            GOAL_MAX_CRITERIA + 1,
            GOAL_MAX_CRITERIA,
        )
        assert "Merge criteria" in rec.text
        got = body(await call(s, "goal_get"))
        assert got["revision"] == 2 and len(got["goal"]["criteria"]) == GOAL_MAX_CRITERIA


def _inline(rec) -> dict:
    assert rec.outcome == "ok", rec.text[:500]
    assert not rec.text.startswith("[output withheld"), rec.text[:300]
    return body(rec)


async def _fill_to_the_byte(s, send, make, n: int) -> None:
    """Send ``make(n)`` (too large: refused naming its size and the limit), then a payload shortened
    by the excess (accepted: exactly at the limit), then one byte more (refused, by one)."""
    rec = await send(make(n))
    refusal = rec.metadata["refusal"]
    assert refusal["limit"] == fits.VIEW_MAX_BYTES and refusal["limitName"] == "tool_output.max_bytes", refusal
    fitting = n - (refusal["bytes"] - refusal["limit"])
    _inline(await send(make(fitting)))
    rec = await send(make(fitting + 1))
    assert rec.outcome == "error" and rec.metadata["refusal"]["bytes"] == fits.VIEW_MAX_BYTES + 1, rec.text
    assert "tool_output.max_bytes" in rec.text and "always seen inline" in rec.text


async def test_a_todo_list_within_its_bounds_is_returned_inline(workspace: Path) -> None:
    """Before: 200 items of 1000-character titles and 4000-character notes were accepted, and
    todo_get (and every todo_update result) was withheld over tool_output.max_bytes."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        note = "n" * 4000
        items = [{"title": f"item {i}", "notes": note} for i in range(12)] + [{"title": "last"}]
        _inline(await call(s, "todo_update", {"action": "add", "items": items}))
        rev = 1

        async def send(text: str):
            nonlocal rev
            patch = {"action": "patch", "expected_revision": rev, "items": [{"id": "t13", "notes": text}]}
            rec = await call(s, "todo_update", patch)
            rev += rec.outcome == "ok"
            return rec

        await _fill_to_the_byte(s, send, lambda k: "t" * k, 4000)
        got = _inline(await call(s, "todo_get"))
        assert len(got["todos"]) == 13
        cleared = [{"id": f"t{i}", "notes": ""} for i in range(1, 14)]
        _inline(await call(s, "todo_update", {"action": "patch", "expected_revision": rev, "items": cleared}))
        rev += 1
        # one item a line: 200 items are 202 lines
        many = [{"title": f"x{i}"} for i in range(200 - 13)]
        _inline(await call(s, "todo_update", {"action": "add", "expected_revision": rev, "items": many}))
        text = (await call(s, "todo_get")).text
        assert text.count("\n") + 1 == 202


async def test_chord_todo_write_of_a_list_too_large_to_show_is_refused(workspace: Path) -> None:
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        todos = [{"content": f"{i} " + "c" * 990} for i in range(60)]
        rec = await call(s, "todo_write", {"todos": todos})
        assert rec.outcome == "error" and rec.metadata["refusal"]["kind"] == "TodosTooLarge", rec.text[:300]
        rec = await call(s, "todo_write", {"todos": todos[:40]})
        assert rec.outcome == "ok" and not rec.text.startswith("[output withheld"), rec.text[:300]


async def test_a_goal_within_its_bounds_is_returned_inline(workspace: Path) -> None:
    """Before: 50 criteria of 1000 characters each were accepted and goal_get withheld."""
    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        crit = [{"text": "c" * 1000} for _ in range(GOAL_MAX_CRITERIA)]
        rec = await call(s, "goal_update", {"action": "create", "objective": "o", "criteria": crit})
        assert rec.metadata["refusal"]["kind"] == "GoalTooLarge", rec.text[:300]

        rev = 0

        async def send(text: str):
            nonlocal rev
            crit = [{"text": "c" * 1000} for _ in range(43)] + [{"text": "e" * 1000, "requires_evidence": True}]
            args = {"action": "create", "objective": text, "criteria": crit, "expected_revision": rev}
            rec = await call(s, "goal_update", args)
            rev += rec.outcome == "ok"
            return rec

        await _fill_to_the_byte(s, send, lambda k: "o" * k, 2000)
        # every criterion satisfied, with a note where it fits: still inline
        for c in range(1, 44):
            args = {"action": "satisfy", "expected_revision": rev, "criterion_id": f"c{c}"}
            _inline(await call(s, "goal_update", args))
            rev += 1
        rec = await call(
            s, "goal_update", {"action": "satisfy", "expected_revision": rev, "criterion_id": "c1", "note": "n" * 1000}
        )
        assert rec.metadata["refusal"]["kind"] == "GoalTooLarge"
        _inline(await call(s, "goal_get"))


async def test_memory_read_of_a_full_memory_is_returned_inline(workspace: Path) -> None:
    """Before: 16 entries of 4000 bytes (within the 64 KiB then allowed in all) were accepted, and
    memory_read was withheld over tool_output.max_bytes. Now the total is 32 KiB (so a full memory
    of ordinary text fits), and what still renders larger — control characters, six bytes each in
    JSON — is refused by the byte."""
    async with zuno.Runtime(root=workspace, config_overrides=MEMORY) as rt, rt.session() as s:
        per = limits.MEMORY_MAX_TOTAL_BYTES // limits.MEMORY_MAX_ENTRY_BYTES
        for i in range(per):
            key = "k" * 90 + f"{i:010d}"  # the longest key
            rec = await call(s, "memory_update", {"action": "set", "key": key, "content": "y" * 4096})
            assert rec.outcome == "ok", rec.text
        rec = await call(s, "memory_read")
        assert rec.outcome == "ok" and not rec.text.startswith("[output withheld"), rec.text[:200]
        for i in range(per):
            await call(s, "memory_update", {"action": "delete", "key": "k" * 90 + f"{i:010d}"})
        for i in range(2):
            rec = await call(s, "memory_update", {"action": "set", "key": f"c{i}", "content": "\x01" * 4000})
            assert rec.outcome == "ok", rec.text

        async def send(text: str):
            return await call(s, "memory_update", {"action": "set", "key": "last", "content": text})

        rec = await send("z" * 4000)
        refusal = rec.metadata["refusal"]
        assert refusal["kind"] == "MemoryFull" and refusal["limitName"] == "tool_output.max_bytes", refusal
        fitting = 4000 - (refusal["bytes"] - refusal["limit"])
        assert (await send("z" * fitting)).outcome == "ok"
        rec = await send("z" * (fitting + 1))
        assert rec.outcome == "error" and rec.metadata["refusal"]["bytes"] == fits.VIEW_MAX_BYTES + 1
        assert "always seen inline" in rec.text
        rec = await call(s, "memory_read")
        assert rec.outcome == "ok" and not rec.text.startswith("[output withheld")
        assert len(json.loads(rec.text)["memory"]) == 3


async def test_a_refusal_of_a_huge_unknown_id_is_short_enough_to_be_seen(workspace: Path) -> None:
    """Before: a refusal echoed the id the model sent whole — a step id, todo id, dependency,
    criterion id, receipt id or memory key of 100,000 characters made the refusal itself 100 KB,
    withheld into a file, so the model never saw why it was refused."""
    huge = "x" * 100_000
    crit = [{"text": "c", "requires_evidence": True}]
    async with zuno.Runtime(root=workspace, config_overrides=MEMORY) as rt, rt.session() as s:
        await call(s, "plan_update", {"action": "create", "objective": "o", "steps": [{"title": "t"}]})
        await call(s, "todo_update", {"action": "add", "items": [{"title": "t"}]})
        await call(s, "goal_update", {"action": "create", "objective": "o", "criteria": crit})
        done = {"status": "completed"}
        one = [{"title": "t"}]
        receipt = "rcp_" + huge
        calls = [
            ("plan_update", {"action": "patch", "expected_revision": 1, "steps": [{"id": huge, **done}]}),
            (
                "plan_update",
                {"action": "push", "expected_revision": 1, "step_id": huge, "objective": "o", "steps": one},
            ),
            ("todo_update", {"action": "patch", "expected_revision": 1, "items": [{"id": huge, **done}]}),
            ("todo_update", {"action": "remove", "expected_revision": 1, "ids": [huge + str(i) for i in range(50)]}),
            ("todo_update", {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "depends_on": [huge]}]}),
            ("goal_update", {"action": "satisfy", "expected_revision": 1, "criterion_id": huge}),
            ("goal_update", {"action": "satisfy", "expected_revision": 1, "criterion_id": "c1", "evidence": receipt}),
            ("memory_read", {"key": huge}),
        ]
        for name, args in calls:
            rec = await call(s, name, args)
            assert rec.outcome == "error" and rec.text.startswith("[refused: "), (name, rec.text[:200])
            assert len(rec.text) < 2000, (name, len(rec.text))
            assert "characters)" in rec.text  # the length of what was cut is said
            assert len(json.dumps(rec.metadata)) < 2000
