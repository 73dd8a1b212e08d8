"""Dispatcher overhead per durable call, as ratios against floors measured in the same run.

Rounds interleave, in a shuffled (seeded) order:
- plain ``open().read()`` of the same small files;
- the ``read`` tool alone, called as the dispatcher calls it (no admission, no store rows);
- a bare SQLite WAL loop writing the rows one durable ``read`` call writes (the step row and
  its two events, the settled call row and its two events, the read receipt, the end of the step,
  the session's step counter), with Zuno's own schema and pragmas (``synchronous=NORMAL``) and
  the very texts, metadata and event data Zuno wrote for these reads (taken at warm-up), one
  transaction per call ("1/txn"), and the same rows for 100 calls in one transaction ("100/txn");
- ``read`` through ``Session.step``, one call per step and 100 calls per step.

Each case is timed by the wall clock and by the CPU time of this process (on a machine shared
with other work the CPU time is the steadier of the two; with ``synchronous=NORMAL`` a commit
does not wait for the disk, so on a quiet machine they agree).

The figure is the overhead of a durable call (Zuno per call minus plain ``open().read()``) as a
ratio against the bare loop of one call per transaction: target <= 3x for one call per step, and
<= 1.5x (half that limit) for a call of a 100-call step, for best and median alike. On the
issue's reference machine (2 cores) the absolute targets were <= 0.3 ms (1 call per step) and
<= 0.1 ms (100 per step); they are printed as context only: an absolute time is never a verdict
here. "Where it goes" splits the overhead into the read tool's own work and the durable path
around it.

Also: the cost of committing a Never call's intent with a full sync (``synchronous=FULL`` for
that transaction) against the same call with the intent committed at NORMAL, and the bare loop's
FULL vs NORMAL commit; and the overlap of 8 ParallelSafe calls that each wait 200 ms.

    python bench/dispatch_overhead.py [--calls 200] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import zuno
from zuno.store import sqlite as store_sqlite
from zuno.store.schema import MIGRATIONS
from zuno.tool import ToolContext

EXT = '''
import asyncio, zuno

@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def wait200(tag: str) -> str:
    """Wait 200 ms."""
    await asyncio.sleep(0.2)
    return tag

@zuno.tool(effect="SideEffecting", replay="Never", concurrency="Exclusive")
async def never_noop(tag: str) -> str:
    """Do nothing, as a Never call: its intent is committed before it starts."""
    return tag
'''


# -- the bare WAL loop ------------------------------------------------------------------------


def bare_db(path: Path, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute(f"PRAGMA wal_autocheckpoint={store_sqlite.WAL_AUTOCHECKPOINT_PAGES}")
    db.execute(f"PRAGMA journal_size_limit={store_sqlite.WAL_SIZE_LIMIT_BYTES}")
    for _name, sql in MIGRATIONS:
        for statement in (s.strip() for s in sql.split(";")):
            if statement:
                db.execute(statement)
    db.execute("INSERT INTO sessions (id, created_at, root, profile) VALUES ('s', 0, '/', 'zuno')")
    return db


EVENT = "INSERT INTO events (session_id, step, call_seq, call_id, kind, data, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
CALL = (
    "INSERT INTO calls (session_id, step, idx, call_id, name, arguments, args_digest, effect, replay, concurrency,"
    " state, attempt, outcome, cancelled, text, metadata, started_at, ended_at, recorded_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'settled', 1, 'ok', 0, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class Rows:
    """What Zuno wrote for each file's ``read`` (taken from its own results at warm-up), so the
    bare loop writes rows of the same sizes: the result text, its metadata, the event data, the
    absolute path of the receipt and the call id."""

    texts: list[str]
    metadata: list[str]
    paths: list[str]
    started: str
    settled: str


def bare_loop(db: sqlite3.Connection, step0: int, calls: int, per_txn: int, rows: Rows) -> int:
    """Write the rows of ``calls`` durable reads, ``per_txn`` calls (one step) per transaction."""
    step = step0
    for start in range(0, calls, per_txn):
        step += 1
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE sessions SET last_step = ? WHERE id = 's'", (step,))
        db.execute("INSERT INTO steps (session_id, n, started_at) VALUES ('s', ?, ?)", (step, now))
        db.execute(EVENT, ("s", step, None, None, "step-started", json.dumps({"calls": per_txn}), now))
        for i in range(start, min(start + per_txn, calls)):
            args = json.dumps({"path": f"f{i:04d}.txt"})
            cid = f"call_{step:04d}_{i - start:02d}"
            cur = db.execute(
                CALL,
                ("s", step, i - start, cid, "read", args, "d" * 64, "ReadOnly", "Safe", "ParallelSafe",
                 rows.texts[i], rows.metadata[i], now, now, now),
            )
            seq = cur.lastrowid
            db.execute(EVENT, ("s", step, seq, cid, "call-started", rows.started, now))
            db.execute(EVENT, ("s", step, seq, cid, "call-settled", rows.settled, now))
            db.execute(
                "INSERT OR REPLACE INTO read_receipts VALUES ('s', ?, ?, ?, ?, 1, ?, ?)",
                (rows.paths[i], "h" * 64, 35, 0, seq, now),
            )
        db.execute("UPDATE steps SET ended_at = ? WHERE session_id = 's' AND n = ?", (now, step))
        db.execute(EVENT, ("s", step, None, None, "step-ended", "{}", now))
        db.execute("COMMIT")
    return step


# -- the rounds -------------------------------------------------------------------------------


async def rounds(root: Path, calls: int, n_rounds: int, seed: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of each case, per round."""
    files = []
    for i in range(calls):
        p = root / f"f{i:04d}.txt"
        p.write_text(f"file {i}\n" * 5)
        files.append(p)
    (root / "bench_ext.py").write_text(EXT)
    bare_normal = bare_db(root / "bare-normal.db", "NORMAL")
    bare_full = bare_db(root / "bare-full.db", "FULL")
    steps = {"normal": 0, "full": 0}
    times: dict[str, list[tuple[float, float]]] = {}

    async with zuno.Runtime(root=root, config_overrides={"extensions": ["bench_ext.py"]}) as rt, rt.session() as s:

        async def zuno_one() -> None:
            for p in files:
                res = await s.step([{"name": "read", "arguments": {"path": p.name}}])
                assert res.results[0].outcome == "ok", res.results[0].text

        async def zuno_hundred() -> None:
            for start in range(0, calls, 100):
                batch = [{"name": "read", "arguments": {"path": p.name}} for p in files[start : start + 100]]
                res = await s.step(batch)
                assert all(r.outcome == "ok" for r in res.results)

        async def never(sync: str) -> None:
            rt.store.intent_synchronous = sync
            try:
                for i in range(calls // 4):
                    res = await s.step([{"name": "never_noop", "arguments": {"tag": str(i)}}])
                    assert res.results[0].outcome == "ok", res.results[0].text
            finally:
                rt.store.intent_synchronous = "FULL"

        async def plain() -> None:
            for p in files:
                with open(p, "rb") as f:
                    f.read()

        read_tool = rt.surface.tools["read"]

        async def tool_alone() -> None:
            """The read tool itself, called as the dispatcher calls it, with nothing around it (its
            receipt is recorded in memory and written with the next step's commit)."""
            for i, p in enumerate(files):
                ctx = ToolContext(
                    workspace=rt.workspace,
                    store=rt.store,
                    config=rt.config,
                    session_id=s.id,
                    step=0,
                    call_id=f"alone_{i}",
                    call_seq=0,
                    services=s.services,
                    tool_name="read",
                )
                out = await read_tool.run(ctx, read_tool.Args.model_validate({"path": p.name}))
                assert out.outcome == "ok", out.text

        # Warm up (imports, statement cache, page cache), and take what Zuno writes for each read.
        results = []
        for p in files:
            res = await s.step([{"name": "read", "arguments": {"path": p.name}}])
            results.append(res.results[0])
        (started,) = rt.store.query("SELECT data FROM events WHERE kind = 'call-started' ORDER BY seq DESC LIMIT 1")[0]
        (settled,) = rt.store.query("SELECT data FROM events WHERE kind = 'call-settled' ORDER BY seq DESC LIMIT 1")[0]
        rows = Rows(
            texts=[r.text for r in results],
            metadata=[json.dumps(r.metadata, separators=(",", ":")) for r in results],
            paths=[str(p.resolve()) for p in files],
            started=started,
            settled=settled,
        )

        def bare(kind: str, per_txn: int) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                db = bare_normal if kind == "normal" else bare_full
                n = calls if per_txn > 1 or kind == "normal" else calls // 4
                steps[kind] = bare_loop(db, steps[kind], n, per_txn, rows)

            return run

        cases: dict[str, Callable[[], Awaitable[None]]] = {
            "plain": plain,
            "read tool alone": tool_alone,
            "bare 1/txn": bare("normal", 1),
            "bare 100/txn": bare("normal", 100),
            "bare FULL 1/txn": bare("full", 1),
            "zuno 1/step": zuno_one,
            "zuno 100/step": zuno_hundred,
            "never FULL intent": lambda: never("FULL"),
            "never NORMAL intent": lambda: never("NORMAL"),
        }
        rng = random.Random(seed)
        for _ in range(n_rounds):
            order = list(cases)
            rng.shuffle(order)
            for name in order:
                c0, t0 = time.process_time(), time.perf_counter()
                await cases[name]()
                times.setdefault(name, []).append((time.perf_counter() - t0, time.process_time() - c0))
    bare_normal.close()
    bare_full.close()
    return times


async def overlap(root: Path) -> float:
    (root / "wait_ext.py").write_text(EXT)
    async with zuno.Runtime(root=root, config_overrides={"extensions": ["wait_ext.py"]}) as rt, rt.session() as s:
        t0 = time.perf_counter()
        res = await s.step([{"name": "wait200", "arguments": {"tag": str(i)}} for i in range(8)])
        elapsed = time.perf_counter() - t0
        assert all(r.outcome == "ok" for r in res.results)
    return elapsed


# The targets, as ratios against the bare loop of one transaction per call measured in the same run:
# a durable call one per step costs at most 3x that loop's call; one of 100 in a step at most half
# of that limit (1.5x), so a step of 100 calls is at least twice cheaper per call than 100 steps.
TARGET_ONE = 3.0
TARGET_HUNDRED = 1.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=200, help="calls per round and case (a multiple of 100)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=15)
    a = ap.parse_args()
    calls = max(100, a.calls // 100 * 100)
    print(f"machine: {os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{a.rounds} rounds of {calls} calls per case, shuffled order (seed {a.seed}); per call, best / median:")
    with tempfile.TemporaryDirectory() as d:
        times = asyncio.run(rounds(Path(d), calls, a.rounds, a.seed))

    def per(k: str, i: int) -> list[float]:
        n = calls // 4 if k.startswith("never") or k == "bare FULL 1/txn" else calls
        return [t[i] / n for t in times[k]]

    stats: dict[str, dict[str, dict[str, float]]] = {}
    for i, clock in enumerate(("wall", "cpu")):
        stats[clock] = {
            "best": {k: min(per(k, i)) for k in times},
            "median": {k: statistics.median(per(k, i)) for k in times},
        }
    print(f"  {'case':<22} {'wall':>21}   {'CPU of this process':>21}")
    for k in times:
        w, c = stats["wall"], stats["cpu"]
        print(
            f"  {k:<22} {w['best'][k] * 1e6:8.1f} / {w['median'][k] * 1e6:8.1f} us"
            f"   {c['best'][k] * 1e6:8.1f} / {c['median'][k] * 1e6:8.1f} us"
        )

    print()
    verdicts = []
    for zk, target, absolute in (("zuno 1/step", TARGET_ONE, 0.3), ("zuno 100/step", TARGET_HUNDRED, 0.1)):
        for clock in ("wall", "cpu"):
            b, m = stats[clock]["best"], stats[clock]["median"]
            ob, om = b[zk] - b["plain"], m[zk] - m["plain"]
            rb, rm = ob / b["bare 1/txn"], om / m["bare 1/txn"]
            ok = rb <= target and rm <= target
            verdicts.append(ok)
            extra = ""
            if zk == "zuno 100/step":
                one_b, one_m = b["zuno 1/step"] - b["plain"], m["zuno 1/step"] - m["plain"]
                extra = (
                    f"; {ob / one_b:.2f}x / {om / one_m:.2f}x a call of one per step;"
                    f" {ob / b['bare 100/txn']:.1f}x / {om / m['bare 100/txn']:.1f}x the bare 100/txn loop"
                )
            print(
                f"{zk} ({clock}): overhead per durable call {ob * 1e3:.3f} / {om * 1e3:.3f} ms"
                f" = {rb:.2f}x / {rm:.2f}x the bare WAL loop of one call per transaction"
                f" (target <= {target}x, best and median) {'PASS' if ok else 'MISS'}{extra}"
                + (f"; reference-machine figure <= {absolute} ms, context only" if clock == "wall" else "")
            )
    for clock in ("wall", "cpu"):
        b = stats[clock]["best"]
        one, tool = b["zuno 1/step"] - b["plain"], b["read tool alone"] - b["plain"]
        hundred = b["zuno 100/step"] - b["plain"]
        print(
            f"where it goes ({clock}, best): of the one-per-step overhead {one * 1e3:.3f} ms, the read tool itself"
            f" {tool * 1e3:.3f} ms ({tool / b['bare 1/txn']:.2f}x the bare loop), the durable path around it"
            f" {(one - tool) * 1e3:.3f} ms ({(one - tool) / b['bare 1/txn']:.2f}x); of 100 per step"
            f" {hundred * 1e3:.3f} ms, the path around the tool {(hundred - tool) * 1e3:.3f} ms"
            f" ({(hundred - tool) / b['bare 100/txn']:.2f}x the bare 100/txn loop)"
        )
    b, m = stats["wall"]["best"], stats["wall"]["median"]
    full_cost_b = b["never FULL intent"] - b["never NORMAL intent"]
    full_cost_m = m["never FULL intent"] - m["never NORMAL intent"]
    bare_full_b = b["bare FULL 1/txn"] - b["bare 1/txn"]
    print(
        f"Never call, intent committed with synchronous=FULL vs NORMAL: +{full_cost_b * 1e3:.3f} ms best /"
        f" +{full_cost_m * 1e3:.3f} ms median per call ({b['never FULL intent'] * 1e3:.3f} vs"
        f" {b['never NORMAL intent'] * 1e3:.3f} ms); a bare FULL commit costs +{bare_full_b * 1e3:.3f} ms"
        " over a NORMAL one"
    )
    with tempfile.TemporaryDirectory() as d:
        elapsed = min(asyncio.run(overlap(Path(d))) for _ in range(3))
    speedup = 1.6 / elapsed
    print(
        f"8 ParallelSafe calls x 200 ms: {elapsed * 1000:.0f} ms, {speedup:.2f}x faster than serial 1600 ms "
        f"(target >= 6x): {'PASS' if speedup >= 6 else 'MISS'}"
    )
    print("dispatch targets:", "PASS" if all(verdicts) else "MISS")


if __name__ == "__main__":
    main()
