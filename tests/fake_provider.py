"""A loopback model server that speaks three real wire APIs and plays a script.

It is a real HTTP/1.1 server on 127.0.0.1 (a thread per connection, chunked transfer encoding,
keep-alive), so the official SDKs talk to it exactly as they talk to a hosted model:

- ``POST /v1/chat/completions`` — OpenAI Chat Completions; ``"stream": true`` answers with SSE
  ``data: {chat.completion.chunk}`` lines ending with ``data: [DONE]`` (a last chunk with empty
  ``choices`` carries ``usage``), otherwise one ``chat.completion`` object.
- ``POST /v1/responses`` — OpenAI Responses; streaming answers with typed SSE ``event:`` lines
  (response.created, response.in_progress, response.output_item.added, response.content_part.added,
  response.output_text.delta/.done, response.function_call_arguments.delta/.done,
  response.web_search_call.*, response.output_item.done, response.completed|incomplete).
- ``POST /v1/messages`` — Anthropic Messages; streaming answers with message_start,
  content_block_start/delta/stop (text_delta, input_json_delta, thinking_delta, signature_delta),
  message_delta (stop_reason, usage) and message_stop.

Script API (everything a test needs)::

    from fake_provider import Call, Drop, Fail, FakeProvider, Reply, Usage, WebSearch

    with FakeProvider() as fake:                  # or: fake = FakeProvider().start(); fake.stop()
        fake.base_url                             # "http://127.0.0.1:PORT/v1" (OpenAI SDKs)
        fake.root_url                             # "http://127.0.0.1:PORT"    (Anthropic SDK)
        fake.script(                              # queue turns; each request takes the next one
            Reply(text=["Hel", "lo"]),            # text: a str (one delta) or a list (one delta each)
            Reply(calls=[Call("read", '{"path": "a"}'), Call("read", ['{"pa', 'th": "b"}'])],
                  usage=Usage(input=10, output=5, cached=3)),
            Fail(429, retry_after="1"),           # an HTTP error (body in the API's error shape)
            Fail(529, body={"type": "error", "error": {"type": "overloaded_error", "message": "x"}}),
            Drop(),                               # close the connection without an answer
        )
        ...                                       # run the code under test
        req = fake.requests[0]                    # every request, in arrival order
        req.api, req.path, req.headers, req.body  # "chat" | "responses" | "anthropic"; body is JSON
        req.received_at                           # time.time() when the request was read
        req.first_byte_at, req.text_written_at    # perf_counter() of the first SSE byte / each text delta
        req.wait_disconnected(5.0)                # True once the client closed the stream early
        fake.pending                              # turns not yet played

``Reply`` fields: ``text`` (str | list[str]), ``calls`` (list[Call]; several = parallel calls; a
``Call``'s ``arguments`` is a str or a list of chunks and is sent verbatim, malformed JSON
included; ``id`` defaults to call_1, call_2 … (toolu_1 … on Anthropic)), ``usage``
(Usage(input, output, cached): input counts all input tokens, cached ones included, as OpenAI's
APIs do; Anthropic's wire input_tokens is sent as input - cached beside cache_read_input_tokens),
``stop_reason`` (the wire value; default per API: stop/tool_calls, end_turn/tool_use,
completed), ``reasoning`` (Chat: reasoning_content deltas; Responses: a reasoning item with
encrypted_content; Anthropic: a thinking block with a signature), ``web_search`` (WebSearch(query, urls): Anthropic
server_tool_use + web_search_tool_result blocks; Responses a web_search_call item), ``delay_s``
(sleep between SSE events), ``stall_s`` (sleep after the content, before the final events — for
cancellation tests), ``cut`` (then close the connection without the final events: a stream that
breaks after output began), ``headers`` (extra response headers), ``error`` (a ``Fail``: after
the content, the API's in-stream error event instead of the final events: a stream that fails after
output began). ``Fail(status, body=None,
retry_after=None, headers=None, in_stream=False)``: ``retry_after`` is sent verbatim as
``Retry-After`` (seconds or an HTTP-date); ``in_stream`` answers 200 and sends the error as the
stream's first SSE event instead. An exhausted script answers 500 "script exhausted".
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Call", "Drop", "Fail", "FakeProvider", "Recorded", "Reply", "Usage", "WebSearch"]


@dataclass
class Usage:
    input: int = 11
    output: int = 7
    cached: int = 0


@dataclass
class Call:
    name: str
    arguments: str | list[str] = "{}"
    id: str | None = None

    def chunks(self) -> list[str]:
        return [self.arguments] if isinstance(self.arguments, str) else list(self.arguments)

    def full(self) -> str:
        return "".join(self.chunks())


@dataclass
class WebSearch:
    query: str
    urls: list[str] = field(default_factory=lambda: ["https://example.test/a"])


@dataclass
class Reply:
    text: str | list[str] = ""
    calls: list[Call] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    reasoning: str | None = None
    web_search: WebSearch | None = None
    delay_s: float = 0.0
    stall_s: float = 0.0
    cut: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    error: Fail | None = None  # after the content (and the stall): this error event, and the stream ends

    def text_chunks(self) -> list[str]:
        if isinstance(self.text, str):
            return [self.text] if self.text else []
        return list(self.text)


@dataclass
class Fail:
    status: int
    body: Any = None
    retry_after: str | None = None
    headers: dict[str, str] | None = None
    # Answer 200 and report the error as the stream's first event, as the APIs do for a failure
    # that happens after the headers went out (Anthropic: event "error"; Responses: event
    # "error"; Chat Completions: a data line holding {"error": ...}).
    in_stream: bool = False


@dataclass
class Drop:
    """Close the connection after reading the request, without a status line."""


Turn = Reply | Fail | Drop


@dataclass
class Recorded:
    api: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float
    turn: Turn | None = None
    first_byte_at: float | None = None
    text_written_at: list[float] = field(default_factory=list)
    finished: bool = False
    _disconnected: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def disconnected(self) -> bool:
        return self._disconnected.is_set()

    def wait_disconnected(self, timeout: float) -> bool:
        return self._disconnected.wait(timeout)


_APIS = {"/v1/chat/completions": "chat", "/v1/responses": "responses", "/v1/messages": "anthropic"}


class _ClientGone(Exception):
    pass


class FakeProvider:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: list[Turn] = []
        self.requests: list[Recorded] = []
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeProvider:
        owner = self

        class Handler(_Handler):
            fake = owner

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-provider", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the fake provider first"
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- the script --------------------------------------------------------------------------

    def script(self, *turns: Turn) -> FakeProvider:
        with self._lock:
            self._turns.extend(turns)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._turns)

    def _next(self, rec: Recorded) -> Turn | None:
        with self._lock:
            self.requests.append(rec)
            turn = self._turns.pop(0) if self._turns else None
            rec.turn = turn
            return turn


class _Handler(BaseHTTPRequestHandler):
    fake: FakeProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def setup(self) -> None:
        super().setup()
        # Each SSE event goes out at once, as a real streaming server sends it.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        api = _APIS.get(self.path.split("?", 1)[0])
        rec = Recorded(
            api=api or "unknown",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=time.time(),
        )
        if api is None:
            self._json(404, {"error": {"message": f"no such path {self.path}", "type": "not_found"}}, {})
            with self.fake._lock:
                self.fake.requests.append(rec)
            return
        turn = self.fake._next(rec)
        if turn is None:
            self._json(500, _error_body(api, 500, "fake provider: script exhausted"), {})
            return
        if isinstance(turn, Drop):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(turn, Fail) and turn.in_stream:
            self._stream_error(api, turn)
            return
        if isinstance(turn, Fail):
            headers = dict(turn.headers or {})
            if turn.retry_after is not None:
                headers["Retry-After"] = turn.retry_after
            body_out = turn.body if turn.body is not None else _error_body(api, turn.status, f"scripted {turn.status}")
            self._json(turn.status, body_out, headers)
            return
        streaming = isinstance(body, dict) and body.get("stream") is True
        model = str(body.get("model", "fake-model")) if isinstance(body, dict) else "fake-model"
        try:
            if not streaming:
                self._json(200, _whole(api, turn, model), turn.headers)
            else:
                self._stream(api, turn, model, rec)
            rec.finished = True
        except _ClientGone:
            rec._disconnected.set()
            self.close_connection = True

    # -- writing -----------------------------------------------------------------------------

    def _json(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = (json.dumps(body) if not isinstance(body, str) else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, api: str, turn: Reply, model: str, rec: Recorded) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in turn.headers.items():
            self.send_header(k, v)
        self.end_headers()
        events = {"chat": _chat_events, "responses": _responses_events, "anthropic": _anthropic_events}[api]
        for item in events(turn, model):
            if item is _STALL:
                self._pause(turn.stall_s)
                if turn.cut:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if turn.error is not None:  # the API's error event after output began
                    self._chunk(_error_frame(api, turn.error).encode())
                    self._chunk(b"")
                    return
                continue
            name, data, is_text = item
            frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
            if rec.first_byte_at is None:
                rec.first_byte_at = time.perf_counter()
            if is_text:
                rec.text_written_at.append(time.perf_counter())
            self._chunk(frame.encode())
            if turn.delay_s:
                self._pause(turn.delay_s)
        self._chunk(b"")

    def _stream_error(self, api: str, turn: Fail) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._chunk(_error_frame(api, turn).encode())
            self._chunk(b"")
        except _ClientGone:
            pass

    def _chunk(self, data: bytes) -> None:
        try:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            raise _ClientGone from e

    def _pause(self, seconds: float) -> None:
        """Sleep, but notice at once when the client hangs up (EOF on the socket)."""
        deadline = time.monotonic() + seconds
        sock = self.connection
        while not self.fake._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([sock], [], [], min(left, 0.05))
            if readable:
                try:
                    peek = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    raise _ClientGone


_STALL = object()


def _error_frame(api: str, turn: Fail) -> str:
    """The SSE event reporting ``turn``'s error inside a stream, in the API's shape."""
    body = turn.body if turn.body is not None else _error_body(api, turn.status, f"scripted {turn.status}")
    if api == "responses":
        inner = body.get("error", {}) if isinstance(body, dict) else {}
        data = {"type": "error", "code": inner.get("code") or inner.get("type"), "message": inner.get("message"),
                "param": None, "sequence_number": 0}
        return f"event: error\ndata: {_dump(data)}\n\n"
    if api == "anthropic":
        return f"event: error\ndata: {_dump(body)}\n\n"
    return f"data: {_dump(body)}\n\n"


def _error_body(api: str, status: int, message: str) -> dict[str, Any]:
    if api == "anthropic":
        kind = {
            400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
        }.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kinds = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_exceeded"}
    kind = kinds.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _ids(turn: Reply, prefix: str) -> list[str]:
    return [c.id or f"{prefix}{i + 1}" for i, c in enumerate(turn.calls)]


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


# -- Chat Completions --------------------------------------------------------------------------


def _chat_stop(turn: Reply) -> str:
    return turn.stop_reason or ("tool_calls" if turn.calls else "stop")


def _chat_usage(u: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.input, "completion_tokens": u.output, "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
    }


def _chat_events(turn: Reply, model: str) -> Any:
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str | None, str, bool]:
        d = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        return None, _dump(d), bool(delta.get("content"))

    yield chunk({"role": "assistant", "content": ""})
    if turn.reasoning is not None:  # DeepSeek's thinking mode (and llama.cpp, vLLM): before the answer
        for piece in (turn.reasoning[:4], turn.reasoning[4:]):
            yield chunk({"content": None, "reasoning_content": piece})
    for piece in turn.text_chunks():
        yield chunk({"content": piece})
    for i, (call, cid) in enumerate(zip(turn.calls, _ids(turn, "call_"), strict=True)):
        yield chunk({"tool_calls": [{"index": i, "id": cid, "type": "function",
                                     "function": {"name": call.name, "arguments": ""}}]})
        for piece in call.chunks():
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield _STALL
    yield chunk({}, _chat_stop(turn))
    yield None, _dump({**base, "choices": [], "usage": _chat_usage(turn.usage)}), False
    yield None, "[DONE]", False


def _chat_whole(turn: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(turn.text_chunks()) or None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.full()}}
            for c, cid in zip(turn.calls, _ids(turn, "call_"), strict=True)
        ]
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _chat_stop(turn)}],
        "usage": _chat_usage(turn.usage),
    }


# -- Responses ---------------------------------------------------------------------------------


def _responses_items(turn: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        items.append({"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": turn.reasoning}],
                      "encrypted_content": "enc-" + turn.reasoning.encode().hex()})
    if turn.web_search is not None:
        ws = turn.web_search
        items.append({"id": "ws_1", "type": "web_search_call", "status": "completed",
                      "action": {"type": "search", "query": ws.query,
                                 "sources": [{"type": "url", "url": u} for u in ws.urls]}})
    text = "".join(turn.text_chunks())
    if text or not turn.calls:
        items.append({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
    for c, cid in zip(turn.calls, _ids(turn, "call_"), strict=True):
        items.append({"id": "fc_" + cid, "type": "function_call", "status": "completed", "call_id": cid,
                      "name": c.name, "arguments": c.full()})
    return items


def _responses_object(turn: Reply, model: str, status: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    u = turn.usage
    obj: dict[str, Any] = {
        "id": "resp_fake", "object": "response", "created_at": int(time.time()), "status": status, "model": model,
        "output": items, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
        "incomplete_details": None, "usage": None,
    }
    if status != "in_progress":
        obj["usage"] = {"input_tokens": u.input, "input_tokens_details": {"cached_tokens": u.cached},
                        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": u.input + u.output}
    if status == "incomplete":
        obj["incomplete_details"] = {"reason": turn.stop_reason or "max_output_tokens"}
    return obj


def _responses_status(turn: Reply) -> str:
    return "incomplete" if turn.stop_reason not in (None, "completed") else "completed"


def _responses_events(turn: Reply, model: str) -> Any:
    seq = iter(range(1_000_000))

    def ev(_event: str, _is_text: bool = False, **data: Any) -> tuple[str, str, bool]:
        return _event, _dump({"type": _event, "sequence_number": next(seq), **data}), _is_text

    yield ev("response.created", response=_responses_object(turn, model, "in_progress", []))
    yield ev("response.in_progress", response=_responses_object(turn, model, "in_progress", []))
    items = _responses_items(turn)
    calls = iter(turn.calls)
    for idx, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            yield ev("response.output_item.added", output_index=idx,
                     item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield ev("response.content_part.added", item_id=item["id"], output_index=idx, content_index=0, part=part)
            for piece in turn.text_chunks():
                yield ev("response.output_text.delta", True, item_id=item["id"], output_index=idx, content_index=0,
                         delta=piece, logprobs=[])
            text = item["content"][0]["text"]
            yield ev("response.output_text.done", item_id=item["id"], output_index=idx, content_index=0, text=text,
                     logprobs=[])
            yield ev("response.content_part.done", item_id=item["id"], output_index=idx, content_index=0,
                     part=item["content"][0])
        elif kind == "function_call":
            yield ev("response.output_item.added", output_index=idx,
                     item={**item, "status": "in_progress", "arguments": ""})
            for piece in next(calls).chunks():
                yield ev("response.function_call_arguments.delta", item_id=item["id"], output_index=idx, delta=piece)
            yield ev("response.function_call_arguments.done", item_id=item["id"], output_index=idx,
                     name=item["name"], arguments=item["arguments"])
        elif kind == "web_search_call":
            yield ev("response.output_item.added", output_index=idx, item={**item, "status": "in_progress"})
            for stage in ("in_progress", "searching", "completed"):
                yield ev(f"response.web_search_call.{stage}", item_id=item["id"], output_index=idx)
        else:
            yield ev("response.output_item.added", output_index=idx, item=item)
        yield ev("response.output_item.done", output_index=idx, item=item)
    yield _STALL
    status = _responses_status(turn)
    yield ev(f"response.{status}", response=_responses_object(turn, model, status, items))


def _responses_whole(turn: Reply, model: str) -> dict[str, Any]:
    return _responses_object(turn, model, _responses_status(turn), _responses_items(turn))


# -- Anthropic Messages ------------------------------------------------------------------------


def _anthropic_blocks(turn: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": turn.reasoning, "signature": "sig-" + turn.reasoning[:8]})
    if turn.web_search is not None:
        ws = turn.web_search
        blocks.append({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                       "input": {"query": ws.query}})
        blocks.append({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "url": u, "title": u, "encrypted_content": "enc", "page_age": None}
            for u in ws.urls]})
    text = "".join(turn.text_chunks())
    if text or not turn.calls:
        blocks.append({"type": "text", "text": text})
    for c, cid in zip(turn.calls, _ids(turn, "toolu_"), strict=True):
        try:
            parsed = json.loads(c.full())
        except ValueError:
            parsed = {}
        blocks.append({"type": "tool_use", "id": cid, "name": c.name, "input": parsed, "_chunks": c.chunks()})
    return blocks


def _anthropic_usage(turn: Reply) -> dict[str, Any]:
    u = turn.usage
    # Anthropic's input_tokens excludes cache reads; Usage.input counts all input (as OpenAI's do).
    out: dict[str, Any] = {"input_tokens": max(0, u.input - u.cached), "output_tokens": u.output,
                           "cache_read_input_tokens": u.cached,
                           "cache_creation_input_tokens": 0}
    if turn.web_search is not None:
        out["server_tool_use"] = {"web_search_requests": 1}
    return out


def _anthropic_stop(turn: Reply) -> str:
    return turn.stop_reason or ("tool_use" if turn.calls else "end_turn")


def _anthropic_events(turn: Reply, model: str) -> Any:
    def ev(_event: str, _is_text: bool = False, **data: Any) -> tuple[str, str, bool]:
        return _event, _dump({"type": _event, **data}), _is_text

    start_usage = {**_anthropic_usage(turn), "output_tokens": 1}
    yield ev("message_start", message={"id": "msg_fake", "type": "message", "role": "assistant", "content": [],
                                       "model": model, "stop_reason": None, "stop_sequence": None,
                                       "usage": start_usage})
    yield ev("ping")
    for idx, block in enumerate(_anthropic_blocks(turn)):
        kind = block["type"]
        if kind == "text":
            yield ev("content_block_start", index=idx, content_block={"type": "text", "text": ""})
            for piece in turn.text_chunks():
                yield ev("content_block_delta", True, index=idx, delta={"type": "text_delta", "text": piece})
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            yield ev("content_block_start", index=idx, content_block=start)
            yield ev("content_block_delta", index=idx, delta={"type": "thinking_delta", "thinking": block["thinking"]})
            sig = {"type": "signature_delta", "signature": block["signature"]}
            yield ev("content_block_delta", index=idx, delta=sig)
        elif kind in ("tool_use", "server_tool_use"):
            chunks = block.pop("_chunks", None) or [_dump(block["input"])]
            yield ev("content_block_start", index=idx, content_block={**block, "input": {}})
            for piece in chunks:
                yield ev("content_block_delta", index=idx, delta={"type": "input_json_delta", "partial_json": piece})
        else:
            yield ev("content_block_start", index=idx, content_block=block)
        yield ev("content_block_stop", index=idx)
    yield _STALL
    yield ev("message_delta", delta={"stop_reason": _anthropic_stop(turn), "stop_sequence": None},
             usage={"output_tokens": turn.usage.output})
    yield ev("message_stop")


def _anthropic_whole(turn: Reply, model: str) -> dict[str, Any]:
    blocks = _anthropic_blocks(turn)
    for b in blocks:
        b.pop("_chunks", None)
    return {"id": "msg_fake", "type": "message", "role": "assistant", "content": blocks, "model": model,
            "stop_reason": _anthropic_stop(turn), "stop_sequence": None, "usage": _anthropic_usage(turn)}


def _whole(api: str, turn: Reply, model: str) -> dict[str, Any]:
    return {"chat": _chat_whole, "responses": _responses_whole, "anthropic": _anthropic_whole}[api](turn, model)
