"""A session of another workspace is refused at every entry point (sixteenth round).

Two workspace roots may share one store (``--db``). Before, a session id of root A given under
root B was continued as it was: ``zuno call --session ID --root B`` ran B's files in A's session
(its row keeps A's root), ``Runtime.session(ID)`` opened it, ``zuno show`` / ``events`` / ``resume``
/ ``plan`` / ``todo`` / ``goal`` showed it as B's, and ``--new-session ID`` with an id A already had
said "continue it with --session ID", which then mixed the two. Now each refuses, exit 2, naming
the workspace the session belongs to and what to do, and writes nothing.

All real: the CLI in processes of its own, one SQLite store shared by two real roots.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import zuno
from zuno.session_ids import SessionNotFound, SessionOfAnotherWorkspace

from conftest import zuno_env


def _zuno(root: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root), "--db", str(db)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1"}), timeout=60,
    )


@pytest.fixture
async def shared(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """Roots a and b, the store they share, and a session of a (made in this process)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    db = tmp_path / "shared.db"
    async with zuno.Runtime(root=a, db=db) as rt, rt.session() as s:
        assert (await s.step([{"name": "read", "arguments": {"path": "."}}])).results[0].outcome == "ok"
        return a, b, db, s.id


def _rows(db: Path) -> tuple[int, int, int]:
    with sqlite3.connect(db) as c:
        return tuple(c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "events", "calls"))


def _refused(done: subprocess.CompletedProcess[str], sid: str, its_root: Path) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert f"session {sid!r} belongs to the workspace {its_root}" in done.stderr, done.stderr
    assert f"--root {its_root}" in done.stderr, done.stderr


COMMANDS = [
    ("call", "read", '{"path": "."}', "--session", "{sid}"),
    ("batch", "{batch}", "--session", "{sid}"),
    ("steps", "{steps}", "--session", "{sid}"),
    ("show", "{sid}"),
    ("events", "--session", "{sid}"),
    ("resume", "{sid}", "go on"),
    ("run", "--session", "{sid}", "go on"),
    ("plan", "--session", "{sid}"),
    ("todo", "--session", "{sid}"),
    ("goal", "--session", "{sid}"),
    ("goal", "resume", "--session", "{sid}"),
]


def test_each_command_refuses_a_session_of_another_workspace(shared: tuple[Path, Path, Path, str]) -> None:
    a, b, db, sid = shared
    (b.parent / "batch.json").write_text('[{"name": "read", "arguments": {"path": "."}}]')
    (b.parent / "steps.jsonl").write_text('[{"name": "read", "arguments": {"path": "."}}]\n')
    named = {"{sid}": sid, "{batch}": str(b.parent / "batch.json"), "{steps}": str(b.parent / "steps.jsonl")}
    before = _rows(db)
    children = [  # all at once (each is a process of its own; the file stays fast)
        (args, subprocess.Popen(
            [sys.executable, "-m", "zuno", *(named.get(x, x) for x in args), "--root", str(b), "--db", str(db)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=zuno_env({"NO_COLOR": "1"}),
        ))
        for args in COMMANDS
    ]
    for args, child in children:
        out, err = child.communicate(timeout=60)
        assert child.args is not None
        done = subprocess.CompletedProcess(child.args, child.returncode, out, err)
        try:
            _refused(done, sid, a)
        except AssertionError as e:
            raise AssertionError(f"zuno {' '.join(args)}: {e}") from None
    assert _rows(db) == before  # nothing written


def test_new_session_with_an_id_taken_is_refused_and_writes_nothing(shared: tuple[Path, Path, Path, str]) -> None:
    a, b, db, sid = shared
    before = _rows(db)
    other = _zuno(b, db, "call", "read", '{"path": "."}', "--new-session", sid)
    assert other.returncode == 2, other.stderr
    assert f"as a session of the workspace {a}: choose another id" in other.stderr, other.stderr
    assert "continue it with --session" not in other.stderr, other.stderr
    same = _zuno(a, db, "call", "read", '{"path": "."}', "--new-session", sid)
    assert same.returncode == 2, same.stderr
    assert f"session {sid!r} already exists: continue it with --session {sid}" in same.stderr, same.stderr
    assert _rows(db) == before


def test_continue_under_another_root_does_not_pick_the_other_workspaces_session(
    shared: tuple[Path, Path, Path, str],
) -> None:
    _a, b, db, _sid = shared
    done = _zuno(b, db, "call", "read", '{"path": "."}', "-c")
    assert done.returncode == 2, done.stderr
    assert "there is no session to continue" in done.stderr, done.stderr


async def test_the_python_api_refuses_a_session_of_another_workspace(shared: tuple[Path, Path, Path, str]) -> None:
    a, b, db, sid = shared
    before = _rows(db)
    async with zuno.Runtime(root=b, db=db) as rt:
        with pytest.raises(SessionOfAnotherWorkspace) as caught:
            rt.resolve_session(sid)
        assert str(a) in str(caught.value) and isinstance(caught.value, SessionNotFound)
        with pytest.raises(SessionOfAnotherWorkspace):
            await rt.session(sid).open()
        with pytest.raises(SessionOfAnotherWorkspace):
            rt.state(sid)
        assert not rt.store.holds_session(sid)
    assert _rows(db) == before
    async with zuno.Runtime(root=a, db=db) as rt, rt.session(sid) as s:  # its own workspace goes on
        assert (await s.step([{"name": "read", "arguments": {"path": "."}}])).results[0].outcome == "ok"
