"""The durable-call path costs what durability needs: a Safe call is written once, settled (no
intent commit); the intents of a run of Never calls are committed together, with a full sync,
before the run starts; a step's ready results share a transaction. Observed on the store's real
SQLite connection (its statement trace) and with a real kill -9."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import zuno
from zuno.store import Store

from conftest import batch, zuno_env

EXT = '''
import asyncio, os, zuno


@zuno.tool(effect="SideEffecting", replay="Never", concurrency="ParallelSafe")
async def never_par(tag: str) -> str:
    """A Never call that may overlap."""
    await asyncio.sleep(0.01)
    return tag


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def safe_hang(path: str) -> str:
    """A Safe call: leave a marker, then hang."""
    with open(path, "a") as f:
        f.write("run\\n")
    await asyncio.sleep(60)
    return "finished"
'''


@contextmanager
def traced(rt: zuno.Runtime) -> Iterator[list[str]]:
    seen: list[str] = []
    db = rt.store._db
    db.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        db.set_trace_callback(None)


def _runtime(root: Path) -> zuno.Runtime:
    (root / "durable_ext.py").write_text(EXT)
    return zuno.Runtime(root=root, config_overrides={"extensions": ["durable_ext.py"]})


async def test_a_one_call_safe_step_is_one_commit_and_its_record_is_whole(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    async with _runtime(workspace) as rt, rt.session() as s:
        await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])  # the first call numbers a block
        with traced(rt) as sql:
            res = await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])
        assert res.results[0].outcome == "ok" and "alpha" in res.results[0].text
        commits = [q for q in sql if q.strip().upper() == "COMMIT"]
        assert len(commits) == 1, sql
        assert not any("synchronous" in q.lower() for q in sql)
        rows = rt.store.calls(s.id, step=res.step)
        assert [(r.state, r.outcome, r.attempt) for r in rows] == [("settled", "ok", 2)]
        kinds = [e["kind"] for e in rt.store.events(s.id) if e["step"] == res.step]
        assert kinds == ["step-started", "call-started", "call-settled", "step-ended"]


async def test_never_intents_of_a_run_are_one_full_sync_commit_before_it_starts(workspace: Path) -> None:
    async with _runtime(workspace) as rt, rt.session() as s:
        with traced(rt) as sql:
            res = await s.step([{"name": "never_par", "arguments": {"tag": str(i)}} for i in range(5)])
        assert [r.outcome for r in res.results] == ["ok"] * 5
        full = [i for i, q in enumerate(sql) if q.lower().replace(" ", "") == "pragmasynchronous=full"]
        assert len(full) == 1, sql
        start = full[0]
        end = next(i for i in range(start, len(sql)) if sql[i].lower().replace(" ", "") == "pragmasynchronous=normal")
        inside = sql[start:end]
        assert sum(1 for q in inside if q.strip().upper() == "COMMIT") == 1
        assert sum(1 for q in inside if "'started'" in q and q.lstrip().upper().startswith("INSERT INTO CALLS")) == 5
        (level,) = rt.store.query("PRAGMA synchronous")[0]
        assert level == 1  # back to NORMAL for every other commit
        # every call settled, each with its own attempt and events
        rows = rt.store.calls(s.id, step=res.step)
        assert [r.state for r in rows] == ["settled"] * 5
        assert len({r.seq for r in rows}) == 5


async def test_a_hundred_safe_reads_settle_in_few_transactions(workspace: Path) -> None:
    for i in range(100):
        (workspace / f"f{i:03d}.txt").write_text(f"file {i}\n")
    async with _runtime(workspace) as rt, rt.session() as s:
        await s.step([{"name": "read", "arguments": {"path": "f000.txt"}}])
        with traced(rt) as sql:
            res = await s.step([{"name": "read", "arguments": {"path": f"f{i:03d}.txt"}} for i in range(100)])
        assert [r.outcome for r in res.results] == ["ok"] * 100
        commits = sum(1 for q in sql if q.strip().upper() == "COMMIT")
        print(f"100 Safe reads in one step: {commits} commits")
        assert commits <= 50
        rows = rt.store.calls(s.id, step=res.step)
        assert [r.idx for r in rows] == list(range(100))
        assert all(r.state == "settled" and r.outcome == "ok" for r in rows)


async def test_a_withheld_output_is_one_commit_with_its_artifact_row(workspace: Path) -> None:
    """An output over the limits is saved as an artifact: its bytes are fsynced first, and its row
    rides with the settle of the call whose result names it (one commit for the step, not two)."""
    for i in range(40):
        lines = (f"def get_{i}_{j}(): pass  # {'padding ' * 8}\n" for j in range(50))
        (workspace / f"m{i:02d}.py").write_text("".join(lines))
    async with _runtime(workspace) as rt, rt.session() as s:
        call = [{"name": "grep", "arguments": {"pattern": "def get_"}}]
        await s.step(call)  # the first call numbers a block
        with traced(rt) as sql:
            res = await s.step(call)
        withheld = res.results[0].metadata["withheldOutput"]
        commits = [q for q in sql if q.strip().upper() == "COMMIT"]
        assert len(commits) == 1, sql
        begin = max(i for i, q in enumerate(sql) if q.strip().upper() == "BEGIN IMMEDIATE")
        assert any(q.startswith("INSERT OR REPLACE INTO artifacts") for q in sql[begin:])
        saved = workspace / withheld["outputPath"]
        assert hashlib.sha256(saved.read_bytes()).hexdigest() == withheld["sha256"]
    other = Store(workspace / ".zuno" / "zuno.db", readonly=True)  # what another process sees: durable
    try:
        row = other.artifact(withheld["outputPath"])
        assert row is not None and (row["sha256"], row["size"], row["kind"]) == (
            withheld["sha256"],
            saved.stat().st_size,
            "withheld-output",
        )
    finally:
        other.close()


def test_an_artifact_row_is_seen_at_once_and_written_with_the_next_transaction(tmp_path: Path) -> None:
    db = tmp_path / "zuno.db"
    store = Store(db)
    try:
        sid = store.ensure_session(None, str(tmp_path), "zuno")
        store.record_artifact(sid, 7, ".zuno/artifacts/x.out", "report", 3, "ab" * 32)
        store.record_artifact(sid, 8, ".zuno/artifacts/x.out", "report", 4, "cd" * 32)  # the last one wins
        assert store.artifact(".zuno/artifacts/x.out")["size"] == 4  # its driver sees it at once
        other = Store(db, readonly=True)
        try:
            assert other.artifact(".zuno/artifacts/x.out") is None  # not committed yet
            store.add_event(sid, "marker", {})  # the next transaction carries it
            row = other.artifact(".zuno/artifacts/x.out")
            assert row is not None and (row["call_seq"], row["size"], row["sha256"]) == (8, 4, "cd" * 32)
        finally:
            other.close()
    finally:
        store.close()


def test_a_safe_call_killed_mid_flight_leaves_nothing_to_recover(workspace: Path, run_zuno) -> None:
    (workspace / "durable_ext.py").write_text(EXT)
    env = {"ZUNO_CONFIG_CONTENT": json.dumps({"extensions": ["durable_ext.py"]})}
    marker = workspace / "runs.txt"
    batch(run_zuno, [], "--new-session", "ses_safe", env=env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "zuno", "batch", "-", "--session", "ses_safe"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workspace,
        env=zuno_env(env),
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps([{"name": "safe_hang", "arguments": {"path": str(marker)}}]).encode())
    proc.stdin.close()
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    out = batch(run_zuno, [], "--session", "ses_safe", env=env)
    # No intent row was committed for it (a Safe call may be replayed by definition): nothing is uncertain.
    assert out["notices"] == []
    store = Store(workspace / ".zuno" / "zuno.db", readonly=True)
    try:
        assert [r.name for r in store.calls("ses_safe")] == []
        assert not any(e["kind"] == "call-started" for e in store.events("ses_safe"))
    finally:
        store.close()
