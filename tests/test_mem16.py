"""Memory and goal (sixteenth round), outside findings: a refusal that leaves no store behind, the
memory tools' answers to a malformed proposal id, a memory_update that changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import zuno_cli


@pytest.mark.parametrize(("op", "json_out"), [("accept", False), ("reject", True)])
def test_deciding_a_proposal_with_no_store_refuses_and_creates_nothing(
    tmp_path: Path, op: str, json_out: bool
) -> None:
    proc = zuno_cli(tmp_path, "memory", op, "mp_nonesuch", *(["--json"] if json_out else []))
    assert proc.returncode == 1, proc  # well-formed but not pending: 1, as with a store (docs/cli.md)
    assert "there is no memory proposal mp_nonesuch" in proc.stderr and "zuno memory" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    if json_out:
        assert json.loads(proc.stdout)["refusal"]["kind"] == "NotPending"
    assert list(tmp_path.iterdir()) == []  # no .zuno/, no database


def test_deciding_with_a_named_store_that_does_not_exist_creates_none(tmp_path: Path) -> None:
    db = tmp_path / "named.db"
    proc = zuno_cli(tmp_path, "memory", "reject", "mp_nonesuch", "--db", str(db))
    assert proc.returncode == 1 and "there is no memory proposal" in proc.stderr, proc
    assert not db.exists() and not (tmp_path / ".zuno").exists()


REVIEW = {"memory": {"enabled": True, "review_policy": "review"}}


def _malformed_calls(pid: str) -> list[tuple[str, dict, str]]:
    """(tool, arguments, what the answer names): a proposal id where a key goes, as an argument of its
    own, or a decision as the action; empty, another prefix, non-ASCII, very long, with NUL."""
    return [
        ("memory_read", {"key": ""}, "is empty"),
        ("memory_read", {"key": "mp_\x00"}, "is not a memory key"),
        ("memory_read", {"key": "mp_é"}, "is not a memory key"),
        ("memory_read", {"key": "mp_" + "a" * 5000}, "characters)"),
        ("memory_read", {"key": pid}, "is the id of a memory proposal (pending, for key 'style')"),
        ("memory_read", {"proposal": "xp_123"}, "'proposal' is not an argument"),
        ("memory_update", {"action": "delete", "key": pid}, "not a memory key"),
        ("memory_update", {"action": "set", "key": pid, "content": "accepted"}, "not a memory key"),
        ("memory_update", {"action": "delete", "key": "mp_nonesuch"}, "no memory 'mp_nonesuch'"),
        ("memory_update", {"action": "accept", "proposal_id": pid}, "must be one of: set, delete"),
        ("memory_update", {"action": "reject", "id": ""}, "must be one of: set, delete"),
        ("memory_update", {"action": "set", "key": "mp_\x00", "content": "x"}, "a memory key is"),
        ("memory_update", {"action": "set", "key": "", "content": "x"}, "a memory key is"),
    ]


async def test_a_malformed_proposal_id_is_a_clear_error_that_loses_nothing(workspace: Path) -> None:
    import zuno
    from zuno.tools.state.memory import proposals

    from statehelp import call

    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        rec = await call(s, "memory_update", {"action": "set", "key": "style", "content": "tabs"})
        pid = rec.metadata["memoryProposal"]["id"]
        for name, arguments, says in _malformed_calls(pid):
            rec = await call(s, name, arguments)
            assert rec.outcome != "ok", (name, arguments, rec.text)
            assert says in rec.text, (name, arguments, rec.text)
            # the fix is named: who decides a proposal and how, or how to name an entry
            assert "zuno memory accept" in rec.text or "memory_read lists" in rec.text, (name, rec.text)
            assert len(rec.text) < 2000 and "\x00" not in rec.text, (name, rec.text[:300])
        # nothing was lost or made: the one proposal still waits, no entry appeared
        assert [(p["id"], p["key"], p["content"]) for p in proposals(rt.store, str(rt.root))] == [
            (pid, "style", "tabs")
        ]
        assert json.loads((await call(s, "memory_read")).text) == {"memory": [], "pending_proposals": 1}


async def test_setting_the_content_an_entry_holds_is_a_no_op(workspace: Path) -> None:
    import zuno
    from zuno.tools.state.memory import proposals

    from statehelp import call

    async with zuno.Runtime(root=workspace, config_overrides={"memory": {"enabled": True}}) as rt, rt.session() as s:
        first = await call(s, "memory_update", {"action": "set", "key": "tests", "content": "pytest -q"})
        assert first.metadata["memory"]["revision"] == 1
        again = await call(s, "memory_update", {"action": "set", "key": "tests", "content": "pytest -q"})
        assert again.outcome == "ok" and "unchanged" in again.text and "revision 1" in again.text, again.text
        assert again.metadata["memory"]["revision"] == 1 and again.metadata["unchanged"] is True
        got = json.loads((await call(s, "memory_read", {"key": "tests"})).text)
        assert got["memory"] == [{"key": "tests", "revision": 1, "content": "pytest -q"}]
        changed = await call(s, "memory_update", {"action": "set", "key": "tests", "content": "pytest -q -x"})
        assert changed.metadata["memory"]["revision"] == 2  # a real change still makes a revision
    # under review: no proposal for a change that would change nothing
    async with zuno.Runtime(root=workspace, config_overrides=REVIEW) as rt, rt.session() as s:
        other = await call(s, "memory_update", {"action": "set", "key": "tests", "content": "make test"})
        same = await call(s, "memory_update", {"action": "set", "key": "tests", "content": "pytest -q -x"})
        assert same.outcome == "ok" and "unchanged" in same.text and "nothing proposed" in same.text, same.text
        assert "memoryProposal" not in same.metadata
        assert other.metadata["memoryProposal"]["id"] in same.text  # what still waits for the key is said
        assert [p["content"] for p in proposals(rt.store, str(rt.root))] == ["make test"]
