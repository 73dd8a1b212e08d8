"""Each adapter, through its real SDK, against the fake server's real wire format: streamed text,
single and parallel tool calls, malformed arguments, usage, what was sent back, images,
opaque items and cancellation."""

from __future__ import annotations

import asyncio
import gc

import pytest

from zuno.agent.types import (
    AssistantMessage,
    Finished,
    ImagePart,
    ModelRequest,
    RequestOutcome,
    TextDelta,
    ToolCallStarted,
    ToolResultMessage,
    UserMessage,
)

from fake_provider import Call, FakeProvider, Reply, Usage
from provider_help import APIS, READ, collect, finished, make, request, texts


@pytest.fixture
def fake():
    with FakeProvider() as f:
        yield f


@pytest.mark.parametrize("api", APIS)
async def test_streamed_text_arrives_delta_by_delta_with_usage(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text=["Hel", "lo", " world"], usage=Usage(input=120, output=9, cached=100)))
    p = make(fake, api)
    outcome = RequestOutcome()
    events = await collect(p, request(), outcome)
    assert texts(events) == ["Hel", "lo", " world"]
    fin = finished(events)
    assert fin.message.text == "Hello world" and fin.message.tool_calls == ()
    assert fin.stop_reason == "end_turn"
    assert (fin.usage.input_tokens, fin.usage.output_tokens, fin.usage.cached_tokens) == (120, 9, 100)
    assert len(outcome.attempts) == 1 and outcome.attempts[0].error_category is None
    assert outcome.attempts[0].started_at <= outcome.attempts[0].ended_at
    sent = fake.requests[0]
    assert sent.body["stream"] is True and sent.body["model"] == "m1"
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_one_tool_call(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text="Reading.", calls=[Call("read", ['{"pa', 'th": "a.txt"}'])]))
    p = make(fake, api)
    events = await collect(p, request(tools=(READ,)))
    fin = finished(events)
    [call] = fin.message.tool_calls
    assert call.name == "read" and call.arguments == '{"path": "a.txt"}'
    assert [e for e in events if isinstance(e, ToolCallStarted)] == [ToolCallStarted(call.id, "read")]
    assert fin.stop_reason == "tool_calls"
    body = fake.requests[0].body
    if api == "openai-chat":
        assert body["tools"] == [{"type": "function", "function": {
            "name": "read", "description": "Read a file.", "parameters": READ.input_schema}}]
    elif api == "openai-responses":
        assert body["tools"] == [{"type": "function", "name": "read", "description": "Read a file.",
                                  "parameters": READ.input_schema, "strict": False}]
    else:
        assert body["tools"] == [{"name": "read", "description": "Read a file.", "input_schema": READ.input_schema}]
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_parallel_calls_and_results_sent_back_in_call_order(fake: FakeProvider, api: str) -> None:
    fake.script(
        Reply(calls=[Call("read", '{"path": "a"}'), Call("read", '{"path": "b"}'), Call("read", '{"path": "c"}')]),
        Reply(text="done"),
    )
    p = make(fake, api)
    req = request(tools=(READ,))
    fin = finished(await collect(p, req))
    calls = fin.message.tool_calls
    assert [c.arguments for c in calls] == ['{"path": "a"}', '{"path": "b"}', '{"path": "c"}']
    assert len({c.id for c in calls}) == 3
    first = fake.requests[0].body
    if api != "anthropic":
        assert first["parallel_tool_calls"] is True
    else:
        assert "tool_choice" not in first  # parallel use is the API's default
    results = tuple(ToolResultMessage(c.id, c.name, f"text of {c.id}") for c in calls)
    follow = ModelRequest("m1", "be brief", (*req.messages, fin.message, *results), tools=(READ,))
    assert texts(await collect(p, follow)) == ["done"]
    body = fake.requests[1].body
    if api == "openai-chat":
        sent = [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    elif api == "openai-responses":
        sent = [(i["call_id"], i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]
    else:
        last = body["messages"][-1]
        assert last["role"] == "user"
        sent = [(b["tool_use_id"], b["content"][0]["text"]) for b in last["content"]]
    assert sent == [(c.id, f"text of {c.id}") for c in calls]
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_parallel_calls_can_be_turned_off(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text="ok"))
    p = make(fake, api)
    await collect(p, request(tools=(READ,), parallel_tool_calls=False))
    body = fake.requests[0].body
    if api == "anthropic":
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert body["parallel_tool_calls"] is False
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_malformed_arguments_are_passed_through_raw(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(calls=[Call("read", ['{"path": "a', '.txt", ']), Call("read", "not json")]))
    p = make(fake, api)
    fin = finished(await collect(p, request(tools=(READ,))))
    assert [c.arguments for c in fin.message.tool_calls] == ['{"path": "a.txt", ', "not json"]
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_images_in_user_and_tool_messages(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text="seen"))
    img = ImagePart("image/png", "iVBORw0KGgo=")
    p = make(fake, api, accepts_images=True)
    msgs = (
        UserMessage("look", images=(img,)),
        AssistantMessage("", (_call("c1"),)),
        ToolResultMessage("c1", "view_image", "an image", images=(img,)),
    )
    await collect(p, ModelRequest("m1", "", msgs, tools=(READ,)))
    body = fake.requests[0].body
    url = "data:image/png;base64,iVBORw0KGgo="
    if api == "openai-chat":
        user, _assistant, tool, extra = body["messages"]
        assert user["content"][1] == {"type": "image_url", "image_url": {"url": url}}
        assert tool == {"role": "tool", "tool_call_id": "c1", "content": "an image"}
        assert extra["role"] == "user" and extra["content"][1] == {"type": "image_url", "image_url": {"url": url}}
    elif api == "openai-responses":
        assert body["input"][0]["content"][1] == {"type": "input_image", "image_url": url}
        out = body["input"][-1]
        assert out["type"] == "function_call_output" and out["output"][1] == {"type": "input_image", "image_url": url}
    else:
        source = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
        assert body["messages"][0]["content"][1] == {"type": "image", "source": source}
        result = body["messages"][2]["content"][0]
        assert result["type"] == "tool_result" and result["content"][1] == {"type": "image", "source": source}
    await p.aclose()


def _call(cid: str):
    from zuno.agent.types import ToolCall

    return ToolCall(cid, "view_image", '{"path": "x.png"}')


@pytest.mark.parametrize("api", ["openai-responses", "anthropic"])
async def test_opaque_reasoning_is_kept_and_echoed_first(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text="answer", calls=[Call("read", '{"path": "a"}')], reasoning="because"), Reply(text="ok"))
    p = make(fake, api, reasoning=True)
    req = request(tools=(READ,))
    fin = finished(await collect(p, req))
    assert len(fin.message.opaque) == 1
    call = fin.message.tool_calls[0]
    await collect(p, ModelRequest("m1", "", (*req.messages, fin.message, ToolResultMessage(call.id, "read", "x"))))
    body = fake.requests[1].body
    if api == "openai-responses":
        assert fake.requests[0].body["include"] == ["reasoning.encrypted_content"]
        assert fake.requests[0].body["store"] is False
        kinds = [i.get("type", i.get("role")) for i in body["input"]]
        assert kinds == ["user", "reasoning", "assistant", "function_call", "function_call_output"]
        reasoning = body["input"][1]
        assert reasoning["encrypted_content"] == "enc-" + b"because".hex() and reasoning["id"] == "rs_1"
    else:
        blocks = body["messages"][1]["content"]
        assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
        assert blocks[0]["thinking"] == "because" and blocks[0]["signature"] == "sig-because"
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_cancellation_mid_stream_closes_the_connection(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text=["par", "tial"], stall_s=30))
    p = make(fake, api)
    outcome = RequestOutcome()
    seen: list[str] = []
    two = asyncio.Event()

    async def consume() -> None:
        async for e in p.stream(request(), outcome):
            if isinstance(e, TextDelta):
                seen.append(e.text)
                if len(seen) == 2:
                    two.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(two.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["par", "tial"]
    assert await asyncio.to_thread(fake.requests[0].wait_disconnected, 5.0), "the HTTP stream stayed open"
    assert not fake.requests[0].finished
    assert [a.error_category for a in outcome.attempts] == ["cancelled"]
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_a_consumer_that_stops_early_closes_the_stream(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text=["a", "b"], stall_s=30))
    p = make(fake, api)
    outcome = RequestOutcome()
    gen = p.stream(request(), outcome)
    assert isinstance(await anext(gen), TextDelta)
    await gen.aclose()  # type: ignore[attr-defined]
    assert await asyncio.to_thread(fake.requests[0].wait_disconnected, 5.0)
    assert [a.error_category for a in outcome.attempts] == ["closed"]
    await p.aclose()


@pytest.mark.parametrize(("api", "wire", "stop"), [
    ("openai-chat", "length", "max_tokens"), ("openai-chat", "content_filter", "content_filter"),
    ("openai-responses", "max_output_tokens", "max_tokens"), ("anthropic", "max_tokens", "max_tokens"),
    ("anthropic", "refusal", "content_filter"),
])
async def test_stop_reasons_map_to_the_neutral_ones(fake: FakeProvider, api: str, wire: str, stop: str) -> None:
    fake.script(Reply(text="cut", stop_reason=wire))
    p = make(fake, api)
    fin = finished(await collect(p, request(max_output_tokens=5)))
    assert fin.stop_reason == stop
    assert wire in (fin.provider_stop_reason or "")
    body = fake.requests[0].body
    key = {"openai-chat": "max_tokens", "openai-responses": "max_output_tokens", "anthropic": "max_tokens"}[api]
    assert body[key] == 5
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_a_caller_that_returns_at_finished_has_its_attempt_recorded(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text="done"))
    p = make(fake, api)
    outcome = RequestOutcome()

    async def until_finished() -> Finished:
        async for ev in p.stream(request(), outcome):
            if isinstance(ev, Finished):
                return ev  # never resumes the generator
        raise AssertionError("no Finished")

    fin = await until_finished()
    assert fin.message.text == "done"
    assert [(a.status, a.error_category) for a in outcome.attempts] == [(200, None)]
    gc.collect()
    await asyncio.sleep(0)
    assert [(a.status, a.error_category) for a in outcome.attempts] == [(200, None)]
    assert fake.requests[0].finished
    await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_empty_turns_are_sent_in_a_shape_the_api_accepts(fake: FakeProvider, api: str) -> None:
    fake.script(Reply(text="ok"))
    p = make(fake, api)
    msgs = (UserMessage("go"), AssistantMessage(""), UserMessage(" "))
    await collect(p, ModelRequest("m1", "", msgs))
    body = fake.requests[0].body
    if api == "anthropic":
        for m in body["messages"]:
            for b in m["content"]:
                assert b["type"] != "text" or b["text"].strip(), body
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert "system" not in body  # an empty system prompt is not sent
    elif api == "openai-chat":
        assert body["messages"][1] == {"role": "assistant", "content": ""}
    await p.aclose()
