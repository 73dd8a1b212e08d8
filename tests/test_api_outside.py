"""The Python API tried from outside, the way an embedder calls it: each test here failed before
its fix (a wrong type reaching deep code as an AttributeError, a blank prompt sent to the model,
two runs on one agent interleaving their messages in one transcript)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.agent.api import AgentBusy
from zuno.agent.events import RequestEvent

from fake_provider import FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def overrides(fake: FakeProvider) -> dict[str, Any]:
    return {
        "model": "fake/m1",
        "provider": {"fake": {"api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"}}},
    }


def user_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


# -- Session.step ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("calls", "words"),
    [
        (None, "got NoneType"),
        ({"name": "read", "arguments": {"path": "a.txt"}}, "got dict (one call: pass [call])"),
        ('[{"name": "read"}]', "got str"),
    ],
)
def test_step_of_something_that_is_not_a_list_of_calls_says_so_and_records_nothing(
    workspace: Path, calls: Any, words: str
) -> None:
    (workspace / "a.txt").write_text("a\n")

    async def main() -> None:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.session("s1") as s:
                with pytest.raises(TypeError, match=r"Session\.step takes a list of calls") as e:
                    await s.step(calls)
                assert words in str(e.value)
                assert rt.store.query("SELECT COUNT(*) FROM steps WHERE session_id = 's1'")[0][0] == 0
                st = await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])  # a list still runs
                assert [r.outcome.value for r in st.results] == ["ok"]

    asyncio.run(main())


# -- Agent.run's prompt ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "error", "words"),
    [
        (123, TypeError, "the prompt must be a str (or None to continue the session), not int"),
        (b"hello", TypeError, "not bytes"),
        ("", ValueError, "the prompt is empty: give a prompt, or None to continue the session."),
        (" \t\n", ValueError, "the prompt is empty"),
        ("a\udcffb", ValueError, "the prompt is not UTF-8 text (an undecodable byte at character 1)"),
    ],
)
def test_a_prompt_that_is_not_text_or_blank_raises_and_nothing_is_sent(
    workspace: Path, fake: FakeProvider, prompt: Any, error: type[Exception], words: str
) -> None:
    fake.script(Reply("should not be asked"))

    async def main() -> None:
        async with zuno.Runtime(root=workspace, config_overrides=overrides(fake)) as rt:
            async with rt.agent() as agent:
                with pytest.raises(error) as e:
                    await agent.run(prompt)
                assert words in str(e.value)
                assert fake.requests == []
                result = await agent.run("now a real one")  # the agent is still usable
                assert result.stop_reason == "final" and result.final_text == "should not be asked"

    asyncio.run(main())


# -- one turn at a time ----------------------------------------------------------------------------


def test_a_second_run_while_one_is_running_raises_agent_busy_and_leaves_the_transcript_whole(
    workspace: Path, fake: FakeProvider
) -> None:
    fake.script(Reply("first answer", delay_s=0.6), Reply("second answer"))

    async def main() -> None:
        async with zuno.Runtime(root=workspace, config_overrides=overrides(fake)) as rt:
            async with rt.agent() as agent:
                sent = asyncio.Event()

                def on(ev: object) -> None:
                    if isinstance(ev, RequestEvent) and ev.phase == "sent":
                        sent.set()

                first = asyncio.create_task(agent.run("one", on_event=on))
                await sent.wait()  # the first run's request is out and being answered
                with pytest.raises(AgentBusy, match="a turn is already running on this agent") as e:
                    await agent.run("two")
                assert agent.id in str(e.value) and "agent.interrupt()" in str(e.value)
                # events() starts its run in a task: the refusal comes out of the stream
                with pytest.raises(AgentBusy):
                    async for _ in agent.events("three"):
                        pass
                assert (await first).final_text == "first answer"
                second = await agent.run("two")  # once the first is over, a run goes through
                assert second.final_text == "second answer"

    asyncio.run(main())
    assert len(fake.requests) == 2
    assert user_messages(fake.requests[0].body) == ["one"]
    # Before: the refused runs' messages were appended while the first was still being answered,
    # so the second request held "one", "two", "three" with no answer between them.
    msgs = [(m["role"], m.get("content")) for m in fake.requests[1].body["messages"] if m["role"] != "system"]
    assert msgs == [("user", "one"), ("assistant", "first answer"), ("user", "two")], json.dumps(msgs)
