"""The agent session across interruptions, background completions, compactions and a kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zuno
from agent_double import Reply, ScriptedProvider, call, calls, say
from zuno.agent.events import TextEvent, ToolCallEvent
from zuno.agent.items import INTERRUPTED_MARK, NOT_STARTED_RECOVERY_TEXT, SUMMARY_HEAD
from zuno.agent.types import AssistantMessage, ModelRequest, ToolResultMessage, UserMessage
from zuno.runtime import UNCERTAIN_RECOVERY_TEXT

from conftest import zuno_env

ALLOW_SHELL = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}


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


def test_interrupt_mid_stream_keeps_the_partial_text_marked(workspace: Path) -> None:
    async def go() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            p = ScriptedProvider([say("a" * 40, chunks=40, chunk_delay=0.05)])
            async with rt.agent(provider=p) as agent:
                seen: list[str] = []

                def on(ev: Any) -> None:
                    if isinstance(ev, TextEvent):
                        seen.append(ev.text)
                        if len(seen) == 3:
                            agent.interrupt()

                result = await agent.run("tell me", on_event=on)
                # The stream was abandoned at the interrupt, not read out to its end.
                abandoned = p.deltas_sent < 40 and p.streams_finished == 0
                nxt = ScriptedProvider([say("again")])
                agent.loop.provider = nxt  # type: ignore[union-attr]
                await agent.run("go on")
                return result, abandoned, agent.transcript.requests(), nxt.requests[0]

    result, abandoned, requests, nxt = asyncio.run(go())
    assert result.stop_reason == "interrupted" and abandoned
    assert requests[0].status == "interrupted"
    partial = nxt.messages[1]
    assert isinstance(partial, AssistantMessage) and partial.text == "aaa\n" + INTERRUPTED_MARK
    assert not partial.tool_calls


def test_interrupt_mid_call_cancels_the_step_and_leaves_no_process(workspace: Path) -> None:
    async def go() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=ALLOW_SHELL) as rt:
            p = ScriptedProvider([calls(call("shell", {"command": "sleep 47.31"})), say("never")])
            async with rt.agent(provider=p) as agent:

                def on(ev: Any) -> None:
                    if isinstance(ev, ToolCallEvent):
                        asyncio.get_running_loop().call_later(0.5, agent.interrupt)

                result = await agent.run("sleep", on_event=on)
                return result, agent.transcript.items(), len(p.requests)

    result, items, n_requests = asyncio.run(go())
    # (Had the interrupt not cancelled the step, the call would have run its 47 s and not be cancelled.)
    assert result.stop_reason == "interrupted" and n_requests == 1
    (tr,) = [i for i in items if i.kind == "tool_result"]
    assert tr.data["cancelled"] and tr.data["outcome"] == "uncertain"
    assert _alive_with("sleep 47.31") == []


def test_a_background_job_wakes_the_session(workspace: Path) -> None:
    def script(req: ModelRequest, i: int) -> Reply:
        if i == 0:
            return calls(call("shell", {"command": "sleep 0.5; echo built", "run_in_background": True}))
        if i == 1:
            return say("started; I will be woken")
        last = req.messages[-1]
        assert isinstance(last, UserMessage) and "job_completed" in last.text and "ended: completed" in last.text
        return say("the job finished")

    async def go() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=ALLOW_SHELL) as rt:
            p = ScriptedProvider(script)
            async with rt.agent(provider=p) as agent:
                return await agent.run("build in the background"), agent.transcript.turns()

    result, turns = asyncio.run(go())
    assert result.stop_reason == "final" and result.final_text == "the job finished"
    assert [t["stop_reason"] for t in turns] == ["waiting_background", "final"]


def test_a_rule_from_turn_one_survives_three_compactions(workspace: Path) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i} of filler text\n" for i in range(150)))
    rule = "RULE: never modify files under vendor/ and always answer in French."

    def turn_script(req: ModelRequest, i: int) -> Reply:
        if i % 2 == 0:
            return calls(call("read", {"path": "big.txt"}))
        return say(f"turn answer {i}")

    summaries = ScriptedProvider(lambda req, i: say(f"summary {i}: the user asked to read big.txt"), id="test/cheap")
    main = ScriptedProvider(turn_script, context_tokens=4000)
    overrides = {"agent": {"compaction": {"at_fraction": 0.6, "keep_fraction": 0.2}}}

    async def go() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=main, summary_provider=summaries) as agent:
                await agent.run(rule)
                for k in range(5):
                    await agent.run(f"read it again ({k})")
                return agent.transcript.items(), agent.transcript.requests()

    items, requests = asyncio.run(go())
    markers = [i for i in items if i.kind == "compaction"]
    assert len(markers) >= 3
    assert sum(1 for r in requests if r.purpose == "compaction") == len(markers)
    last = main.requests[-1]
    assert rule in last.system  # rebuilt from the database, not left to a summary
    first = last.messages[0]
    assert isinstance(first, UserMessage) and first.text.startswith(SUMMARY_HEAD.format(n=len(markers)))
    assert not any(isinstance(m, UserMessage) and m.text == rule for m in last.messages)  # turn 1 was compacted
    # Every request after a compaction holds only the window after its marker, with no orphan result.
    for req in main.requests:
        ids = {c.id for m in req.messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
        assert all(m.call_id in ids for m in req.messages if isinstance(m, ToolResultMessage))


def _kill_9_child(workspace: Path, *mode: str, ready: Callable[[], None] = lambda: None) -> str:
    """Run ``agent_kill_child.py`` (in ``mode``), kill -9 it once it names its session and
    ``ready`` returns; the session id."""
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "agent_kill_child.py"), str(workspace), *mode],
        stdout=subprocess.PIPE,
        env=zuno_env(),
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("SESSION "), line
        ready()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    return line.split()[1]


def test_kill_9_mid_turn_then_resume_settles_every_open_call_first(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")

    def shell_running() -> None:
        deadline = time.monotonic() + 20
        while not _alive_with("sleep 61.25") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with("sleep 61.25")
        time.sleep(0.2)

    sid = _kill_9_child(workspace, ready=shell_running)
    deadline = time.monotonic() + 10
    while _alive_with("sleep 61.25") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with("sleep 61.25") == []  # the guard's lifeline took the command with it

    seen: dict[str, Any] = {}

    def script(req: ModelRequest, i: int) -> Reply:
        seen["messages"] = req.messages
        return say("resumed")

    async def go() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent(provider=ScriptedProvider(script), session_id=sid) as agent:
                return await agent.run(None)

    result = asyncio.run(go())
    assert result.stop_reason == "final"
    msgs = seen["messages"]
    calls_sent = [c for m in msgs if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = {m.call_id: m for m in msgs if isinstance(m, ToolResultMessage)}
    assert [c.id for c in calls_sent] == ["k_read_a", "k_shell", "k_read_b"]
    assert set(results) == {"k_read_a", "k_shell", "k_read_b"}  # no unmatched call reaches the provider
    assert "alpha" in results["k_read_a"].text and not results["k_read_a"].is_error
    assert results["k_shell"].text == UNCERTAIN_RECOVERY_TEXT and results["k_shell"].is_error
    assert results["k_read_b"].text == NOT_STARTED_RECOVERY_TEXT
    # The recovery notice, derived from SQL, reaches the same request.
    notices = [m.text for m in msgs if isinstance(m, UserMessage) and "uncertain_call" in m.text]
    assert notices and "k_shell" in notices[0] and "attempt 1" in notices[0]
    # The results come right after their calls, in call order, before the notice.
    idx = next(i for i, m in enumerate(msgs) if isinstance(m, AssistantMessage) and m.tool_calls)
    assert [getattr(m, "call_id", None) for m in msgs[idx + 1 : idx + 4]] == ["k_read_a", "k_shell", "k_read_b"]


def test_kill_9_during_a_read_only_step_then_resume_asks_again(workspace: Path) -> None:
    # A response of read-only calls is committed with their results: killed during the step, the
    # process leaves neither that response nor its request row, and no call to settle. On resume
    # the model is asked again from the same history (its calls did nothing), with no tool call
    # and no result in it.
    (workspace / "a.txt").write_text("alpha\n")
    sid = _kill_9_child(workspace, "readonly")
    seen: dict[str, Any] = {}

    def script(req: ModelRequest, i: int) -> Reply:
        seen["messages"] = req.messages
        return say("resumed")

    async def go() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            before = (
                rt.store.query("SELECT kind FROM agent_items WHERE session_id = ? ORDER BY seq", (sid,)),
                rt.store.query("SELECT COUNT(*) FROM agent_requests WHERE session_id = ?", (sid,))[0][0],
                rt.store.query("SELECT COUNT(*) FROM calls WHERE session_id = ? AND state = 'started'", (sid,))[0][0],
            )
            async with rt.agent(provider=ScriptedProvider(script), session_id=sid) as agent:
                return before, await agent.run(None)

    (kinds, requests, started), result = asyncio.run(go())
    assert [k[0] for k in kinds] == ["user"] and requests == 0 and started == 0
    assert result.stop_reason == "final" and result.final_text == "resumed"
    msgs = seen["messages"]
    assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in msgs)
    assert not any(isinstance(m, ToolResultMessage) for m in msgs)
    assert isinstance(msgs[0], UserMessage) and msgs[0].text == "look around"
