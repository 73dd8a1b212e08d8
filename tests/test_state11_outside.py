"""Durable state from outside (eleventh round): odd but valid arguments, each limit crossed by one,
control characters, the CLI with bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import zuno
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
