"""The fake provider itself: the SDKs' own stream accumulators parse what it sends."""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest

from fake_provider import Call, Drop, Fail, FakeProvider, Reply, Usage, WebSearch


@pytest.fixture
def fake():
    with FakeProvider() as f:
        yield f


async def test_chat_stream_accumulates_in_the_sdk(fake: FakeProvider) -> None:
    fake.script(Reply(text=["Hel", "lo"], calls=[Call("read", ['{"pa', 'th":"a"}']), Call("glob", '{"p":1}')],
                      usage=Usage(10, 5, 3)))
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    async with client.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hi"}], stream_options={"include_usage": True}
    ) as s:
        final = await s.get_final_completion()
    msg = final.choices[0].message
    assert msg.content == "Hello"
    assert [(c.id, c.function.name, c.function.arguments) for c in msg.tool_calls or []] == [
        ("call_1", "read", '{"path":"a"}'), ("call_2", "glob", '{"p":1}')]
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None and final.usage.prompt_tokens_details is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (10, 5)
    assert final.usage.prompt_tokens_details.cached_tokens == 3
    assert fake.requests[0].body["messages"] == [{"role": "user", "content": "hi"}]
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test"
    await client.close()


async def test_responses_stream_accumulates_in_the_sdk(fake: FakeProvider) -> None:
    fake.script(Reply(text=["a", "b"], calls=[Call("read", "{}")], reasoning="hm", web_search=WebSearch("q")))
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    async with client.responses.stream(model="m", input="hi") as s:
        final = await s.get_final_response()
    assert [o.type for o in final.output] == ["reasoning", "web_search_call", "message", "function_call"]
    assert final.output_text == "ab"
    assert final.usage is not None and final.usage.input_tokens == 11
    await client.close()


async def test_anthropic_stream_accumulates_in_the_sdk(fake: FakeProvider) -> None:
    fake.script(Reply(text=["x", "y"], calls=[Call("read", ['{"path":', '"a"}'])], reasoning="hm",
                      web_search=WebSearch("q")))
    client = anthropic.AsyncAnthropic(api_key="sk-ant", base_url=fake.root_url, max_retries=0)
    async with client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]) as s:
        final = await s.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "server_tool_use", "web_search_tool_result", "text",
                                               "tool_use"]
    assert final.stop_reason == "tool_use"
    assert final.content[-1].input == {"path": "a"}  # type: ignore[union-attr]
    await client.close()


async def test_whole_answers_errors_and_drops(fake: FakeProvider) -> None:
    fake.script(Reply(text="whole"), Fail(429, retry_after="2"), Drop(), Fail(529))
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    done = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert done.choices[0].message.content == "whole"
    with pytest.raises(openai.RateLimitError) as rl:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert rl.value.response.headers["retry-after"] == "2"
    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    ac = anthropic.AsyncAnthropic(api_key="sk-ant", base_url=fake.root_url, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as over:
        await ac.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert over.value.status_code == 529
    assert fake.pending == 0
    with pytest.raises(openai.InternalServerError, match="script exhausted"):
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    await client.close()
    await ac.close()


async def test_a_client_hanging_up_is_recorded(fake: FakeProvider) -> None:
    fake.script(Reply(text=["one", "two"], stall_s=30))
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    stream = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                  stream=True)
    seen = []
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            seen.append(chunk.choices[0].delta.content)
        if len(seen) == 2:
            break
    await stream.close()
    assert seen == ["one", "two"]
    assert await asyncio.to_thread(fake.requests[0].wait_disconnected, 5.0)
    assert not fake.requests[0].finished
    await client.close()


async def test_whole_answers_of_responses_and_messages(fake: FakeProvider) -> None:
    fake.script(Reply(text="r", calls=[Call("x", '{"a": 1}')]), Reply(text="m", calls=[Call("y", '{"b": 2}')]))
    oc = openai.AsyncOpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
    resp = await oc.responses.create(model="m", input="hi")
    assert resp.output_text == "r" and [o.type for o in resp.output] == ["message", "function_call"]
    ac = anthropic.AsyncAnthropic(api_key="sk-ant", base_url=fake.root_url, max_retries=0)
    msg = await ac.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert [b.type for b in msg.content] == ["text", "tool_use"] and msg.stop_reason == "tool_use"
    assert msg.content[1].input == {"b": 2}  # type: ignore[union-attr]
    await oc.close()
    await ac.close()
