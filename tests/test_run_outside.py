"""``zuno run`` and the agent API tried from outside, the way a user breaks them: config mistakes,
servers that answer with something other than an event stream or end one early, a model calling a
tool the mode does not offer, prompts that are blank or not UTF-8, and resuming a session that has
no agent conversation. Each case is a defect found by outside testing (issue 13)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import zuno

from conftest import zuno_env
from fake_provider import Call, Fail, FakeProvider, Reply

APIS = ["openai-chat", "openai-responses", "anthropic"]
SECRET = "sk-outside-DO-NOT-LEAK-41c2"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def write_config(root: Path, provider: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    cfg: dict[str, Any] = {"model": "fake/m1", "provider": {"fake": provider}}
    cfg.update(extra or {})
    (root / "zuno.json").write_text(json.dumps(cfg))


def provider_for(base_url: str, api: str = "openai-chat", **options: Any) -> dict[str, Any]:
    return {
        "api": api,
        "options": {"baseURL": base_url, "apiKey": "{env:FAKE_KEY}", **options},
        "models": {"m1": {"context": 65536, "output": 2048}},
    }


def agent_run(workspace: Path, base_url: str, api: str, prompt: str) -> Any:
    """One run of the Python API's agent against ``base_url`` (the fake, or a raw server)."""
    overrides = {"model": "fake/m1", "provider": {"fake": provider_for(base_url, api)}}
    overrides["provider"]["fake"]["options"]["apiKey"] = "k"

    async def main() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent() as agent:
                return await agent.run(prompt)

    return asyncio.run(main())


def fake_base(fake: FakeProvider, api: str) -> str:
    return fake.root_url if api == "anthropic" else fake.base_url


def zuno_cli(root: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=zuno_env({"FAKE_KEY": SECRET, "NO_COLOR": "1"}),
        timeout=90,
    )


def one_clear_line(p: subprocess.CompletedProcess[bytes]) -> str:
    err = p.stderr.decode()
    assert "Traceback" not in err and SECRET not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


# -- a server that answers whatever bytes it is given ---------------------------------------------


class RawServer:
    """A loopback HTTP server answering each POST with the next scripted (status, content type,
    body), complete and well framed (Content-Length): what a proxy, a web UI or a broken
    compatible server really sends."""

    def __init__(self, *answers: tuple[int, str, bytes]) -> None:
        self.answers = list(answers)
        self.paths: list[str] = []
        self.bodies: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                outer.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                outer.paths.append(self.path)
                exhausted = (500, "application/json", b'{"error": {"message": "no more"}}')
                status, ctype, body = outer.answers.pop(0) if outer.answers else exhausted
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def base(self, api: str) -> str:
        root = f"http://127.0.0.1:{self.server.server_address[1]}"
        return root if api == "anthropic" else root + "/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def raw() -> Iterator[list[RawServer]]:
    made: list[RawServer] = []
    yield made
    for s in made:
        s.close()


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m1",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


# -- config mistakes: one line naming the key, exit 2, nothing written ----------------------------


@pytest.mark.parametrize(
    ("base_url", "words"),
    [
        ("127.0.0.1:8080/v1", "must start with http:// or https://"),
        ("localhost:8080/v1", "must start with http:// or https://"),
        ("http:///v1", "names no host"),
        ("http://127.0.0.1:8080/v1/chat/completions", "ends with the endpoint path /chat/completions"),
    ],
)
def test_a_bad_base_url_is_a_config_error_and_nothing_is_sent(workspace: Path, base_url: str, words: str) -> None:
    write_config(workspace, provider_for(base_url))
    p = zuno_cli(workspace, "run", "hello")
    line = one_clear_line(p)
    assert p.returncode == 2
    assert "provider.fake.options.baseURL" in line and words in line
    assert not (workspace / ".zuno").exists()


def test_a_base_url_from_the_environment_is_not_quoted(workspace: Path) -> None:
    prov = provider_for("{env:ODD_BASE}")
    write_config(workspace, prov)
    p = subprocess.run(
        [sys.executable, "-m", "zuno", "run", "hello", "--root", str(workspace)],
        input=b"", capture_output=True, timeout=60,
        env=zuno_env({"FAKE_KEY": SECRET, "ODD_BASE": "secrethost.internal:9/v1"}),
    )
    line = one_clear_line(p)
    assert p.returncode == 2 and "baseURL" in line and "secrethost" not in line


@pytest.mark.parametrize(
    ("model", "words"),
    [({"context": 1000, "output": 2048}, "output = 2048 is not below context = 1000"),
     ({"context": 1000, "output": 1000}, "output = 1000 is not below context = 1000")],
)
def test_a_model_whose_output_does_not_fit_its_context_is_a_config_error(
    workspace: Path, model: dict[str, int], words: str
) -> None:
    prov = provider_for("http://127.0.0.1:9/v1")
    prov["models"] = {"m1": model}
    write_config(workspace, prov)
    p = zuno_cli(workspace, "run", "hello")
    line = one_clear_line(p)
    assert p.returncode == 2
    assert "provider.fake.models.m1" in line and words in line
    assert not (workspace / ".zuno").exists()


def test_a_small_context_with_no_output_given_gets_a_quarter_of_it_for_the_answer() -> None:
    from zuno.agent.providers import resolve_settings

    prov = provider_for("http://127.0.0.1:9/v1", apiKey=SECRET)
    for models, output in (({"m1": {"context": 4096}}, 1024), ({"m1": {"context": 65536}}, 8192), ({}, 8192)):
        config = zuno.Config.model_validate({"model": "fake/m1", "provider": {"fake": {**prov, "models": models}}})
        settings = resolve_settings(config)
        assert settings.output_tokens == output, (models, settings.output_tokens)


# -- a server that does not answer with a (complete, readable) event stream -----------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("ctype", "body"),
    [("application/json", b'{"hello": "world"}'), ("text/html", b"<html><body>Sign in</body></html>\n\n<p>x</p>")],
)
def test_a_200_that_is_not_an_event_stream_fails_at_once_naming_the_base_url(
    workspace: Path, raw: list[RawServer], api: str, ctype: str, body: bytes
) -> None:
    server = RawServer((200, ctype, body))
    raw.append(server)
    write_config(workspace, provider_for(server.base(api), api))
    p = zuno_cli(workspace, "run", "hello", "--json")
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "provider_error"
    assert "protocol" in out["detail"] and f"HTTP 200 with {ctype}, not an event stream" in out["detail"]
    assert "options.baseURL" in out["detail"] and out["final_text"] == ""
    assert len(server.paths) == 1  # not retried: asking again gets the same page
    shown = zuno_cli(workspace, "show", out["session"])
    assert shown.returncode == 0 and b"not an event stream" in shown.stdout


def test_a_chat_stream_that_ends_without_its_finish_is_not_a_final(workspace: Path, raw: list[RawServer]) -> None:
    cut = chat_chunk({"role": "assistant", "content": "Hal"})  # no finish_reason, no [DONE]
    whole = chat_chunk({"role": "assistant", "content": "Hello"}) + chat_chunk({}, "stop") + b"data: [DONE]\n\n"
    server = RawServer((200, "text/event-stream", cut), (200, "text/event-stream", whole))
    raw.append(server)
    write_config(workspace, provider_for(server.base("openai-chat"), "openai-chat", maxRetries=1))
    p = zuno_cli(workspace, "run", "hello", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "final" and out["final_text"] == "Hello"
    assert len(server.paths) == 2  # the broken-off answer was asked again
    assert b"broke off (connection)" in p.stderr


def test_a_chat_stream_ended_by_done_alone_is_complete(workspace: Path, raw: list[RawServer]) -> None:
    body = chat_chunk({"role": "assistant", "content": "Hi"}) + b"data: [DONE]\n\n"
    server = RawServer((200, "text/event-stream", body))
    raw.append(server)
    write_config(workspace, provider_for(server.base("openai-chat")))
    p = zuno_cli(workspace, "run", "hello", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["final_text"] == "Hi"


@pytest.mark.parametrize(
    ("api", "body", "words"),
    [
        ("openai-chat", b"data: {not json\n\n", "an event whose data is not JSON: '{not json'"),
        ("anthropic", b"event: message_start\ndata: {oops\n\n", "an event whose data is not JSON: '{oops'"),
        ("openai-chat", b'data: "\xff\xfe"\n\n', "an event that is not UTF-8"),
    ],
)
def test_an_unreadable_event_is_a_protocol_error_not_an_internal_one(
    workspace: Path, raw: list[RawServer], api: str, body: bytes, words: str
) -> None:
    server = RawServer((200, "text/event-stream", body))
    raw.append(server)
    write_config(workspace, provider_for(server.base(api), api))
    p = zuno_cli(workspace, "run", "hello", "--json")
    assert p.returncode == 1
    detail = json.loads(p.stdout)["detail"]
    assert "protocol" in detail and words in detail
    assert "JSONDecodeError" not in detail and "UnicodeDecodeError" not in detail


# -- a tool the mode does not offer ---------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_plan_mode_refuses_a_write_the_model_was_not_offered(workspace: Path, fake: FakeProvider, api: str) -> None:
    fake.script(
        Reply(calls=[Call("write", json.dumps({"path": "made.txt", "content": "x"})),
                     Call("read", '{"path": "zuno.json"}')]),
        Reply("ok"),
    )
    write_config(workspace, provider_for(fake_base(fake, api), api))
    p = zuno_cli(workspace, "run", "look around", "--mode", "plan", "--json")
    assert p.returncode == 0, p.stderr
    assert not (workspace / "made.txt").exists()
    offered = {t.get("name") or t.get("function", {}).get("name") for t in fake.requests[0].body.get("tools", [])}
    assert "write" not in offered and "read" in offered
    assert "⊘ write made.txt (blocked: unavailable)" in p.stderr.decode()
    sent = json.dumps(fake.requests[1].body)
    assert "tool 'write' is not offered now: Plan mode offers only read-only and planning tools" in sent
    out = json.loads(p.stdout)
    shown = json.loads(zuno_cli(workspace, "show", out["session"], "--json").stdout)
    assert "not offered now" in json.dumps(shown)


def test_view_image_is_refused_when_the_model_takes_no_images(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "pic.png").write_bytes(
        bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                      "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")
    )
    fake.script(Reply(calls=[Call("view_image", '{"path": "pic.png"}')]), Reply("ok"))
    # chord's surface has view_image; images not set: the model takes none, so it is not offered
    write_config(workspace, provider_for(fake.base_url), {"profile": "chord"})
    p = zuno_cli(workspace, "run", "look", "--json")
    assert p.returncode == 0, p.stderr
    sent = json.dumps(fake.requests[1].body)
    assert "tool 'view_image' is not offered now: the active model does not accept images" in sent
    assert "image_url" not in sent


# -- prompts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin", "words"),
    [
        ((), b"fix \xff\xfe this\n", "the prompt on standard input is not UTF-8 text (byte 0xff at offset 4)"),
        (("--json",), b"\xc3", "the prompt on standard input is not UTF-8 text (byte 0xc3 at offset 0)"),
        (("   ",), None, "the prompt given as an argument is empty"),
        (("\t\n", "--json"), None, "the prompt given as an argument is empty"),
        ((b"a\xffb".decode("utf-8", "surrogateescape"),), None, "the prompt given as an argument is not UTF-8"),
    ],
)
def test_a_prompt_that_is_not_text_or_blank_is_a_usage_error(
    workspace: Path, fake: FakeProvider, args: tuple[str, ...], stdin: bytes | None, words: str
) -> None:
    fake.script(Reply("should not be asked"))
    write_config(workspace, provider_for(fake.base_url))
    p = zuno_cli(workspace, "run", *args, stdin=stdin)
    line = one_clear_line(p)
    assert p.returncode == 2 and words in line and p.stdout == b""
    assert fake.requests == [] and not (workspace / ".zuno").exists()


# -- resuming a session that has no agent conversation ---------------------------------------------


def test_resume_of_a_session_made_by_zuno_call_asks_for_a_prompt(workspace: Path, fake: FakeProvider) -> None:
    fake.script(Reply("done with it"))
    write_config(workspace, provider_for(fake.base_url))
    call = zuno_cli(workspace, "call", "read", '{"path": "zuno.json"}', "--json")
    assert call.returncode == 0
    sessions = json.loads(zuno_cli(workspace, "sessions", "--json").stdout)["sessions"]
    sid = sessions[0]["id"]
    for extra in ((), ("--json",)):
        p = zuno_cli(workspace, "resume", sid, *extra)
        line = one_clear_line(p)
        assert p.returncode == 2 and f"session {sid} has no agent conversation to continue" in line
        assert f'zuno resume {sid} "…"' in line and p.stdout == b""
    assert fake.requests == []
    p = zuno_cli(workspace, "resume", sid, "now summarise", "--json")  # with a prompt it goes on
    assert p.returncode == 0 and json.loads(p.stdout)["final_text"] == "done with it"
    assert "now summarise" in json.dumps(fake.requests[0].body)


def test_agent_run_without_a_prompt_on_a_new_session_raises(
    workspace: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", SECRET)
    write_config(workspace, provider_for(fake.base_url))

    from zuno.agent.api import NothingToResume

    async def main() -> None:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent() as agent:
                with pytest.raises(NothingToResume, match="has no agent conversation to continue"):
                    await agent.run()

    asyncio.run(main())
    assert fake.requests == []


def test_a_failed_provider_request_reaches_the_user_without_the_key(workspace: Path, fake: FakeProvider) -> None:
    # Held (probed): a 401 whose body echoes the key is shown redacted, in the line and the record.
    fake.script(Fail(401, {"error": {"message": f"bad key {SECRET}", "type": "invalid_request_error"}}))
    write_config(workspace, provider_for(fake.base_url))
    p = zuno_cli(workspace, "run", "hi", "--json")
    assert p.returncode == 1 and SECRET.encode() not in p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "provider_error" and "auth" in out["detail"] and "[redacted]" in out["detail"]
    db = (workspace / ".zuno" / "zuno.db").read_bytes()
    assert SECRET.encode() not in db


@pytest.mark.parametrize("api", APIS)
def test_an_html_error_page_is_shown_as_its_text(workspace: Path, raw: list[RawServer], api: str) -> None:
    page = (
        "<!DOCTYPE html><html><head><title>Attention Required! | Gateway</title><style>"
        + "body{margin:0}" * 100
        + "</style></head><body><h1>Sorry, you have been blocked</h1><script>var x = 1;</script>"
        "<p>Ray &amp; ID 42</p></body></html>"
    ).encode()
    server = RawServer((403, "text/html", page))
    raw.append(server)
    write_config(workspace, provider_for(server.base(api), api))
    p = zuno_cli(workspace, "run", "hello", "--json")
    assert p.returncode == 1
    detail = json.loads(p.stdout)["detail"]
    shown = "(an HTML page) Attention Required! | Gateway: Sorry, you have been blocked Ray & ID 42"
    assert f"auth — HTTP 403: {shown}" in detail
    assert "<" not in detail and "margin" not in detail


def test_resume_of_an_unknown_session_gives_advice_that_fits_resume(workspace: Path, fake: FakeProvider) -> None:
    write_config(workspace, provider_for(fake.base_url))
    assert zuno_cli(workspace, "call", "read", '{"path": "zuno.json"}').returncode == 0
    p = zuno_cli(workspace, "resume", "ses_0000000000000001")
    line = one_clear_line(p)
    assert p.returncode == 2 and "no session 'ses_0000000000000001'" in line
    assert "--session" not in line and 'start a new one with zuno run "…"' in line


@pytest.mark.parametrize("api", APIS)
def test_calls_with_a_repeated_id_each_keep_their_own_result(workspace: Path, fake: FakeProvider, api: str) -> None:
    fake.script(
        Reply(calls=[Call("read", '{"path": "zuno.json"}', id="dup"), Call("glob", '{"pattern": "*.json"}', id="dup")]),
        Reply("ok"),
    )
    write_config(workspace, provider_for(fake_base(fake, api), api))
    p = zuno_cli(workspace, "run", "hi", "--json")
    assert p.returncode == 0, p.stderr
    err = p.stderr.decode()
    assert "✓ read zuno.json" in err and "✓ glob *.json" in err
    body = fake.requests[1].body
    if api == "openai-chat":
        sent_calls = [c["id"] for m in body["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
        results = [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    elif api == "anthropic":
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        sent_calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [(b["tool_use_id"], json.dumps(b["content"])) for b in blocks if b["type"] == "tool_result"]
    else:
        sent_calls = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
        results = [(i["call_id"], i["output"]) for i in body["input"] if i.get("type") == "function_call_output"]
    assert sent_calls == ["dup", "dup_2"]
    assert [r[0] for r in results] == sent_calls
    assert "fake/m1" in results[0][1] and "zuno.json" in results[1][1] and "fake/m1" not in results[1][1]
    session = json.loads(p.stdout)["session"]
    shown = zuno_cli(workspace, "show", session, "--json")
    assert shown.returncode == 0 and "dup_2" in shown.stdout.decode()


def test_empty_and_repeated_call_ids_are_made_distinct() -> None:
    from zuno.agent.call_ids import unique_call_ids
    from zuno.agent.types import AssistantMessage, Finished, ToolCall, Usage

    def fin(*ids: str) -> Finished:
        return Finished(AssistantMessage("", tuple(ToolCall(i, "read", "{}") for i in ids)), Usage(), "tool_calls")

    same = fin("a", "b")
    assert unique_call_ids(same) is same
    assert [c.id for c in unique_call_ids(fin("", "", "x")).message.tool_calls] == ["call_1", "call_2", "x"]
    assert [c.id for c in unique_call_ids(fin("a", "a", "a_2")).message.tool_calls] == ["a", "a_3", "a_2"]


# -- compatible servers' tool-call streams ---------------------------------------------------------


def _read_call_then_final(*tool_deltas: list[dict[str, Any]]) -> tuple[bytes, bytes]:
    first = b"".join(chat_chunk({"tool_calls": d}) for d in tool_deltas)
    first += chat_chunk({}, "tool_calls") + b"data: [DONE]\n\n"
    final = chat_chunk({"role": "assistant", "content": "read it"}) + chat_chunk({}, "stop") + b"data: [DONE]\n\n"
    return first, final


def _two_answers(workspace: Path, raw: list[RawServer], first: bytes, final: bytes, prompt: str) -> tuple[Any, Any]:
    """``zuno run --json`` against a raw server giving these two answers: the server, and the run's
    JSON object with its durable events under "events"."""
    server = RawServer((200, "text/event-stream", first), (200, "text/event-stream", final))
    raw.append(server)
    write_config(workspace, provider_for(server.base("openai-chat")))
    p = zuno_cli(workspace, "run", prompt, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    out["events"] = json.loads(zuno_cli(workspace, "events", "--session", out["session"], "--json").stdout)["events"]
    return server, out


@pytest.mark.parametrize(
    "deltas",
    [
        # no "index" at all, the arguments in pieces after the head (Gemini's and some proxies' shape)
        [
            [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": ""}}],
            [{"function": {"arguments": '{"path": '}}],
            [{"function": {"arguments": '"a.txt"}'}}],
        ],
        # the arguments as a JSON object, not a string (some local servers)
        [[{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": {"path": "a.txt"}}}]],
        # the name sent again with every piece
        [
            [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"pa'}}],
            [{"index": 0, "function": {"name": "read", "arguments": 'th": "a.txt"}'}}],
        ],
    ],
    ids=["no-index", "object-arguments", "repeated-name"],
)
def test_a_compatible_servers_tool_call_shapes_make_one_whole_call(
    workspace: Path, raw: list[RawServer], deltas: list[list[dict[str, Any]]]
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    _, out = _two_answers(workspace, raw, *_read_call_then_final(*deltas), "read a.txt")
    assert out["stop_reason"] == "final" and out["final_text"] == "read it" and out["steps"] == 1
    started = [e["data"]["tool"] for e in out["events"] if e["kind"] == "call-started"]
    settled = [e["data"]["outcome"] for e in out["events"] if e["kind"] == "call-settled"]
    assert (started, settled) == (["read"], ["ok"]), out


@pytest.mark.parametrize("with_ids", [True, False])
def test_unindexed_whole_calls_one_per_delta_stay_separate_calls(
    workspace: Path, raw: list[RawServer], with_ids: bool
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")

    def whole(n: int, path: str) -> list[dict[str, Any]]:
        head: dict[str, Any] = {"id": f"c{n}"} if with_ids else {}
        return [{**head, "type": "function", "function": {"name": "read", "arguments": json.dumps({"path": path})}}]

    _, out = _two_answers(workspace, raw, *_read_call_then_final(whole(1, "a.txt"), whole(2, "b.txt")), "read both")
    settled = [e["data"]["outcome"] for e in out["events"] if e["kind"] == "call-settled"]
    assert settled == ["ok", "ok"], out


# -- a server whose context is smaller than the configured one -------------------------------------

# llama.cpp's server, started with a context smaller than the model config claims (its default).
LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9120,
        "n_ctx": 4096,
    }
}
VLLM_OVERFLOW = {
    "object": "error",
    "message": "This model's maximum context length is 4096 tokens. However, you requested 9120 tokens.",
    "type": "BadRequestError",
    "code": 400,
}


def _overflow_run(workspace: Path, fake: FakeProvider, *turns: Any) -> tuple[Any, Any]:
    (workspace / "big.txt").write_text("".join(f"line {i} of the filler text\n" for i in range(1500)))
    overrides = {
        "model": "fake/m1",
        "provider": {"fake": provider_for(fake.base_url)},
    }
    overrides["provider"]["fake"]["options"]["apiKey"] = "k"
    fake.script(Reply(calls=[Call("read", json.dumps({"path": "big.txt", "limit": 1500}))]), Reply("read it"))
    fake.script(*turns)

    async def main() -> tuple[Any, Any]:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent() as agent:
                first = await agent.run("read big.txt")
                assert first.final_text == "read it"
                return await agent.run("now summarise it"), agent.transcript.requests()

    return asyncio.run(main())


@pytest.mark.parametrize("body", [LLAMA_OVERFLOW, VLLM_OVERFLOW], ids=["llama.cpp", "vllm"])
def test_a_request_the_server_finds_too_long_is_compacted_and_sent_again(
    workspace: Path, fake: FakeProvider, body: dict[str, Any]
) -> None:
    result, requests = _overflow_run(
        workspace, fake, Fail(400, body=body), Reply("the summary of reading big.txt"), Reply("short answer")
    )
    assert result.stop_reason == "final" and result.final_text == "short answer"
    assert [r.purpose for r in requests[2:]] == ["turn", "compaction", "turn"]
    refused, again = fake.requests[2].body, fake.requests[4].body
    assert len(json.dumps(again)) < len(json.dumps(refused)) / 2  # the file's text went into the summary
    assert "the summary of reading big.txt" in json.dumps(again) and "now summarise it" in json.dumps(again)


def test_a_request_still_too_long_after_compacting_stops_naming_the_context_key(
    workspace: Path, fake: FakeProvider
) -> None:
    result, _ = _overflow_run(
        workspace, fake, Fail(400, body=LLAMA_OVERFLOW), Reply("a summary"), Fail(400, body=LLAMA_OVERFLOW)
    )
    assert result.stop_reason == "provider_error"
    assert "the request exceeds the available context size" in result.detail
    assert "which Zuno takes to be 65536 tokens: set provider.fake.models.m1.context" in result.detail
    assert "llama.cpp: --ctx-size" in result.detail
    assert len(fake.requests) == 5 and fake.pending == 0  # compacted once, not again and again


def test_a_first_request_too_long_with_nothing_to_compact_stops_at_once(workspace: Path, fake: FakeProvider) -> None:
    fake.script(Fail(400, body=LLAMA_OVERFLOW))
    result = agent_run(workspace, fake.base_url, "openai-chat", "x " * 20_000)
    assert result.stop_reason == "provider_error" and "set provider.fake.models.m1.context" in result.detail
    assert len(fake.requests) == 1


# -- a thinking model over Chat Completions (DeepSeek, llama.cpp, vLLM) -----------------------------


def test_the_reasoning_of_an_answer_with_tool_calls_goes_back_with_it(workspace: Path, fake: FakeProvider) -> None:
    # DeepSeek's thinking mode refuses (400) a request whose earlier tool-calling answer lacks its
    # reasoning_content; before, Zuno dropped it, so the second request of every such turn failed.
    (workspace / "a.txt").write_text("alpha\n")
    fake.script(
        Reply(calls=[Call("read", json.dumps({"path": "a.txt"}))], reasoning="I should read a.txt first."),
        Reply("it says alpha", reasoning="The file holds alpha."),
        Reply(calls=[Call("read", json.dumps({"path": "a.txt"}))]),  # DeepSeek at times sends none
        Reply("again: alpha"),
    )
    write_config(workspace, provider_for(fake.base_url))
    p = zuno_cli(workspace, "run", "what is in a.txt?", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["final_text"] == "it says alpha"  # the reasoning is not the answer
    assert zuno_cli(workspace, "run", "--continue", "and now?", "--json").returncode == 0

    def assistants(i: int) -> list[dict[str, Any]]:
        return [m for m in fake.requests[i].body["messages"] if m["role"] == "assistant"]

    (with_calls,) = assistants(1)
    assert with_calls["reasoning_content"] == "I should read a.txt first." and with_calls["tool_calls"]
    calls_again, final = assistants(2)  # the next turn, from the durable transcript
    assert calls_again["reasoning_content"] == "I should read a.txt first."
    assert final == {"role": "assistant", "content": "it says alpha"}  # no tool calls: not sent back
    # A tool-calling answer that came with no reasoning is sent back with an empty one.
    assert assistants(3)[-1]["reasoning_content"] == "" and assistants(3)[-1]["tool_calls"]


def test_a_server_that_sends_no_reasoning_gets_none_back(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    fake.script(Reply(calls=[Call("read", json.dumps({"path": "a.txt"}))]), Reply("alpha"))
    write_config(workspace, provider_for(fake.base_url))
    assert zuno_cli(workspace, "run", "read a.txt", "--json").returncode == 0
    assert "reasoning" not in json.dumps(fake.requests[1].body["messages"])


# -- an answer the provider paused (Anthropic's pause_turn, in a long hosted search) ----------------


def test_a_paused_answer_is_sent_back_and_the_turn_goes_on(workspace: Path, fake: FakeProvider) -> None:
    # Before, pause_turn read as an ordinary final: the turn ended with the half-done answer.
    from fake_provider import WebSearch

    fake.script(
        Reply(text="Searching. ", web_search=WebSearch("asyncio timeout"), stop_reason="pause_turn"),
        Reply(text="Found it: asyncio.timeout."),
    )
    result = agent_run(workspace, fake.root_url, "anthropic", "how do I time out a coroutine?")
    assert result.stop_reason == "final" and result.final_text == "Searching. Found it: asyncio.timeout."
    assert len(fake.requests) == 2
    again = fake.requests[1].body["messages"]
    # sent back as it was, the last message, with no user message after it
    assert [m["role"] for m in again] == ["user", "assistant"]
    assert [b["type"] for b in again[1]["content"]] == ["server_tool_use", "web_search_tool_result", "text"]


def test_paused_answers_are_sent_back_a_bounded_number_of_times(workspace: Path, fake: FakeProvider) -> None:
    from zuno import limits

    n = limits.PAUSED_ANSWER_CONTINUATIONS
    fake.script(*[Reply(text=f"{i} ", stop_reason="pause_turn") for i in range(n + 3)])
    result = agent_run(workspace, fake.root_url, "anthropic", "go")
    assert len(fake.requests) == n + 1 and result.stop_reason == "final"
    assert result.final_text == "".join(f"{i} " for i in range(n + 1))


def test_a_tool_calls_extra_content_goes_back_with_it(workspace: Path, raw: list[RawServer]) -> None:
    # Gemini's OpenAI-compatible endpoint puts a thought signature in each tool call's
    # extra_content and refuses (400) a later request whose tool call lacks it; before, it was dropped.
    (workspace / "a.txt").write_text("alpha\n")
    signature = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
    first, final = _read_call_then_final(
        [{"index": 0, "id": "c1", "type": "function", "extra_content": signature,
          "function": {"name": "read", "arguments": json.dumps({"path": "a.txt"})}}]
    )
    server = RawServer((200, "text/event-stream", first), (200, "text/event-stream", final))
    raw.append(server)
    write_config(workspace, provider_for(server.base("openai-chat")))
    p = zuno_cli(workspace, "run", "read a.txt", "--json")
    assert p.returncode == 0, p.stderr
    sent = json.loads(server.bodies[1])["messages"]
    (call,) = next(m for m in sent if m["role"] == "assistant")["tool_calls"]
    assert call["extra_content"] == signature and call["id"] == "c1"
    assert "extra_content" not in json.loads(server.bodies[0]).get("messages", [{}])[-1]


def test_openrouters_reasoning_details_are_joined_and_go_back_with_the_tool_calls(
    workspace: Path, raw: list[RawServer]
) -> None:
    # OpenRouter streams reasoning_details in pieces (Gemini's thought signature among them) and
    # needs them back on a tool-calling answer; before, they were dropped.
    (workspace / "a.txt").write_text("alpha\n")

    def details(*pieces: dict[str, Any]) -> bytes:
        return chat_chunk({"reasoning": "".join(p.get("text", "") for p in pieces), "reasoning_details": list(pieces)})

    head = details({"type": "reasoning.text", "index": 0, "text": "I will ", "format": "google-gemini-v1"})
    head += details({"type": "reasoning.text", "index": 0, "text": "read it."})
    head += details({"type": "reasoning.encrypted", "index": 1, "data": "ZW5j", "id": "tool_c1"})
    first, final = _read_call_then_final(
        [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}}]
    )
    server = RawServer((200, "text/event-stream", head + first), (200, "text/event-stream", final))
    raw.append(server)
    write_config(workspace, provider_for(server.base("openai-chat")))
    p = zuno_cli(workspace, "run", "read a.txt", "--json")
    assert p.returncode == 0, p.stderr
    sent = next(m for m in json.loads(server.bodies[1])["messages"] if m["role"] == "assistant")
    assert sent["reasoning_details"] == [
        {"type": "reasoning.text", "index": 0, "text": "I will read it.", "format": "google-gemini-v1"},
        {"type": "reasoning.encrypted", "index": 1, "data": "ZW5j", "id": "tool_c1"},
    ]
    assert "reasoning" not in sent  # the details alone: "reasoning" is only their text


def test_a_reused_call_id_gets_its_fresh_one_without_walking_the_sessions_ids() -> None:
    # A server that names every answer's call "call_1": before, the fresh id was found by counting
    # up from call_1_1 past every one the session had, so each step cost more than the last.
    from zuno.agent.call_ids import unique_call_ids
    from zuno.agent.types import AssistantMessage, Finished, ToolCall, Usage

    class Counted(set[str]):
        looks = 0

        def __contains__(self, item: object) -> bool:
            Counted.looks += 1
            return super().__contains__(item)

    used = Counted({"call_1", *(f"call_1_{n}" for n in range(1, 10_001))})
    fin = Finished(AssistantMessage("", (ToolCall("call_1", "read", "{}"),)), Usage(), "tool_calls", "tool_calls")
    (call,) = unique_call_ids(fin, used).message.tool_calls
    assert call.id not in used and call.id.startswith("call_1_")
    assert Counted.looks < 10, Counted.looks
