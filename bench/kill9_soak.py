"""Soak of the at-most-once guarantees: SIGKILL a `zuno steps` process at random points, many times.

Each round starts `python -m zuno steps - --session soak` (the same session every round, so each
start recovers what the previous kill left), feeds it a few steps of calls that append a marker
line and then finish or hang, and kills it with SIGKILL at a random moment (a random delay after
the start, or just after a random number of markers appeared). At the end a last clean process
recovers the session and the store is checked:

- replays: every call (a unique id and tag) left its marker at most once: nothing was re-run;
- lost results: every result the killed process printed is in the store, settled, with the same
  outcome; every Never call that left a marker has a row (its intent was committed before it
  started), settled by now (ok, or uncertain after recovery); no row is left unsettled;
- a settled ``ok`` row has its marker.

A Safe call killed mid-flight may leave no row at all: it is settled without a prior intent
commit, because it may be replayed by definition (recovery reports nothing for it).

    python bench/kill9_soak.py [--kills 200] [--seed 1] [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXT = '''
import asyncio, os, zuno

MARKS = os.environ["SOAK_MARKS"]


def _mark(tag: str) -> None:
    fd = os.open(MARKS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (tag + "\\n").encode())
    finally:
        os.close(fd)


@zuno.tool(effect="SideEffecting", replay="Never", concurrency="ParallelSafe")
async def soak_never(tag: str, hang: bool = False) -> str:
    """Append a marker, then finish or hang (Never: its intent is committed first)."""
    _mark(tag)
    if hang:
        await asyncio.sleep(60)
    return tag


@zuno.tool(effect="SideEffecting", replay="Never", concurrency="Exclusive")
async def soak_exclusive(tag: str, hang: bool = False) -> str:
    """Append a marker, then finish or hang (Never, Exclusive)."""
    _mark(tag)
    if hang:
        await asyncio.sleep(60)
    return tag


@zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
async def soak_safe(tag: str, hang: bool = False) -> str:
    """Append a marker, then finish or hang (Safe: may be replayed by definition)."""
    _mark(tag)
    if hang:
        await asyncio.sleep(60)
    return tag
'''

TOOLS = ("soak_never", "soak_exclusive", "soak_safe")


def _count(marks: Path) -> int:
    try:
        return marks.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"), help="the zuno source tree")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    ws = Path(tempfile.mkdtemp(prefix="zuno-soak-"))
    (ws / "soak_ext.py").write_text(EXT)
    marks = ws / "marks.txt"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ZUNO")}
    env.update(
        PYTHONPATH=a.src,
        SOAK_MARKS=str(marks),
        ZUNO_CONFIG_DIR=str(ws / "no-user-config"),
        ZUNO_CONFIG_CONTENT=json.dumps({"extensions": ["soak_ext.py"]}),
    )
    sent: dict[str, str] = {}  # call id -> tool
    printed: dict[str, str] = {}  # call id -> outcome the killed process printed
    counter = 0
    t_start = time.monotonic()
    missed = 0
    created = subprocess.run(
        [sys.executable, "-m", "zuno", "steps", "-", "--new-session", "soak"],
        input=b"[]\n",
        cwd=ws,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    assert created.returncode == 0, "could not create the session"
    for k in range(a.kills + 1):
        final = k == a.kills
        proc = subprocess.Popen(
            [sys.executable, "-m", "zuno", "steps", "-", "--session", "soak"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ws,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        if final:  # a clean last run: recover what the last kill left, then end
            out, _ = proc.communicate(b"[]\n", timeout=120)
            assert proc.returncode == 0, proc.returncode
            break
        lines = []
        for _s in range(rng.randint(1, 4)):
            step = []
            for _c in range(rng.randint(1, 4)):
                counter += 1
                cid = f"c{counter:06d}"
                tool = rng.choice(TOOLS)
                sent[cid] = tool
                step.append({"id": cid, "name": tool, "arguments": {"tag": cid, "hang": rng.random() < 0.15}})
            lines.append(json.dumps(step))
        before = _count(marks)
        proc.stdin.write(("\n".join(lines) + "\n").encode())
        proc.stdin.flush()
        # The kill lands after this process ran its first call (its start-up alone takes about a
        # second on a loaded machine): a random delay later, or once a random number of markers appeared.
        total = sum(len(json.loads(x)) for x in lines)
        want = before + (1 if rng.random() < 0.5 else rng.randint(1, total))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _count(marks) < before + 1:
            time.sleep(0.002)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and _count(marks) < want:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05) if rng.random() < 0.7 else rng.uniform(0, 0.5))
        if proc.poll() is None:  # (it should not end before: its stdin stays open)
            os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        if proc.returncode != -signal.SIGKILL:
            missed += 1
        for line in out.decode(errors="replace").splitlines():
            try:
                step_out = json.loads(line)
            except json.JSONDecodeError:
                continue
            for r in step_out.get("results", []):
                printed[r["call_id"]] = r["outcome"]
    elapsed = time.monotonic() - t_start

    ran: dict[str, int] = {}
    for tag in marks.read_text().split() if marks.exists() else []:
        ran[tag] = ran.get(tag, 0) + 1
    db = sqlite3.connect(f"{(ws / '.zuno' / 'zuno.db').as_uri()}?mode=ro", uri=True)
    rows = {cid: (state, outcome) for cid, state, outcome in db.execute("SELECT call_id, state, outcome FROM calls")}
    replays = sorted(t for t, n in ran.items() if n > 1)
    lost_printed = sorted(c for c, o in printed.items() if rows.get(c) != ("settled", o))
    lost_intents = sorted(c for c in ran if sent.get(c) != "soak_safe" and c not in rows)
    unsettled = sorted(c for c, (state, _o) in rows.items() if state != "settled")
    ok_unrun = sorted(c for c, (_s, o) in rows.items() if o == "ok" and c not in ran)
    uncertain = sum(1 for _s, o in rows.values() if o == "uncertain")
    safe_unrecorded = sum(1 for c in ran if sent.get(c) == "soak_safe" and c not in rows)
    print(
        f"kills: {a.kills - missed} of {a.kills} rounds (ended otherwise: {missed}) in {elapsed:.0f} s;"
        f" calls sent {len(sent)}, ran {len(ran)}, results printed "
        f"{len(printed)}, rows {len(rows)} ({uncertain} uncertain after recovery; {safe_unrecorded} Safe calls "
        "killed mid-flight left no row)"
    )
    print(
        f"replays: {len(replays)}; lost printed results: {len(lost_printed)}; Never calls run without an intent "
        f"row: {len(lost_intents)}; unsettled rows: {len(unsettled)}; ok rows never run: {len(ok_unrun)}"
    )
    bad = missed or replays or lost_printed or lost_intents or unsettled or ok_unrun
    for name, items in (
        ("replayed", replays),
        ("lost", lost_printed),
        ("no intent", lost_intents),
        ("unsettled", unsettled),
        ("ok never run", ok_unrun),
    ):
        if items:
            print(f"  {name}: {items[:10]}")
    print("OK" if not bad else "FAILED")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
