"""The durable state tried from outside again (tenth round): `zuno call`, `zuno goal`, `zuno memory`
and the Python API. Each test is a defect found by outside testing and fails without its fix."""

from __future__ import annotations

import json
from pathlib import Path

import zuno
from zuno.records import CallRecord
from zuno.tools.state import read_state

from conftest import zuno_cli
from statehelp import call


async def test_an_owner_or_a_dependency_list_is_bounded_like_a_title(tmp_path: Path) -> None:
    """An owner of 200,000 characters was stored and then carried by every request's dynamic
    context; depends_on took 100,000 copies of one id. Both are refused naming the field."""
    async with zuno.Runtime(root=tmp_path) as rt, rt.session() as s:
        huge = "x" * 200_000
        rec = await call(s, "todo_update", {"action": "add", "items": [{"title": "a", "owner": huge}]})
        assert rec.outcome == "blocked" and "owner" in rec.text and "invalid_arguments" in rec.text
        rec = await call(
            s, "plan_update", {"action": "create", "objective": "o", "steps": [{"title": "s", "owner": huge}]}
        )
        assert rec.outcome == "blocked" and "owner" in rec.text
        assert (
            await call(s, "todo_update", {"action": "add", "items": [{"title": "a", "owner": "main"}]})
        ).outcome == "ok"
        rec = await call(
            s,
            "todo_update",
            {"action": "add", "expected_revision": 1, "items": [{"title": "b", "depends_on": ["t1"] * 100_000}]},
        )
        assert rec.outcome == "blocked" and "depends_on" in rec.text
        rec = await call(
            s, "todo_update", {"action": "patch", "expected_revision": 1, "items": [{"id": "t1", "owner": huge}]}
        )
        assert rec.outcome == "blocked" and "owner" in rec.text
        todo = read_state(rt.store, s.id)["todo"]
        assert todo["revision"] == 1 and [i["owner"] for i in todo["todos"]] == ["main"]
    async with zuno.Runtime(root=tmp_path, profile="chord") as rt, rt.session() as s:
        rec = await call(s, "todo_write", {"todos": [{"content": "a", "owner": huge}]})
        assert rec.outcome == "blocked" and "owner" in rec.text
        rec = await call(s, "todo_write", {"todos": [{"content": "a", "depends_on": ["t9"] * 100_000}]})
        assert rec.outcome == "blocked" and "depends_on" in rec.text
        assert read_state(rt.store, s.id)["todo"]["todos"] is None


async def test_an_abandoned_goal_is_not_shown_as_paused(tmp_path: Path) -> None:
    """A paused Goal abandoned kept its pause reason: goal_get still returned pause_reason and
    `zuno goal` printed "abandoned (blocked — …)"."""
    async with zuno.Runtime(root=tmp_path) as rt, rt.session() as s:
        sid = s.id
        await call(s, "goal_update", {"action": "create", "objective": "ship", "criteria": [{"text": "done"}]})
        rec = await call(
            s,
            "goal_update",
            {"action": "pause", "expected_revision": 1, "reason": {"kind": "blocked", "detail": "no key"}},
        )
        assert rec.outcome == "ok", rec.text
        assert (
            await call(s, "goal_update", {"action": "abandon", "expected_revision": 2, "reason": "obsolete"})
        ).outcome == "ok"
        goal = read_state(rt.store, sid)["goal"]["goal"]
    assert goal["status"] == "abandoned" and "pause_reason" not in goal
    out = zuno_cli(tmp_path, "goal", "--session", sid)
    assert out.returncode == 0, out.stderr
    head = out.stdout.splitlines()[1]
    assert "abandoned" in head and "blocked" not in head and "no key" not in head, out.stdout
    shown = json.loads(zuno_cli(tmp_path, "goal", "--session", sid, "--json").stdout)
    assert "pause_reason" not in shown["goal"]


def test_zuno_memory_prints_escape_sequences_and_newlines_as_symbols(tmp_path: Path) -> None:
    """`zuno memory` printed an entry's content raw: an escape sequence set the terminal's title
    and cleared the screen, a newline forged a second entry line."""
    (tmp_path / "zuno.json").write_text(json.dumps({"memory": {"enabled": True}}))
    content = "a\x1b]0;pwned\x07\x1b[2Jb\nfake/entry (revision 9): forged"
    args = json.dumps({"action": "set", "key": "k", "content": content})
    made = zuno_cli(tmp_path, "call", "--new-session", "m1", "memory_update", args)
    assert made.returncode == 0, made.stderr
    out = zuno_cli(tmp_path, "memory")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("main/k (revision 1): a") and "forged" in lines[0], lines
    listed = json.loads(zuno_cli(tmp_path, "memory", "--json").stdout)
    assert listed["memory"][0]["content"] == content  # JSON keeps the content exact


def test_zuno_memory_accept_and_reject_print_json_when_asked(tmp_path: Path) -> None:
    """`zuno memory accept ID --json` (the parser takes --json for every op) printed the text line
    "accepted mp_…: {'key': …}", a Python dict, not JSON."""
    (tmp_path / "zuno.json").write_text(json.dumps({"memory": {"enabled": True, "review_policy": "review"}}))
    for content in ("v1", "v2"):  # two keys: accepting one proposal for a key supersedes the others for it
        args = json.dumps({"action": "set", "key": "k" if content == "v1" else "k2", "content": content})
        made = zuno_cli(
            tmp_path, "call", "--session" if content == "v2" else "--new-session", "m1", "memory_update", args
        )
        assert made.returncode == 0, made.stderr
    first, second = (p["id"] for p in json.loads(zuno_cli(tmp_path, "memory", "--json").stdout)["pending"])
    out = zuno_cli(tmp_path, "memory", "accept", first, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "proposal": first,
        "decision": "accepted",
        "key": "k",
        "revision": 1,
        "bytes": 2,
        "superseded": [],
    }
    out = zuno_cli(tmp_path, "memory", "reject", second, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"proposal": second, "decision": "rejected"}
    listed = json.loads(zuno_cli(tmp_path, "memory", "--json").stdout)
    assert [e["content"] for e in listed["memory"]] == ["v1"] and listed["pending"] == []


async def test_todo_write_with_the_models_own_ids_keeps_the_items_and_their_dependencies(tmp_path: Path) -> None:
    """chord todo_write sent with ids the model chose ("1", "2", as other harnesses number them):
    a depends_on naming "1" was refused ("depends on 1, which does not exist"), and the same list
    sent again made every item new — ids churned, and a completed item sent back as pending became
    a new pending one (the terminal rule bypassed)."""
    async with zuno.Runtime(root=tmp_path, profile="chord") as rt, rt.session() as s:

        async def write(a_status: str) -> CallRecord:
            todos = [
                {"id": "1", "content": "A", "status": a_status},
                {"id": "2", "content": "B", "depends_on": ["1"]},
            ]
            return await call(s, "todo_write", {"todos": todos})

        rec = await write("pending")
        assert rec.outcome == "ok", rec.text
        first = read_state(rt.store, s.id)["todo"]
        assert [(i["id"], i.get("depends_on")) for i in first["todos"]] == [("t1", None), ("t2", ["t1"])]
        assert (await write("completed")).outcome == "ok"
        again = await write("completed")  # the same list again: the same list, no new revision
        assert again.outcome == "ok" and "nothing changed" in again.text, again.text
        refused = await write("pending")
        assert refused.outcome == "error" and "InvalidTransition" in refused.text, refused.text
        todo = read_state(rt.store, s.id)["todo"]
    assert todo["revision"] == 2
    assert [(i["id"], i["status"]) for i in todo["todos"]] == [("t1", "completed"), ("t2", "pending")]


async def test_an_unknown_dependency_in_chord_names_no_tool_the_profile_lacks(tmp_path: Path) -> None:
    """chord's todo_write refused an unknown depends_on with "Depend only on ids todo_get
    returns": chord offers no todo_get (calling it is 'not available in profile chord')."""
    async with zuno.Runtime(root=tmp_path, profile="chord") as rt, rt.session() as s:
        rec = await call(s, "todo_write", {"todos": [{"content": "C", "depends_on": ["zz"]}]})
        assert rec.outcome == "error" and "UnknownDependency" in rec.text, rec.text
        assert "todo_get" not in rec.text and "ids the list holds" in rec.text
        assert "todo_get" not in rt.surface.tools
