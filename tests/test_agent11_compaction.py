"""Compaction tried from outside (eleventh round): the request sent after the last allowed pass,
the exact budget and one token past it, and what the summariser is shown of a long tool result
that a later step must still be able to cite (its ``[verification rcp_…]`` receipt)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import zuno
from agent_double import ScriptedProvider, call, calls, say
from zuno import limits
from zuno.agent.compaction import render
from zuno.agent.items import SUMMARY_HEAD, Item
from zuno.agent.types import ModelRequest, UserMessage

ALLOW_SHELL = {"permission": {"rules": [{"tool": "shell", "action": "allow"}]}}


def _is_summary_request(req: ModelRequest) -> bool:
    return req.system.startswith("You compact the history")


def test_the_last_allowed_compaction_pass_is_followed_by_a_rebuilt_request(workspace: Path) -> None:
    """Before: the loop compacted up to COMPACT_MAX_PASSES + 1 times before one request, and the
    request it sent was the one built before the last compaction (its window held items the new
    marker had already summarised). Now: at most COMPACT_MAX_PASSES summaries, and the request
    sent starts with the last one."""
    huge = "S" * 60_000  # a summary so long that the window never gets under the budget
    summaries = ScriptedProvider(lambda req, i: say(huge), id="test/cheap")
    main = ScriptedProvider(lambda req, i: say(f"answer {i}"))
    overrides = {"agent": {"compaction": {"at_fraction": 0.5, "keep_fraction": 0.9}}}

    async def go() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=main, summary_provider=summaries) as agent:
                for k in range(6):
                    await agent.run(f"turn {k}")
                main.context_tokens = 6_000  # from now on every request is over its budget
                await agent.run("now compact")
                return [i for i in agent.transcript.items() if i.kind == "compaction"]

    markers = asyncio.run(go())
    assert len(summaries.requests) == limits.COMPACT_MAX_PASSES == len(markers)
    sent = main.requests[-1]
    first = sent.messages[0]
    assert isinstance(first, UserMessage)
    assert first.text.startswith(SUMMARY_HEAD.format(n=limits.COMPACT_MAX_PASSES))
    # nothing the last marker summarised is in the request
    assert not any(isinstance(m, UserMessage) and m.text == "turn 0" for m in sent.messages)


def _estimate_of_turn_two(workspace: Path, context: int | None, overrides: dict[str, Any]) -> tuple[int, int]:
    """Two turns in a new session; the second one's request is sent with ``context`` (None: a
    large one). (the estimate recorded for that request, the compaction requests made)"""
    summaries = ScriptedProvider(lambda req, i: say("summary of the start"), id="test/cheap")
    main = ScriptedProvider([say("first answer"), say("second answer")])

    async def go() -> tuple[int, int]:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=main, summary_provider=summaries) as agent:
                await agent.run("the first prompt")
                if context is not None:
                    main.context_tokens = context
                await agent.run("the second prompt")
                rows = rt.store.query(
                    "SELECT estimated_tokens FROM agent_requests WHERE session_id = ? AND purpose = 'turn' "
                    "ORDER BY id",
                    (agent.id,),
                )
                return int(rows[-1][0]), len(summaries.requests)

    return asyncio.run(go())


def test_compaction_at_exactly_the_budget_and_one_token_past_it(workspace: Path) -> None:
    overrides = {"agent": {"compaction": {"at_fraction": 1.0}}}
    estimate, _ = _estimate_of_turn_two(workspace, None, overrides)
    # A request estimated at exactly at_fraction × context is sent as it is ...
    same, compactions = _estimate_of_turn_two(workspace, estimate, overrides)
    assert same == estimate and compactions == 0
    # ... and one token past it is compacted first.
    _, compactions = _estimate_of_turn_two(workspace, estimate - 1, overrides)
    assert compactions >= 1


def _result(text: str) -> Item:
    return Item(seq=2, turn=1, kind="tool_result", data={"name": "shell", "text": text, "outcome": "ok"},
                call_id="c1")


def test_a_long_tool_result_keeps_its_tail_and_receipt_for_the_summariser() -> None:
    """Before: a result past COMPACT_RESULT_MAX_CHARS was cut to its head, so the receipt a shell
    result ends with (``[verification rcp_…]``, what a Goal's evidence cites) never reached the
    summary, nor did the exit status beside it. Now the head and the tail are both kept, and the
    text stays within the limit."""
    receipt = "[verification rcp_0123456789abcdef0123]"
    text = "".join(f"line {i}\n" for i in range(2_000)) + "[exit 0 …]\n" + receipt
    shown = render([_result(text)], None)
    assert receipt in shown and "[exit 0 …]" in shown and "line 0\n" in shown
    body = shown.split(": ", 1)[1]
    assert len(body) <= limits.COMPACT_RESULT_MAX_CHARS + 80  # the marker of what was left out
    assert "characters left out" in body
    # a receipt in the middle of what is left out is kept too
    middle = "x" * 3_000 + " [verification rcp_ffffffffffffffffffff] " + "y" * 3_000
    assert "[verification rcp_ffffffffffffffffffff]" in render([_result(middle)], None)
    # a result within the limit is shown whole
    assert render([_result("short")], None).endswith("[ok]: short")


def test_a_receipt_of_a_compacted_shell_result_reaches_the_summariser(workspace: Path) -> None:
    """The same through a real shell call with a long output, compacted in a later turn."""
    seen: list[str] = []

    def summarise(req: ModelRequest, i: int) -> Any:
        seen.append(req.messages[0].text)  # type: ignore[union-attr]
        return say("summary")

    main = ScriptedProvider(
        [calls(call("shell", {"command": "seq 1 1500"})), say("ran it"), say("second answer"), say("third")]
    )
    overrides = {**ALLOW_SHELL, "agent": {"compaction": {"at_fraction": 0.5, "keep_fraction": 0.05}}}

    async def go() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            summaries = ScriptedProvider(summarise, id="test/cheap")
            async with rt.agent(provider=main, summary_provider=summaries) as agent:
                await agent.run("count")
                await agent.run("next")
                main.context_tokens = 8_000
                await agent.run("and now")
                return rt.store.query("SELECT id FROM shell_receipts")

    receipts = asyncio.run(go())
    assert seen, "no compaction happened"
    (rid,) = [r[0] for r in receipts]
    assert f"[verification {rid}]" in seen[0]


def test_a_user_message_past_the_sources_budget_and_compacted_is_not_said_to_be_in_the_history(
    workspace: Path,
) -> None:
    """Before: a user message past USER_SOURCES_MAX_CHARS was listed as "(text in the history)"
    even after a compaction had summarised it away, so the model looked for words the history no
    longer held. Now it says the text was summarised; one still in the window keeps the old label."""
    size = limits.USER_SOURCE_TEXT_MAX_CHARS - 100
    prompts = [chr(ord("A") + k) * size for k in range(limits.USER_SOURCES_MAX_CHARS // size + 1)]
    summaries = ScriptedProvider(lambda req, i: say("summary"), id="test/cheap")
    main = ScriptedProvider(lambda req, i: say(f"answer {i}"))
    overrides = {"agent": {"compaction": {"at_fraction": 0.5, "keep_fraction": 0.05}}}

    async def go() -> tuple[list[str], int]:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=main, summary_provider=summaries) as agent:
                for p in prompts:
                    await agent.run(p)
                before = main.requests[-1].system
                main.context_tokens = 9_000
                await agent.run("short")
                return [before, main.requests[-1].system], len(summaries.requests)

    (before, after), compactions = asyncio.run(go())
    over = prompts[-1]
    assert compactions >= 1
    # before any compaction the last prompt, past the budget, is in the history
    assert over not in before and before.count("(text in the history)") == 1
    # after it, it was summarised: the block says so
    assert over not in after and "(text in the history)" not in after
    assert after.count("(text not shown: past this block's") == 1


def test_a_compaction_while_a_background_job_runs_keeps_its_completion_for_the_wake(workspace: Path) -> None:
    """A compaction in the turn that started a background job: the job's completion still wakes
    the session, and the wake request holds the completion notice after the summary (not inside
    it), with no call left without its result."""
    seen: list[ModelRequest] = []
    main_ref: list[ScriptedProvider] = []
    agent_ref: list[Any] = []
    jobs: list[list[Any]] = []

    def script(req: ModelRequest, i: int) -> Any:
        seen.append(req)
        if i == 0:
            main_ref[0].context_tokens = 12_000  # the next request is compacted while the job runs
            return calls(call("shell", {"command": "sleep 2; echo built", "run_in_background": True}))
        if i == 1:
            jobs.append(agent_ref[0].loop.local_jobs())
            return say("started; waiting")
        return say("the job finished")

    main = ScriptedProvider(script)
    main_ref.append(main)
    summaries = ScriptedProvider(lambda req, i: say("summary: a build was started in the background"), id="test/cheap")
    overrides = {**ALLOW_SHELL, "agent": {"compaction": {"at_fraction": 0.5, "keep_fraction": 0.05}}}

    async def go() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent(provider=main, summary_provider=summaries) as agent:
                agent_ref.append(agent)
                result = await agent.run("build in the background " + "b" * 12_000)
                return result, agent.transcript.turns()

    result, turns = asyncio.run(go())
    assert result.final_text == "the job finished"
    assert [t["stop_reason"] for t in turns] == ["waiting_background", "final"]
    assert summaries.requests, "no compaction happened"
    assert jobs[0], "the job had ended before the compacted request"
    assert isinstance(seen[1].messages[0], UserMessage) and seen[1].messages[0].text.startswith(SUMMARY_HEAD[:20])
    wake = seen[-1]
    first = wake.messages[0]
    assert isinstance(first, UserMessage) and first.text.startswith(SUMMARY_HEAD.format(n=1))
    notices = [m for m in wake.messages[1:] if isinstance(m, UserMessage) and "job_completed" in m.text]
    assert notices and "ended: completed" in notices[0].text
    ids = {c.id for m in wake.messages for c in getattr(m, "tool_calls", ())}
    assert all(getattr(m, "call_id", None) in ids for m in wake.messages if hasattr(m, "call_id"))
