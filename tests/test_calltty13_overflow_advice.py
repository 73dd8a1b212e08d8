"""The stop's detail when a request stays too long for the server (``overflow_advice``) ends the
server's sentence before its own begins.

Before, a server message with no final period ran straight on: "... try increasing it The request
(~N tokens) is longer than the model's context ...". Now it reads "... try increasing it. The
request ...", and a message that already ends a sentence gets no second period. Against the
loopback fake server over the real wire: a new session whose one prompt the server refuses as too
long has nothing to compact, so the turn stops with this detail."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zuno

from fake_provider import Fail, FakeProvider

BIG_PROMPT = "BIG-PROMPT " + "filler words for the context " * 400


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def overflow(message: str) -> dict[str, Any]:
    """llama.cpp's answer to a request longer than its --ctx-size, with ``message``."""
    return {"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}}


def stop_detail(workspace: Path, fake: FakeProvider) -> tuple[str, str]:
    overrides = {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": "openai-chat",
                "options": {"baseURL": fake.base_url, "apiKey": "k"},
                "models": {"m1": {"context": 65536, "output": 256}},
            }
        },
        "agent": {"tools": ["read"]},
    }

    async def main() -> tuple[str, str]:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent() as agent:
                result = await agent.run(BIG_PROMPT)
                return result.stop_reason, result.detail or ""

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("message", "ends"),
    [
        ("the request exceeds the available context size, try increasing it", "try increasing it. The request (~"),
        ("Context window exceeded.", "Context window exceeded. The request (~"),
        ("context too long!  ", "context too long! The request (~"),
    ],
)
def test_the_servers_sentence_ends_before_the_advice_begins(
    workspace: Path, fake: FakeProvider, message: str, ends: str
) -> None:
    fake.script(Fail(400, body=overflow(message)))
    stop_reason, detail = stop_detail(workspace, fake)
    assert stop_reason == "provider_error", detail
    assert ends in detail, detail
    assert ".." not in detail and "!." not in detail
    assert "is longer than the model's context" in detail and "provider.fake.models.m1.context" in detail
    assert fake.pending == 0
