"""The agent end to end through the real SDKs against the loopback fake server (Chat Completions,
Responses, Anthropic Messages), driven through ``zuno run`` / ``zuno resume`` / ``zuno show`` and
the Python API: parallel calls, malformed calls, retries with their own timings, interruption,
kill -9 then resume, and no key anywhere."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.agent.events import StopEvent, TextEvent, ToolResultEvent

from conftest import zuno_env
from fake_provider import Call, Fail, FakeProvider, Reply

APIS = ["openai-chat", "openai-responses", "anthropic"]
SECRET = "sk-test-DO-NOT-LEAK-7f3a9c"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def configure(root: Path, fake: FakeProvider, api: str, extra: dict[str, Any] | None = None) -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    cfg: dict[str, Any] = {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": api,
                "options": {"baseURL": base, "apiKey": "{env:FAKE_KEY}"},
                "models": {"m1": {"context": 65536, "output": 2048}},
            }
        },
        "permission": {"rules": [{"tool": "shell", "action": "allow"}]},
    }
    cfg.update(extra or {})
    (root / "zuno.json").write_text(json.dumps(cfg))


def env() -> dict[str, str]:
    return zuno_env({"FAKE_KEY": SECRET})


def zuno_cli(root: Path, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env(),
        timeout=timeout,
    )


def spawn(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env(),
        start_new_session=True,
    )


def _tool_results(api: str, body: dict[str, Any]) -> dict[str, str]:
    """call id -> result text, from a request body in its wire format."""
    out: dict[str, str] = {}
    if api == "openai-chat":
        for m in body["messages"]:
            if m["role"] == "tool":
                out[m["tool_call_id"]] = m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
    elif api == "openai-responses":
        for it in body["input"]:
            if it.get("type") == "function_call_output":
                out[it["call_id"]] = it["output"] if isinstance(it["output"], str) else json.dumps(it["output"])
    else:
        for m in body["messages"]:
            if m["role"] == "user" and isinstance(m["content"], list):
                for b in m["content"]:
                    if b.get("type") == "tool_result":
                        out[b["tool_use_id"]] = json.dumps(b["content"])
    return out


def _tool_calls(api: str, body: dict[str, Any]) -> list[str]:
    if api == "openai-chat":
        return [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    if api == "openai-responses":
        return [it["call_id"] for it in body["input"] if it.get("type") == "function_call"]
    return [
        b["id"]
        for m in body["messages"]
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]


def _alive_with(marker: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(d.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("api", APIS)
def test_a_scripted_session_with_parallel_calls_retries_and_a_corrected_call(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    configure(workspace, fake, api)
    fake.script(
        Fail(429, retry_after="0.3"),
        Reply(
            text=["Looking", " first"],
            calls=[
                Call("read", '{"path": "a.txt"}'),
                Call("read", ['{"pa', 'th": "b.txt"}']),
                Call("write", '{"path": "c.txt", "content": "gamma\\n"}'),
                Call("read", '{"path": "c.txt"}'),
            ],
        ),
        Reply(calls=[Call("read", '{"path": "a.txt"'), Call("nope", "{}")]),
        Reply(calls=[Call("read", '{"path": "a.txt"}')]),
        Reply(text="all done"),
    )
    p = zuno_cli(workspace, "run", "--json", "look at the files")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "final" and out["final_text"] == "all done" and out["steps"] == 3
    assert out["usage"]["input_tokens"] > 0
    # The results of the parallel step, in call order, all matched, in the wire format.
    second = fake.requests[2].body
    results = _tool_results(api, second)
    ids = _tool_calls(api, second)
    assert list(results) == ids and len(ids) == 4
    assert "alpha" in results[ids[0]] and "beta" in results[ids[1]] and "gamma" in results[ids[3]]
    # The malformed call and the unknown tool came back as blocked results the model could correct.
    third = _tool_results(api, fake.requests[3].body)
    blocked = [t for t in third.values() if "blocked" in t]
    assert len(blocked) == 2 and any("not valid JSON" in t for t in blocked)
    # The retry: two attempts, the first a 429 that asked for 0.3 s, each timed on its own.
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    attempts = db.execute(
        "SELECT number, status, error_category, retry_after_s, started_at, ended_at "
        "FROM agent_attempts WHERE request_id = 1 ORDER BY number"
    ).fetchall()
    assert [a[1] for a in attempts] == [429, 200] and attempts[0][2] == "rate_limited"
    assert attempts[0][3] == pytest.approx(0.3)
    assert attempts[1][4] - attempts[0][5] >= 0.25  # the wait between them is not provider time
    (turn,) = db.execute("SELECT started_at, ended_at FROM agent_turns").fetchall()
    provider_s = sum(e - s for s, e in db.execute("SELECT started_at, ended_at FROM agent_attempts"))
    assert turn[1] - turn[0] > provider_s  # task elapsed time is a different measurement
    show = zuno_cli(workspace, "show", out["session"])
    assert show.returncode == 0 and "2 attempts" in show.stdout and "all done" in show.stdout
    assert "[blocked: invalid_arguments]" in show.stdout


@pytest.mark.parametrize("api", APIS)
def test_a_stream_broken_mid_answer_is_asked_again_and_only_the_new_answer_counts(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    configure(workspace, fake, api)
    fake.script(
        Reply(text=["half an ", "ans"], cut=True),
        Reply(text=["the whole ", "answer"], calls=[Call("read", '{"path": "zuno.json"}')]),
        Reply(text="done"),
    )
    p = zuno_cli(workspace, "run", "--json", "question")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["stop_reason"], out["final_text"], out["steps"]) == ("final", "done", 1)
    assert "the answer broke off (connection); asking again (attempt 2)" in p.stderr
    # The model is sent the answer it finished, never the broken-off one.
    second = json.dumps(fake.requests[2].body)
    assert "the whole answer" in second and "half an" not in second
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    attempts = db.execute("SELECT error_category FROM agent_attempts WHERE request_id = 1 ORDER BY number")
    assert [a[0] for a in attempts] == ["connection", None]
    texts = [json.loads(d)["text"] for (d,) in db.execute("SELECT data FROM agent_items WHERE kind = 'assistant'")]
    assert texts == ["the whole answer", "done"]
    # In a pipe the text streams as it comes: the broken-off part stays, ended by a newline.
    fake.script(Reply(text=["half an ", "ans"], cut=True), Reply(text=["the whole ", "answer"]))
    piped = zuno_cli(workspace, "run", "again")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == "half an ans\nthe whole answer\n"


@pytest.mark.parametrize("api", APIS)
def test_no_key_in_any_record_log_or_error(workspace: Path, fake: FakeProvider, api: str) -> None:
    configure(workspace, fake, api)
    fake.script(Reply(calls=[Call("read", '{"path": "zuno.json"}')]), Fail(401), Fail(400))
    p = zuno_cli(workspace, "run", "--json", "read the config")
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "provider_error"
    # The key did reach the server (the test means something) ...
    seen = " ".join(json.dumps(r.headers) for r in fake.requests)
    assert SECRET in seen
    # ... and nowhere else: not the store, not a log, not stdout or stderr, not `zuno show`.
    show = zuno_cli(workspace, "show", "--json", out["session"])
    events = zuno_cli(workspace, "events", "--session", out["session"], "--json")
    for text in (p.stdout, p.stderr, show.stdout, show.stderr, events.stdout):
        assert SECRET not in text
    for f in (workspace / ".zuno").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


def test_no_provider_or_no_key_is_a_clear_usage_error(workspace: Path, fake: FakeProvider) -> None:
    p = zuno_cli(workspace, "run", "hello")
    assert p.returncode == 2 and "model" in p.stderr and "--model" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "zuno", "run", "--model", "anthropic/claude-x", "--root", str(workspace), "hi"],
        capture_output=True,
        text=True,
        env={k: v for k, v in env().items() if k != "ANTHROPIC_API_KEY"},
    )
    assert p.returncode == 2 and "ANTHROPIC_API_KEY" in p.stderr
    assert fake.requests == []  # nothing ran: no request went out


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_ctrl_c_mid_stream_cancels_the_request_and_keeps_the_partial_text(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    configure(workspace, fake, api)
    fake.script(Reply(text=["Part one. ", "Part two."], stall_s=30))
    child = spawn(workspace, "run", "--json", "write a long answer")
    try:
        deadline = time.monotonic() + 20
        while not (fake.requests and fake.requests[0].text_written_at) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    result = json.loads(out)
    assert result["stop_reason"] == "interrupted" and result["session"]
    assert fake.requests[0].wait_disconnected(5)
    show = zuno_cli(workspace, "show", result["session"])
    assert "[interrupted]" in show.stdout and "Part one" in show.stdout


def test_ctrl_c_twice_mid_call_exits_130_and_leaves_no_process(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake, "openai-chat")
    fake.script(Reply(calls=[Call("shell", '{"command": "sleep 53.17; echo x"}')]), Reply(text="never"))
    child = spawn(workspace, "run", "sleep for a while")
    try:
        deadline = time.monotonic() + 20
        while not _alive_with("sleep 53.17") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with("sleep 53.17")
        child.send_signal(signal.SIGINT)
        time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    deadline = time.monotonic() + 5
    while _alive_with("sleep 53.17") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with("sleep 53.17") == []


@pytest.mark.parametrize("api", APIS)
def test_kill_9_mid_turn_then_zuno_resume(workspace: Path, fake: FakeProvider, api: str) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    configure(workspace, fake, api)
    fake.script(
        Reply(
            calls=[
                Call("read", '{"path": "a.txt"}'),
                Call("shell", '{"command": "sleep 59.41; echo never"}'),
                Call("glob", '{"pattern": "*.txt"}'),
            ]
        ),
    )
    child = spawn(workspace, "run", "three things")
    try:
        deadline = time.monotonic() + 20
        while not _alive_with("sleep 59.41") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with("sleep 59.41")
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
    deadline = time.monotonic() + 10
    while _alive_with("sleep 59.41") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with("sleep 59.41") == []
    sid = sqlite3.connect(workspace / ".zuno" / "zuno.db").execute("SELECT session_id FROM agent_state").fetchone()[0]
    fake.script(Reply(text="resumed and checked"))
    p = zuno_cli(workspace, "resume", sid, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["final_text"] == "resumed and checked"
    body = fake.requests[-1].body
    ids = _tool_calls(api, body)
    results = _tool_results(api, body)
    assert len(ids) == 3 and list(results) == ids  # every open call settled before the request
    assert "alpha" in results[ids[0]]
    assert "[uncertain]" in results[ids[1]] and "does not re-run it" in results[ids[1]]
    assert "Nothing ran" in results[ids[2]]
    assert "uncertain_call" in json.dumps(body)  # the recovery notice, derived from SQL


def test_the_python_api_streams_events_through_a_real_sdk(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    configure(workspace, fake, "openai-responses")
    fake.script(
        Reply(text=["Let me ", "read."], calls=[Call("read", '{"path": "a.txt"}')]), Reply(text="It says alpha.")
    )
    os.environ["FAKE_KEY"] = SECRET

    async def go() -> list[Any]:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent() as agent:
                return [ev async for ev in agent.events("what is in a.txt?")]

    try:
        events = asyncio.run(go())
    finally:
        del os.environ["FAKE_KEY"]
    text = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert text == "Let me read.It says alpha."
    (res,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert res.outcome == "ok" and "alpha" in res.text
    assert isinstance(events[-1], StopEvent) and events[-1].stop_reason == "final"


@pytest.mark.parametrize("api", APIS)
def test_the_python_api_may_load_the_sdk_in_the_background(
    workspace: Path, fake: FakeProvider, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(workspace, fake, api)
    monkeypatch.setenv("FAKE_KEY", SECRET)
    fake.script(Reply(text="from the background"))
    loaded: list[str] = []

    async def go() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent(load_in_background=True, on_loaded=lambda: loaded.append("x")) as agent:
                assert agent.loop is not None and agent.loop.provider.id == "fake/m1"  # from the settings
                result = await agent.run("hi")
                assert loaded == ["x"]  # built once, before the first request went out
                return result

    result = asyncio.run(go())
    assert (result.stop_reason, result.final_text) == ("final", "from the background")
    assert len(fake.requests) == 1


def test_stdin_prompt_continue_and_a_mode_switch_through_the_cli(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake, "anthropic")
    fake.script(Reply(text="a plan"), Reply(text="working on it"))
    first = zuno_cli(workspace, "run", "--json", "--mode", "plan", stdin="plan the release\n")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session"]
    tools = {t["name"] for t in fake.requests[0].body["tools"]}
    assert "read" in tools and "write" not in tools and "shell" not in tools
    second = zuno_cli(workspace, "run", "--json", "--continue", "--mode", "work", "now do it")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["session"] == sid
    body = fake.requests[1].body
    assert "Mode: Work" in body["system"] and "plan the release" in json.dumps(body["messages"])
    assert "write" in {t["name"] for t in body["tools"]}
    shown = zuno_cli(workspace, "show", "--json", sid)
    turns = json.loads(shown.stdout)["turns"]
    assert [t["mode"] for t in turns] == ["plan", "work"]
    bad = zuno_cli(workspace, "run", "--session", "ses_nope", "hi")
    assert bad.returncode == 2 and "zuno sessions" in bad.stderr


def test_interactive_mode_on_a_terminal(workspace: Path, fake: FakeProvider) -> None:
    import pty
    import select

    (workspace / "a.txt").write_text("alpha\n")
    configure(workspace, fake, "openai-chat")
    fake.script(Reply(calls=[Call("read", '{"path": "a.txt"}')]), Reply(text="It says alpha."), Reply(text="bye"))
    master, slave = pty.openpty()
    e = env()
    e["ZUNO_CONFIG_DIR"] = str(workspace.parent / "cfg")
    child = subprocess.Popen(
        [sys.executable, "-m", "zuno", "run", "--root", str(workspace)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=e,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def until(marker: bytes, within: float = 30) -> None:
        nonlocal seen
        deadline = time.monotonic() + within
        while marker not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        assert marker in seen, seen.decode(errors="replace")

    try:
        until(b"zuno> ")
        os.write(master, b"what is in a.txt?\n")
        until(b"It says alpha.")
        until(b"zuno> ")
        os.write(master, b"/mode goal\n")
        until(b"mode goal")
        os.write(master, b"thanks\n")
        until(b"bye")
        until(b"zuno> ")
        os.write(master, b"/exit\n")
        child.wait(20)
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    assert child.returncode == 0
    text = seen.decode(errors="replace")
    assert "✓ read a.txt" in text
    assert "Mode: Goal" in fake.requests[-1].body["messages"][0]["content"]
    assert (workspace.parent / "cfg" / "history").is_file()


def test_compaction_by_a_configured_cheaper_model_over_the_wire(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i} of filler text for the context\n" for i in range(120)))
    configure(
        workspace,
        fake,
        "openai-chat",
        {
            "agent": {"compaction": {"at_fraction": 0.5, "keep_fraction": 0.2, "model": "fake/cheap"}},
        },
    )
    cfg = json.loads((workspace / "zuno.json").read_text())
    cfg["provider"]["fake"]["models"]["m1"]["context"] = 4000
    (workspace / "zuno.json").write_text(json.dumps(cfg))
    rule = "RULE: keep every answer under ten words."
    # Only the first reply calls a tool; every other reply is text, so a summary request and a
    # turn request may take them in any order.
    fake.script(Reply(calls=[Call("read", '{"path": "big.txt"}')]), *(Reply(text=f"text {i}") for i in range(3)))
    first = zuno_cli(workspace, "run", "--json", rule)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session"]
    for i in range(1, 4):
        fake.script(*(Reply(text=f"text {i}.{k}") for k in range(3)))
        p = zuno_cli(workspace, "run", "--json", "--session", sid, f"again {i}")
        assert p.returncode == 0, p.stderr
    summaries = [r for r in fake.requests if r.body["model"] == "cheap"]
    assert summaries, [r.body["model"] for r in fake.requests]
    assert all(not r.body.get("tools") for r in summaries)
    last = [r for r in fake.requests if r.body["model"] == "m1"][-1]
    assert rule in last.body["messages"][0]["content"]
    assert "Summary of the earlier conversation" in json.dumps(last.body["messages"][1:])
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    (n,) = db.execute("SELECT COUNT(*) FROM agent_items WHERE kind = 'compaction'").fetchone()
    assert n == len(summaries)


WARM_CHECK = """
import asyncio, json, sys
import zuno

async def main(root, api, base):
    overrides = {"model": "fake/m1", "provider": {"fake": {"api": api, "options": {"baseURL": base, "apiKey": "k"}}}}
    async with zuno.Runtime(root=root, config_overrides=overrides) as rt:
        before = "anyio._backends._asyncio" in sys.modules
        async with rt.agent():
            print(json.dumps([before, "anyio._backends._asyncio" in sys.modules]))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
"""


@pytest.mark.parametrize("api", APIS)
def test_the_http_stack_is_loaded_when_the_agent_opens(workspace: Path, fake: FakeProvider, api: str) -> None:
    # The SDK's HTTP stack would import anyio's asyncio backend (tens of ms) during the first
    # request; the agent loads it when it opens, so no turn pays for it. A fresh process, no request.
    base = fake.root_url if api == "anthropic" else fake.base_url
    p = subprocess.run(
        [sys.executable, "-c", WARM_CHECK, str(workspace), api, base],
        capture_output=True,
        text=True,
        timeout=60,
        env=zuno_env(),
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [False, True]
    assert fake.requests == []
