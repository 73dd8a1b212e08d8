"""Benchmark: the agent loop's own cost per model step — 200 steps of 4 ReadOnly calls (read) with
the loopback fake server answering at once through the real OpenAI SDK, then a final.

harness = wall time of the run - the tools' own time (per step, first call start to last call
end: the calls overlap) - the HTTP round trip. The HTTP round trip is only the time spent inside
the HTTP transport (httpx2's ``AsyncHTTPTransport``: sending the request, waiting for the server
and reading the response bytes), timed around each of its awaits; everything else is harness:
the dispatcher's share (Session.step around the tools: admission, durable intent and result rows,
counted honestly), the provider adapter and its SDK (request body building and serialisation,
schema export, SSE event parsing), and the agent loop's own (context rebuild, transcript commits).
The target is harness <= 2 ms per step; the ratio printed is harness / target (<= 1 meets it).

The official SDK's own work per request (building and sending the request through its client,
decoding the SSE) is measured too, by a peer in the same run: the bare SDK alone sends the very
request bodies Zuno sent, in order, to a second server playing the same script, and reads each
response body to its end, as Zuno does (Zuno parses the events itself: that parsing is harness).
``harness beyond the SDK`` is the harness less that peer's time outside the transport: Zuno's
own share, with the cost of the SDK's request path set aside. The durable record's floor is
measured the same way: every statement a turn runs is recorded (in a third, untimed run) and
replayed bare on a copy of the database as the turn found it; ``beyond the SDK and SQLite`` is
what is left, Zuno's own Python.
Also: time from the server's first streamed byte to the loop's text event (target <= 5 ms), over
the final's stream.

Each run times the turn twice, each in a fresh event loop: once with the cyclic collector settled
the way ``zuno run`` settles it (``zuno.startup_gc``: collection paused while the runtime, the SDK
and the agent are built, then what exists frozen: the product's own configuration), and once as
the Python API leaves a host's collector (untouched: its full collections walk the SDK's heap).
The target is judged on the first; the second is printed beside it.

    python bench/agent_loop_overhead.py [--steps 200] [--api openai-chat] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import httpx2  # noqa: E402

import zuno  # noqa: E402
from zuno.agent.events import RequestEvent, TextEvent  # noqa: E402
from zuno.startup_gc import StartupCollection  # noqa: E402

CALLS_PER_STEP = 4
TARGET_MS = 2.0


class CollectorClock:
    """Sums the time the cyclic collector ran (a ``gc.callbacks`` entry) and counts its full
    collections: the share of the harness the collector's settling changes."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._start
        self.full += info["generation"] == 2


class WireClock:
    """Sums the time spent inside the HTTP transport: the request's send and the wait for the
    response head, then every read of a response body chunk (the SDK parses between reads; that
    parsing is harness, not wire time)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.requests = 0
        self.bodies: list[tuple[str, bytes]] = []  # (path, body) of every request, for the SDK peer
        self._orig = httpx2.AsyncHTTPTransport.handle_async_request

    def install(self) -> None:
        clock, orig = self, self._orig

        class Timed(httpx2.AsyncByteStream):
            def __init__(self, inner: httpx2.AsyncByteStream) -> None:
                self.inner = inner

            async def __aiter__(self):  # type: ignore[override]
                it = self.inner.__aiter__()
                while True:
                    t = time.perf_counter()
                    try:
                        chunk = await it.__anext__()
                    except StopAsyncIteration:
                        clock.seconds += time.perf_counter() - t
                        return
                    clock.seconds += time.perf_counter() - t
                    yield chunk

            async def aclose(self) -> None:
                t = time.perf_counter()
                await self.inner.aclose()
                clock.seconds += time.perf_counter() - t

        async def timed(transport: httpx2.AsyncHTTPTransport, request: httpx2.Request) -> httpx2.Response:
            clock.bodies.append((request.url.path, request.content))
            t = time.perf_counter()
            try:
                response = await orig(transport, request)
            finally:
                clock.seconds += time.perf_counter() - t
                clock.requests += 1
            response.stream = Timed(response.stream)  # type: ignore[arg-type]
            return response

        httpx2.AsyncHTTPTransport.handle_async_request = timed  # type: ignore[method-assign]

    def uninstall(self) -> None:
        httpx2.AsyncHTTPTransport.handle_async_request = self._orig  # type: ignore[method-assign]


SERVER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from fake_provider import Call, FakeProvider, Reply
steps, calls = int(sys.argv[2]), int(sys.argv[3])
fake = FakeProvider().start()
turn = Reply(calls=[Call("read", json.dumps({"path": f"f{i}.txt"})) for i in range(calls)])
fake.script(*([turn] * steps), Reply(text=["done", " now"]))
print(fake.port, flush=True)
sys.stdin.readline()
print(json.dumps({"first_byte_at": fake.requests[-1].first_byte_at}), flush=True)
fake.stop()
"""


def start_server(steps: int) -> tuple[subprocess.Popen[str], int]:
    """The scripted server in its own process, so its threads take no time from the loop's."""
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT / "tests"), str(steps), str(CALLS_PER_STEP)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    return server, int(server.stdout.readline())


def server_first_byte(server: subprocess.Popen[str]) -> float | None:
    assert server.stdout is not None and server.stdin is not None
    server.stdin.write("\n")
    server.stdin.flush()
    value = json.loads(server.stdout.readline())["first_byte_at"]
    server.kill()
    server.wait()
    return float(value) if value else None


async def run(
    steps: int, api: str, root: Path, port: int, record: Path | None = None, *, settled: bool = True
) -> dict[str, Any]:
    """One timed run; with ``record``, instead an untimed run that copies the database to
    ``record`` before the turn and returns every statement the turn ran (``ops``). ``settled``: the
    collector paused while the runtime and the agent are built and what exists then frozen, as
    ``zuno run`` does (undone after the run); otherwise left as it is."""
    startup = StartupCollection()
    if settled:
        startup.pause()
    try:
        return await _run(steps, api, root, port, record, startup)
    finally:
        if settled:
            startup.settle()
            gc.unfreeze()


async def _run(
    steps: int, api: str, root: Path, port: int, record: Path | None, startup: StartupCollection
) -> dict[str, Any]:
    base = f"http://127.0.0.1:{port}" + ("" if api == "anthropic" else "/v1")
    overrides = {
        "model": "fake/m1",
        "provider": {"fake": {"api": api, "options": {"baseURL": base, "apiKey": "bench"}}},
        "agent": {"limits": {"steps_per_turn": steps + 1}},
    }
    for i in range(CALLS_PER_STEP):
        (root / f"f{i}.txt").write_text(f"file {i}\n" * 20)
    first_text: dict[int, float] = {}
    current = {"req": 0}

    def on(ev: object) -> None:
        if isinstance(ev, RequestEvent) and ev.phase == "sent":
            current["req"] += 1
        elif isinstance(ev, TextEvent) and current["req"] not in first_text:
            first_text[current["req"]] = time.perf_counter()

    wire = WireClock()
    async with zuno.Runtime(root=root, config_overrides=overrides) as rt:
        async with rt.agent() as agent:
            startup.settle()  # (nothing to settle unless it was paused)
            if record is not None:
                return {"ops": await recorded_turn(rt.store, agent, record)}
            wire.install()
            collector = CollectorClock()
            gc.callbacks.append(collector)
            try:
                t0 = time.perf_counter()
                result = await agent.run("read the files, again and again", on_event=on)
                wall = time.perf_counter() - t0
            finally:
                gc.callbacks.remove(collector)
                wire.uninstall()
            assert wire.requests == steps + 1, wire.requests
            assert result.stop_reason == "final" and result.steps == steps, result
            store = rt.store
            sid = agent.id
            tool_s = sum(
                r[1] - r[0]
                for r in store.query(
                    "SELECT MIN(started_at), MAX(ended_at) FROM calls WHERE session_id = ? GROUP BY step", (sid,)
                )
                if r[0] is not None
            )
            step_s = sum(
                r[0]
                for r in store.query(
                    "SELECT ended_at - started_at FROM steps WHERE session_id = ? AND ended_at IS NOT NULL", (sid,)
                )
            )
            provider_s = sum(
                r[0]
                for r in store.query(
                    "SELECT a.ended_at - a.started_at FROM agent_attempts a "
                    "JOIN agent_requests q ON q.id = a.request_id WHERE q.session_id = ?",
                    (sid,),
                )
            )
    # perf_counter is CLOCK_MONOTONIC on Linux: the server's and the loop's readings compare.
    return {
        "wall": wall,
        "tool": tool_s,
        "step": step_s,
        "provider": provider_s,
        "wire": wire.seconds,
        "harness": wall - tool_s - wire.seconds,
        "gc": collector.seconds,
        "gc_full": collector.full,
        "adapter": provider_s - wire.seconds,
        "loop_only": wall - step_s - provider_s,
        "first_text_at": first_text[steps + 1],
        "bodies": wire.bodies,  # type: ignore[dict-item]
    }


class SqlRecorder:
    """Stands in for the store's connection during a turn: forwards every call and records each
    statement with its parameters (executemany's rows taken as a list), in order."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.ops: list[tuple[bool, str, Any]] = []

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self.ops.append((False, sql, params))
        return self.db.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        rows = list(rows)
        self.ops.append((True, sql, rows))
        return self.db.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


async def recorded_turn(store: Any, agent: Any, copy: Path) -> list[tuple[bool, str, Any]]:
    with sqlite3.connect(copy) as dst:
        store._db.backup(dst)  # the database as the turn finds it
    recorder = SqlRecorder(store._db)
    store._db = recorder
    try:
        result = await agent.run("read the files, again and again")
    finally:
        store._db = recorder.db
    assert result.stop_reason == "final", result
    return recorder.ops


def sqlite_floor(copy: Path, ops: list[tuple[bool, str, Any]]) -> float:
    """SQLite's own time for exactly the statements of a turn, replayed bare (prepared statements,
    nothing around them) on a copy of the database as the turn found it, with the store's settings."""
    from zuno.store.sqlite import WAL_AUTOCHECKPOINT_PAGES

    db = sqlite3.connect(copy, isolation_level=None)
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "foreign_keys=ON",
        f"wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}",
    ):
        db.execute(f"PRAGMA {pragma}")
    t0 = time.perf_counter()
    for many, sql, params in ops:
        if many:
            db.executemany(sql, params)
        else:
            db.execute(sql, params).fetchall()
    seconds = time.perf_counter() - t0
    db.close()
    return seconds


async def sdk_peer(api: str, port: int, bodies: list[tuple[str, bytes]]) -> float:
    """The bare SDK sending ``bodies`` in order and reading each response body to its end, as
    Zuno uses it: its time outside the HTTP transport (timed as in the Zuno run), which is the
    SDK's own work. Zuno parses the events itself (``agent/providers/sse.py``), so that parsing is
    harness; the SDK's own event decoder, which Zuno does not use, is not run here (it would add
    ~0.6 ms per response to the SDK's side and flatter the harness by as much)."""
    import anthropic
    import openai

    base = f"http://127.0.0.1:{port}"
    client: openai.AsyncOpenAI | anthropic.AsyncAnthropic
    if api == "anthropic":
        client = anthropic.AsyncAnthropic(api_key="bench", base_url=base, max_retries=0)
        stream_cls: Any = anthropic.AsyncStream[object]
        prefix = ""
    else:
        client = openai.AsyncOpenAI(api_key="bench", base_url=base + "/v1", max_retries=0)
        stream_cls = openai.AsyncStream[object]
        prefix = "/v1"
    headers = {"content-type": "application/json"}
    wire = WireClock()
    wire.install()
    t0 = time.perf_counter()
    for path, body in bodies:
        stream = await client.post(
            path.removeprefix(prefix),
            content=body,
            cast_to=object,
            stream=True,
            stream_cls=stream_cls,
            options={"headers": headers},
        )
        async for _chunk in stream.response.aiter_bytes():
            pass
        await stream.response.aclose()
    wall = time.perf_counter() - t0
    wire.uninstall()
    await client.close()
    return wall - wire.seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--api", default="openai-chat", choices=["openai-chat", "openai-responses", "anthropic"])
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    results = []
    for _ in range(args.runs):
        server, port = start_server(args.steps)
        try:
            with tempfile.TemporaryDirectory() as d:
                r = asyncio.run(run(args.steps, args.api, Path(d), port))
        finally:
            first_byte_at = server_first_byte(server)
        # perf_counter is CLOCK_MONOTONIC on Linux: the server's and the loop's readings compare.
        r["ttft_ms"] = (r["first_text_at"] - first_byte_at) * 1000 if first_byte_at else float("nan")
        server, port = start_server(args.steps)
        try:
            with tempfile.TemporaryDirectory() as d:
                host = asyncio.run(run(args.steps, args.api, Path(d), port, settled=False))
                r["host_harness"], r["host_gc"], r["host_gc_full"] = host["harness"], host["gc"], host["gc_full"]
        finally:
            server_first_byte(server)
        server, port = start_server(args.steps)
        try:
            gc.collect()
            gc.freeze()  # the peer under the same collector as the settled run
            r["sdk"] = asyncio.run(sdk_peer(args.api, port, r.pop("bodies")))
        finally:
            gc.unfreeze()
            server_first_byte(server)
        r["beyond_sdk"] = r["harness"] - r["sdk"]
        server, port = start_server(args.steps)
        try:
            with tempfile.TemporaryDirectory() as d:
                copy = Path(d) / "copy.db"
                ops = asyncio.run(run(args.steps, args.api, Path(d), port, record=copy))["ops"]
                r["sqlite"] = sqlite_floor(copy, ops)
                r["statements"] = len(ops)
        finally:
            server.kill()
            server.wait()
        r["beyond_sdk_sqlite"] = r["beyond_sdk"] - r["sqlite"]
        results.append(r)
    r = min(results, key=lambda x: x["harness"])
    n = args.steps
    per_step = r["harness"] / n * 1000
    print(f"agent loop, {n} steps x {CALLS_PER_STEP} ReadOnly calls, {args.api}, best of {args.runs}")
    print(f"  wall {r['wall']:.3f}s  tools {r['tool']:.3f}s  HTTP round trip (inside the transport) {r['wire']:.3f}s")
    print(
        f"  harness {per_step:.2f} ms/step (target <= {TARGET_MS:g} ms); ratio to target {per_step / TARGET_MS:.2f}"
        " (the collector settled after start-up, as zuno run runs)"
    )
    host_ms = min(x["host_harness"] for x in results) / n * 1000
    print(f"  in a host that leaves its collector as it is (the Python API's default): {host_ms:.2f} ms/step, best")
    settled_gc = sum(x["gc"] for x in results) / len(results) / n * 1000
    host_gc = sum(x["host_gc"] for x in results) / len(results) / n * 1000
    print(
        f"  the collector's own time, mean over the runs: settled {settled_gc:.3f} ms/step "
        f"({sum(x['gc_full'] for x in results)} full collections), left as it is {host_gc:.3f} ms/step "
        f"({sum(x['host_gc_full'] for x in results)} full collections)"
    )
    print(
        f"  of which: dispatcher (Session.step around the tools) {(r['step'] - r['tool']) / n * 1000:.2f} ms/step, "
        f"provider adapter + SDK {r['adapter'] / n * 1000:.2f} ms/step, "
        f"agent loop {r['loop_only'] / n * 1000:.2f} ms/step"
    )
    sdk_ms = r["sdk"] / n * 1000
    beyond = r["beyond_sdk"] / n * 1000
    print(
        f"  the bare SDK sending the same {n + 1} bodies to the same script and reading the bodies: "
        f"{sdk_ms:.2f} ms/step outside the transport"
    )
    print(f"  harness beyond the SDK's own request cost {beyond:.2f} ms/step; ratio to target {beyond / TARGET_MS:.2f}")
    sqlite_ms = r["sqlite"] / n * 1000
    print(
        f"  SQLite's own time for the turn's {r['statements']} statements, replayed bare on a copy of the "
        f"database: {sqlite_ms:.2f} ms/step"
    )
    print(f"  harness beyond the SDK and SQLite (Zuno's Python) {r['beyond_sdk_sqlite'] / n * 1000:.2f} ms/step")
    print(f"  first byte -> text event {r['ttft_ms']:.2f} ms (target <= 5 ms)")
    if args.runs > 1:
        med = statistics.median(x["harness"] for x in results) / n * 1000
        print(f"  harness per step over {args.runs} runs: best {per_step:.2f} ms, median {med:.2f} ms")
        host_med = statistics.median(x["host_harness"] for x in results) / n * 1000
        print(f"  the collector left as it is, over {args.runs} runs: best {host_ms:.2f} ms, median {host_med:.2f} ms")
        bs = sorted(x["beyond_sdk"] / n * 1000 for x in results)
        print(f"  beyond the SDK over {args.runs} runs: best {bs[0]:.2f} ms, median {statistics.median(bs):.2f} ms")
        py = sorted(x["beyond_sdk_sqlite"] / n * 1000 for x in results)
        print(f"  beyond the SDK and SQLite: best {py[0]:.2f} ms, median {statistics.median(py):.2f} ms")


if __name__ == "__main__":
    main()
