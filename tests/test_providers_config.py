"""The model/provider config contract, {env:NAME}, build_provider and its errors; hosted
web_search per API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zuno import limits
from zuno.agent.providers import (
    MAX_ATTEMPTS,
    AnthropicProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    build_provider,
)
from zuno.agent.types import HostedTool, ModelRequest, ProviderError, RequestOutcome, UserMessage
from zuno.config import Config, ConfigError, load_config

from fake_provider import Fail, FakeProvider, Reply, WebSearch
from provider_help import APIS, collect, finished, make, request, texts

LOCAL = {
    "model": "local/qwen3-coder",
    "provider": {
        "local": {
            "api": "openai-chat",
            "options": {"baseURL": "http://127.0.0.1:8080/v1", "apiKey": "{env:LOCAL_API_KEY}"},
            "models": {"qwen3-coder": {"context": 65536, "output": 8192, "images": False}},
        }
    },
}


def cfg(tmp_path: Path, data: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    return load_config(tmp_path, overrides=data, environ=env or {})


def test_the_issue_example_loads_and_builds(tmp_path: Path) -> None:
    c = cfg(tmp_path, LOCAL, {"LOCAL_API_KEY": "local-secret"})
    p = build_provider(c, environ={})
    assert isinstance(p, OpenAIChatProvider)
    assert (p.id, p.api, p.context_tokens, p.output_tokens, p.accepts_images) == (
        "local/qwen3-coder", "openai-chat", 65536, 8192, False)
    assert p.hosted_tools_supported == frozenset()
    assert p.settings.api_key == "local-secret" and p.settings.base_url == "http://127.0.0.1:8080/v1"
    assert "local-secret" not in repr(c) and "local-secret" not in repr(p.settings)


def test_env_reference_unset_names_the_key_and_the_variable(tmp_path: Path) -> None:
    c = cfg(tmp_path, LOCAL, {})  # other commands still run: only what needs the value fails
    with pytest.raises(ConfigError) as e:
        build_provider(c, environ={})
    msg = str(e.value)
    assert "provider.local.options.apiKey" in msg and "LOCAL_API_KEY" in msg and "not set" in msg
    data = {"model": "h/m", "provider": {"h": {"api": "anthropic", "options": {
        "baseURL": "http://127.0.0.1:1", "headers": {"X-Key": "k {env:HDR_UNSET}"}}}}}
    with pytest.raises(ConfigError) as e:
        build_provider(cfg(tmp_path, data), environ={})
    assert "provider.h.options.headers.X-Key" in str(e.value) and "HDR_UNSET" in str(e.value)


def test_env_reference_anywhere_and_inside_text(tmp_path: Path) -> None:
    data = {"provider": {"local": {"api": "anthropic", "options": {
        "baseURL": "http://{env:HOST}:9/", "headers": {"Authorization": "Bearer {env:TOK}"}}}}}
    c = cfg(tmp_path, data, {"HOST": "127.0.0.1", "TOK": "t0k3n-value"})
    opts = c.provider["local"].options
    assert opts.baseURL == "http://127.0.0.1:9/"
    assert opts.headers["Authorization"].get_secret_value() == "Bearer t0k3n-value"


def test_a_bad_value_read_from_the_environment_is_not_shown(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        cfg(tmp_path, {"provider": {"x": {"models": {"m": {"context": "{env:SECRETISH}"}}}}},
            {"SECRETISH": "hunter2-secret"})
    assert "hunter2-secret" not in str(e.value)
    assert "{env:SECRETISH}" in str(e.value) and "provider.x.models.m.context" in str(e.value)


@pytest.mark.parametrize(("pid", "var", "cls", "api"), [
    ("anthropic", "ANTHROPIC_API_KEY", AnthropicProvider, "anthropic"),
    ("openai", "OPENAI_API_KEY", OpenAIResponsesProvider, "openai-responses"),
])
def test_built_in_ids_need_only_their_key(tmp_path: Path, pid: str, var: str, cls: type, api: str) -> None:
    c = cfg(tmp_path, {"model": f"{pid}/some-model"})
    p = build_provider(c, environ={var: "k-123"})
    assert isinstance(p, cls) and p.api == api and p.settings.api_key == "k-123"
    assert p.accepts_images and p.hosted_tools_supported == frozenset({"web_search"})
    with pytest.raises(ConfigError) as e:
        build_provider(c, environ={})
    assert var in str(e.value) and f"provider.{pid}.options.apiKey" in str(e.value)


def test_the_override_wins_and_models_entries_are_used(tmp_path: Path) -> None:
    c = cfg(tmp_path, {**LOCAL, "provider": {**LOCAL["provider"], "anthropic": {"models": {
        "big": {"context": 1000000, "output": 64000, "images": False}}}}}, {"LOCAL_API_KEY": "x"})
    p = build_provider(c, "anthropic/big", environ={"ANTHROPIC_API_KEY": "a"})
    assert (p.id, p.context_tokens, p.output_tokens, p.accepts_images) == ("anthropic/big", 1000000, 64000, False)


@pytest.mark.parametrize(("data", "override", "needle"), [
    ({}, None, "no model is configured"),
    ({"model": "justaname"}, None, "expected \"<provider id>/<model name>\""),
    ({}, "nowhere/m", "no provider 'nowhere' is configured"),
    ({"model": "x/m", "provider": {"x": {"options": {"baseURL": "http://127.0.0.1:1/v1"}}}}, None,
     "provider.x.api is not set"),
    ({"model": "x/m", "provider": {"x": {"api": "openai-chat"}}}, None, "provider.x.options.baseURL is not set"),
])
def test_what_to_set_is_named(tmp_path: Path, data: dict[str, Any], override: str | None, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        build_provider(cfg(tmp_path, data), override, environ={})
    assert needle in str(e.value)
    if not data and override is None:
        assert "--model" in str(e.value) and "ANTHROPIC_API_KEY" in str(e.value)


def test_a_bad_api_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        cfg(tmp_path, {"provider": {"x": {"api": "openai"}}})
    assert "provider.x.api" in str(e.value)


async def test_a_configured_provider_without_a_key_never_sends_the_environment_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-real-anthropic-key")
    with FakeProvider() as fake:
        for api, url in (("openai-chat", fake.base_url), ("openai-responses", fake.base_url),
                         ("anthropic", fake.root_url)):
            fake.script(Reply(text="hi"))
            c = cfg(tmp_path, {"model": "box/m", "provider": {"box": {"api": api, "options": {"baseURL": url}}}})
            p = build_provider(c)
            assert texts(await collect(p, request())) == ["hi"]
            await p.aclose()
        for r in fake.requests:
            assert "sk-real" not in str(r.headers)


async def test_build_provider_end_to_end_against_the_fake(tmp_path: Path) -> None:
    with FakeProvider() as fake:
        fake.script(Reply(text=["from ", "config"]))
        data = {**LOCAL, "provider": {"local": {**LOCAL["provider"]["local"], "options": {
            "baseURL": fake.base_url, "apiKey": "{env:LOCAL_API_KEY}", "headers": {"X-Org": "{env:ORG}"}}}}}
        p = build_provider(cfg(tmp_path, data, {"LOCAL_API_KEY": "lk-1", "ORG": "org-9"}))
        fin = finished(await collect(p, ModelRequest("qwen3-coder", "sys", (UserMessage("hello"),))))
        assert fin.message.text == "from config"
        sent = fake.requests[0]
        assert sent.headers["authorization"] == "Bearer lk-1" and sent.headers["x-org"] == "org-9"
        assert sent.body["model"] == "qwen3-coder"
        assert sent.body["messages"][0] == {"role": "system", "content": "sys"}
        await p.aclose()


# -- hosted web_search ---------------------------------------------------------------------------

SEARCH = HostedTool("web_search", allowed_domains=("docs.python.org", "example.test"))


async def test_anthropic_web_search_server_tool_wire_format() -> None:
    with FakeProvider() as fake:
        fake.script(Reply(text="found", web_search=WebSearch("asyncio timeout")), Reply(text="again"))
        p = make(fake, "anthropic")
        req = request(hosted_tools=(SEARCH,))
        fin = finished(await collect(p, req))
        allowed = ["docs.python.org", "example.test"]
        assert fake.requests[0].body["tools"] == [
            {"type": "web_search_20250305", "name": "web_search", "allowed_domains": allowed}]
        assert [o["block"]["type"] for o in fin.message.opaque] == ["server_tool_use", "web_search_tool_result"]
        assert fin.message.opaque[0]["block"]["input"] == {"query": "asyncio timeout"}
        assert fin.message.tool_calls == ()  # a server tool is not ours to run
        await collect(p, ModelRequest("m1", "", (*req.messages, fin.message, UserMessage("more")),
                                      hosted_tools=(HostedTool("web_search", blocked_domains=("bad.test",)),)))
        body = fake.requests[1].body
        assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search", "blocked_domains": ["bad.test"]}]
        assert [b["type"] for b in body["messages"][1]["content"]] == ["server_tool_use", "web_search_tool_result",
                                                                      "text"]
        await p.aclose()


async def test_responses_web_search_tool_wire_format() -> None:
    with FakeProvider() as fake:
        fake.script(Reply(text="found", web_search=WebSearch("q")))
        p = make(fake, "openai-responses")
        fin = finished(await collect(p, request(hosted_tools=(
            HostedTool("web_search", allowed_domains=("a.test", "b.test"), blocked_domains=("b.test",)),))))
        assert fake.requests[0].body["tools"] == [{"type": "web_search", "filters": {"allowed_domains": ["a.test"]}}]
        assert [o["item"]["type"] for o in fin.message.opaque] == ["web_search_call"]
        with pytest.raises(ProviderError) as e:
            await collect(p, request(hosted_tools=(HostedTool("web_search", blocked_domains=("x.test",)),)))
        assert e.value.category == "unsupported" and "allowed_domains" in str(e.value)
        assert len(fake.requests) == 1  # refused before sending
        await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_hosted_tools_supported_says_which_api_takes_them(api: str) -> None:
    with FakeProvider() as fake:
        p = make(fake, api)
        expected = frozenset() if api == "openai-chat" else frozenset({"web_search"})
        assert p.hosted_tools_supported == expected
        if api == "openai-chat":
            with pytest.raises(ProviderError) as e:
                await collect(p, request(hosted_tools=(SEARCH,)))
            assert e.value.category == "unsupported" and not fake.requests
        await p.aclose()


def test_the_model_itself_may_come_from_the_environment(tmp_path: Path) -> None:
    data = {"model": "{env:ZUNO_TEST_MODEL}"}
    c = cfg(tmp_path, data, {"ZUNO_TEST_MODEL": "anthropic/from-env"})
    assert build_provider(c, environ={"ANTHROPIC_API_KEY": "a"}).id == "anthropic/from-env"
    with pytest.raises(ConfigError) as e:
        build_provider(cfg(tmp_path, data), environ={"ANTHROPIC_API_KEY": "a"})
    assert "config key model" in str(e.value) and "ZUNO_TEST_MODEL" in str(e.value)


# -- retries and timeouts from the config --------------------------------------------------------

def _box(url: str, api: str, **options: Any) -> dict[str, Any]:
    return {"model": "box/m", "provider": {"box": {"api": api, "options": {"baseURL": url, "apiKey": "k", **options}}}}


def test_retry_and_timeout_defaults(tmp_path: Path) -> None:
    p = build_provider(cfg(tmp_path, _box("http://127.0.0.1:9/v1", "openai-chat")))
    assert p.retry.max_attempts == MAX_ATTEMPTS == limits.PROVIDER_MAX_RETRIES_DEFAULT + 1
    assert p.settings.read_timeout_s * 1000 == limits.PROVIDER_TIMEOUT_DEFAULT_MS
    assert p.settings.connect_timeout_s * 1000 == limits.PROVIDER_CONNECT_TIMEOUT_DEFAULT_MS


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("maxRetries", limits.PROVIDER_MAX_RETRIES_CEILING + 1, "maxRetries"),
    ("maxRetries", -1, "maxRetries"),
    ("maxRetries", "3", "maxRetries"),
    ("timeout", 0, "timeout"),
    ("timeout", limits.PROVIDER_TIMEOUT_MAX_MS + 1, "timeout"),
    ("connectTimeout", 0, "connectTimeout"),
])
def test_retry_and_timeout_out_of_range_name_the_key(tmp_path: Path, key: str, value: Any, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        cfg(tmp_path, _box("http://127.0.0.1:9/v1", "openai-chat", **{key: value}))
    assert f"provider.box.options.{needle}" in str(e.value)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("retries", [0, 1, limits.PROVIDER_MAX_RETRIES_CEILING])
async def test_max_retries_from_the_config_bounds_the_attempts(tmp_path: Path, api: str, retries: int) -> None:
    with FakeProvider() as fake:
        url = fake.root_url if api == "anthropic" else fake.base_url
        # Retry-After 0: no backoff wait between the attempts.
        fake.script(*[Fail(503, retry_after="0") for _ in range(retries + 2)])
        p = build_provider(cfg(tmp_path, _box(url, api, maxRetries=retries)))
        outcome = RequestOutcome()
        with pytest.raises(ProviderError) as e:
            await collect(p, request(), outcome)
        assert len(outcome.attempts) == retries + 1 == len(fake.requests)
        assert fake.pending == 1  # the attempt one more retry would have made is never sent
        assert f"provider.box.options.maxRetries = {retries}" in str(e.value)
        await p.aclose()


@pytest.mark.parametrize("api", APIS)
async def test_the_timeout_from_the_config_ends_a_stalled_stream(tmp_path: Path, api: str) -> None:
    with FakeProvider() as fake:
        url = fake.root_url if api == "anthropic" else fake.base_url
        stall = 3.0
        fake.script(Reply(text=[], stall_s=stall), Reply(text="never asked"))
        p = build_provider(cfg(tmp_path, _box(url, api, maxRetries=0, timeout=300)))
        outcome = RequestOutcome()
        with pytest.raises(ProviderError) as e:
            await collect(p, request(), outcome)
        (attempt,) = outcome.attempts
        assert e.value.category == "timeout" == attempt.error_category
        assert attempt.ended_at - attempt.started_at < stall  # it gave up before the server spoke
        assert "provider.box.options.timeout = 300 ms" in str(e.value)
        assert fake.pending == 1
        await p.aclose()


async def test_a_permanent_failure_names_no_retry_knob(tmp_path: Path) -> None:
    with FakeProvider() as fake:
        fake.script(Fail(400))
        p = build_provider(cfg(tmp_path, _box(fake.base_url, "openai-chat", maxRetries=5)))
        with pytest.raises(ProviderError) as e:
            await collect(p, request())
        assert e.value.category == "bad_request" and "maxRetries" not in str(e.value)
        await p.aclose()
