"""The adapters send bodies serialised part by part (each message once, the tool schemas once per
surface) through the SDK's own request path: the bytes must be exactly the dict body, the dict
body exactly what the SDK's typed-parameter transform would have sent, and a grown history or a
changed surface must reach the wire."""

from __future__ import annotations

import json

import pytest

from zuno.agent.types import (
    AssistantMessage,
    HostedTool,
    ImagePart,
    ModelRequest,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

from fake_provider import FakeProvider, Reply
from provider_help import APIS, READ, SECRET, collect, make

PNG = ImagePart("image/png", "iVBORw0KGgo=")
GLOB = ToolSpec("glob", "Find files — by “pattern”.", {"type": "object", "properties": {"pattern": {"type": "string"}}})
NO_SCHEMA = ToolSpec("ping", "No input.", {})


def history() -> tuple:
    return (
        UserMessage("read a.txt and b.txt, ünïcode ✓", (PNG,)),
        AssistantMessage(
            "Reading both.", (ToolCall("c1", "read", '{"path": "a.txt"}'), ToolCall("c2", "read", "{bad"))
        ),
        ToolResultMessage("c1", "read", "1\talpha\n", images=(PNG,)),
        ToolResultMessage("c2", "read", "bad JSON arguments", is_error=True),
        UserMessage("[zuno notice]\n- job done"),
        AssistantMessage("", (ToolCall("c3", "view_image", '{"path": "x.png"}'),)),
        ToolResultMessage("c3", "view_image", "", images=(PNG, PNG)),
        AssistantMessage("Done."),
        UserMessage(""),
    )


def req(messages: tuple, tools: tuple = (READ, GLOB, NO_SCHEMA), hosted: tuple = ()) -> ModelRequest:
    return ModelRequest("m1", "be brief\nrules: none", messages, tools, hosted, max_output_tokens=321)


def _sdk_transform(api: str, body: dict) -> dict:
    """What the SDK's typed create() would have sent for the same dict body."""
    if api == "openai-chat":
        from openai._utils._transform import maybe_transform
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

        return maybe_transform(body, CompletionCreateParamsStreaming)
    if api == "openai-responses":
        from openai._utils._transform import maybe_transform
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

        return maybe_transform(body, ResponseCreateParamsStreaming)
    return body  # the anthropic SDK sends its create() body as given


SEARCH = (HostedTool("web_search", ("docs.python.org",), ()),)
# Chat Completions has no hosted tools: it is checked without them only.
CASES = [(api, ()) for api in APIS] + [(api, SEARCH) for api in APIS if api != "openai-chat"]


@pytest.mark.parametrize(("api", "hosted"), CASES)
def test_bytes_are_the_dict_body_and_the_sdk_transform_changes_nothing(api: str, hosted: tuple) -> None:
    with FakeProvider() as fake:
        p = make(fake, api, accepts_images=True)
        assert bool(p.hosted_tools_supported) or not hosted
        h = history()
        summary = UserMessage("[Summary of the earlier conversation (compaction 1)]\nread a and b")
        # grown, grown, grown, then replaced (a compaction), grown again, then shorter
        for messages in (h[:1], h[:4], h[:6], h, (summary, *h[4:]), (summary, *h[4:], UserMessage("more")), h[:2]):
            r = req(messages, hosted=hosted)
            body = p.body(r)  # type: ignore[attr-defined]
            assert json.loads(p.body_bytes(r)) == body  # type: ignore[attr-defined]
            assert _sdk_transform(api, body) == body


@pytest.mark.parametrize("api", APIS)
async def test_the_wire_carries_the_grown_history_and_the_changed_surface(api: str) -> None:
    with FakeProvider() as fake:
        fake.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
        p = make(fake, api, accepts_images=True)
        h = history()
        for r in (req(h[:4]), req(h), req(h, tools=(READ,))):
            await collect(p, r)
        first, second, third = (x.body for x in fake.requests)
        assert first == p.body(req(h[:4]))  # type: ignore[attr-defined]
        assert second == p.body(req(h))  # type: ignore[attr-defined]
        assert third == p.body(req(h, tools=(READ,)))  # type: ignore[attr-defined]
        assert len(third["tools"]) == 1 and len(second["tools"]) == 3
        auth = {k.lower(): v for k, v in fake.requests[0].headers.items()}
        assert SECRET in (auth.get("authorization", "") + auth.get("x-api-key", ""))
        assert auth["content-type"] == "application/json"
        await p.aclose()
