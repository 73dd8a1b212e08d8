"""Provider error paths from outside (eleventh round), over each real wire API on loopback: a tool
call whose arguments the output limit cut off, 429 with Retry-After, 5xx for good (exit 1), a
stream cut in the middle of a call's JSON, an unknown tool name and invalid JSON arguments."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zuno

from conftest import zuno_env
from fake_provider import Call, Fail, FakeProvider, Reply

APIS = ["openai-chat", "openai-responses", "anthropic"]
# The wire value of "the output limit was reached" in each API.
LENGTH = {"openai-chat": "length", "openai-responses": "max_output_tokens", "anthropic": "max_tokens"}


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _overrides(fake: FakeProvider, api: str) -> dict[str, Any]:
    base = fake.root_url if api == "anthropic" else fake.base_url
    return {"model": "fake/m1", "provider": {"fake": {
        "api": api, "options": {"baseURL": base, "apiKey": "k"}, "models": {"m1": {"context": 65536, "output": 2048}}}}}


def _agent_run(workspace: Path, fake: FakeProvider, api: str, prompt: str) -> Any:
    async def main() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=_overrides(fake, api)) as rt:
            async with rt.agent() as agent:
                return await agent.run(prompt)

    return asyncio.run(main())


def _texts(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages") or body.get("input"))


@pytest.mark.parametrize("api", APIS)
def test_a_call_cut_off_by_the_output_limit_is_explained_to_the_model(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    """Before: the model was told only "not valid JSON; send a JSON object", and sent the same
    too-long call again, to be cut off again. Now a notice after the results says the output limit
    cut it, names the limit and says to split the work."""
    cut = Call("write", '{"path": "big.txt", "content": "aaaaaaaaaaaaaaaa')
    whole = Call("write", json.dumps({"path": "small.txt", "content": "ok\n"}))
    fake.script(Reply(calls=[whole, cut], stop_reason=LENGTH[api]), Reply(text="split it"))
    result = _agent_run(workspace, fake, api, "write the files")
    assert result.stop_reason == "final" and result.final_text == "split it"
    assert not (workspace / "big.txt").exists() and (workspace / "small.txt").read_text() == "ok\n"
    second = _texts(fake.requests[1].body)
    assert "[output_limit]" in second and "provider.fake.models.m1.output" in second and "2048 tokens" in second
    # the notice names only the call that was cut, and comes after both results
    first_id, cut_id = ("toolu_1", "toolu_2") if api == "anthropic" else ("call_1", "call_2")
    named = second.split("[output_limit]")[1].split("split the work")[0]
    assert cut_id in named and first_id not in named
    assert second.index("[output_limit]") > second.index("not valid JSON")


@pytest.mark.parametrize("api", APIS)
def test_a_call_whose_arguments_are_whole_at_the_output_limit_gets_no_notice(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    fake.script(Reply(calls=[Call("glob", json.dumps({"pattern": "*"}))], stop_reason=LENGTH[api]), Reply(text="done"))
    result = _agent_run(workspace, fake, api, "look")
    assert result.stop_reason == "final"
    assert "[output_limit]" not in _texts(fake.requests[1].body)


def _cli(root: Path, fake: FakeProvider, api: str, *args: str) -> subprocess.CompletedProcess[str]:
    (root / "zuno.json").write_text(json.dumps(_overrides(fake, api)))
    return subprocess.run([sys.executable, "-m", "zuno", "run", "hi", *args, "--root", str(root)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=zuno_env({"NO_COLOR": "1"}), timeout=90)


@pytest.mark.parametrize("api", APIS)
def test_429_with_retry_after_is_waited_then_the_answer_is_kept(workspace: Path, fake: FakeProvider, api: str) -> None:
    fake.script(Fail(429, retry_after="1"), Reply(text="after the wait"))
    p = _cli(workspace, fake, api, "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["final_text"] == "after the wait"
    first, second = fake.requests
    assert second.received_at - first.received_at >= 0.9  # Retry-After: 1 was honoured


@pytest.mark.parametrize("api", APIS)
def test_a_5xx_for_good_exits_1_naming_the_retries(workspace: Path, fake: FakeProvider, api: str) -> None:
    (workspace / "zuno.json").write_text("{}")
    overrides = _overrides(fake, api)
    overrides["provider"]["fake"]["options"]["maxRetries"] = 1
    (workspace / "zuno.json").write_text(json.dumps(overrides))
    fake.script(Fail(503), Fail(503), Reply(text="never"))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "zuno", "run", "hi", "--json", "--root", str(workspace)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       env=zuno_env({"NO_COLOR": "1"}), timeout=90)
    assert p.returncode == 1 and len(fake.requests) == 2 and time.monotonic() - t0 < 60
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "provider_error" and "provider.fake.options.maxRetries = 1" in out["detail"]


@pytest.mark.parametrize("api", APIS)
def test_a_stream_cut_inside_a_calls_json_is_asked_again_and_nothing_half_runs(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    fake.script(
        Reply(calls=[Call("write", ['{"path": "x.txt", ', '"content": "hal'])], cut=True),
        Reply(calls=[Call("write", json.dumps({"path": "x.txt", "content": "whole\n"}))]),
        Reply(text="written"),
    )
    p = _cli(workspace, fake, api, "--json")
    assert p.returncode == 0, p.stderr
    assert (workspace / "x.txt").read_text() == "whole\n"
    # the retried request is the same request: the broken attempt left nothing in the history
    assert _texts(fake.requests[1].body) == _texts(fake.requests[0].body)


@pytest.mark.parametrize("api", APIS)
def test_an_unknown_tool_and_invalid_json_arguments_are_refused_and_the_turn_goes_on(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    fake.script(
        Reply(calls=[Call("no_such_tool", "{}"), Call("read", '{"path": ')]),
        Reply(text="understood"),
    )
    p = _cli(workspace, fake, api, "--json")
    assert p.returncode == 0, p.stderr
    second = _texts(fake.requests[1].body)
    assert "[blocked: unavailable] tool 'no_such_tool' is not available" in second
    assert "[blocked: invalid_arguments] arguments for read are not valid JSON" in second
