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


# -- @zuno.tool and Runtime(tools=...) --------------------------------------------------------------


async def _echo(x: str) -> str:
    """Echo."""
    return x


async def _other(x: str) -> str:
    """Another."""
    return x + x


def test_a_misspelt_declaration_names_the_key_the_values_and_the_one_meant() -> None:
    with pytest.raises(ValueError) as e:
        zuno.tool(effect="Readonly")(_echo)
    assert str(e.value) == (
        "@zuno.tool effect='Readonly': choose one of ReadOnly, UserMediated, Delegating, SideEffecting "
        "(did you mean 'ReadOnly'?)."
    )
    with pytest.raises(ValueError, match="concurrency='parallel': choose one of Exclusive, ParallelSafe"):
        zuno.tool(concurrency="parallel")(_echo)


@pytest.mark.parametrize("name", ["my tool", "x.y", "Café", "a" * 65])
def test_a_tool_name_no_provider_takes_is_refused_when_the_runtime_opens(workspace: Path, name: str) -> None:
    # Before, it was accepted, and every request listing it was refused by the provider.
    t = zuno.tool(name=name)(_echo)
    with pytest.raises(zuno.ConfigError, match="is not one a model can call: a tool name is 1 to 64 letters"):
        zuno.Runtime(root=workspace, tools=[t])
    ok = zuno.tool(name="a" * 64)(_echo)
    assert "a" * 64 in zuno.Runtime(root=workspace, tools=[ok]).surface.names()


def test_two_different_tools_of_one_name_are_refused_and_the_same_tool_twice_is_one(workspace: Path) -> None:
    # Before, the later silently replaced the earlier.
    a, b = zuno.tool(name="same")(_echo), zuno.tool(name="same")(_other)
    with pytest.raises(zuno.ConfigError, match="two different tools are named 'same'"):
        zuno.Runtime(root=workspace, tools=[a, b])
    assert zuno.Runtime(root=workspace, tools=[a, a]).surface.names().count("same") == 1


def test_a_runtime_tool_shadowing_a_built_in_one_is_named_as_a_runtime_tool(workspace: Path) -> None:
    # Before, the message blamed "config key extensions", which the user had not set.
    with pytest.raises(zuno.ConfigError) as e:
        zuno.Runtime(root=workspace, tools=[zuno.tool(name="read")(_echo)])
    assert str(e.value).startswith("Runtime(tools=...): tool 'read' would shadow the built-in tool")


def test_a_tool_returning_a_dict_list_number_or_model_gives_the_model_json(workspace: Path) -> None:
    # Before, Python's repr: {'a': 1, 'ok': True, 'none': None}.
    from pydantic import BaseModel

    class Point(BaseModel):
        x: int
        label: str

    @zuno.tool(effect="ReadOnly", replay="Safe", concurrency="ParallelSafe")
    def values(which: str) -> Any:
        """Return a value."""
        return {
            "dict": {"a": 1, "ok": True, "none": None, "é": "ü"},
            "list": [1, "two", False],
            "number": 2.5,
            "model": Point(x=1, label="p"),
            "set": {3},  # JSON cannot hold it: its repr
            "nan": {"v": float("nan")},
        }[which]

    async def main() -> list[str]:
        async with zuno.Runtime(root=workspace, tools=[values]) as rt:
            async with rt.session() as s:
                names = ["dict", "list", "number", "model", "set", "nan"]
                st = await s.step([{"name": "values", "arguments": {"which": n}} for n in names])
                return [r.text for r in st.results]

    texts = asyncio.run(main())
    assert texts == [
        '{"a": 1, "ok": true, "none": null, "é": "ü"}',
        '[1, "two", false]',
        "2.5",
        '{"x":1,"label":"p"}',
        "{3}",
        "{'v': nan}",
    ]


def test_the_state_of_a_session_that_does_not_exist_raises_as_the_cli_says(workspace: Path) -> None:
    # Before, an empty Goal, Plan and Todo list came back for any id, as if the session existed.
    from zuno.session_ids import SessionNotFound

    async def main() -> None:
        async with zuno.Runtime(root=workspace) as rt:
            with pytest.raises(SessionNotFound, match="no session 'nope'"):
                rt.state("nope")
            async with rt.session("real") as s:
                await s.step([{"name": "todo_update", "arguments": {"action": "add", "items": [{"title": "t"}]}}])
            assert rt.state("real")["todo"]["revision"] >= 1

    asyncio.run(main())


def test_zuno_show_numbers_a_sessions_requests_from_one(workspace: Path, fake: FakeProvider) -> None:
    from zuno.agent.transcript import Transcript
    from zuno.commands.show import render

    fake.script(Reply(text=["one"]), Reply(text=["two"]), Reply(text=["three"]))

    async def main() -> str:
        async with zuno.Runtime(root=workspace, config_overrides=overrides(fake)) as rt:
            async with rt.agent() as a:
                await a.run("hello")
            async with rt.agent() as b:
                await b.run("hello")
                await b.run("again")
                second = b.id
            return render(Transcript(rt.store, second))

    shown = asyncio.run(main())
    assert "model (request 1:" in shown and "model (request 2:" in shown, shown
    assert "request 3" not in shown  # the first session's request is not counted in the second's
