"""One connection to one MCP server, owned by its own task (the SDK's client is entered and left
in that task), restarted on the next use after it died.

A call never hangs a step: it ends when the server answers, when the connection dies (the server
crashed, closed its stdout, or sent what cannot be read), or when ``timeout_ms`` passes — then the
server is stopped, and the next call starts it again and says so. A stdio server's stderr goes to
``.zuno/logs/mcp/<server>.log`` (capped per run), never into the transcript; its environment is
the shell's (the ``ZUNO_*`` namespace withheld) plus its configured ``env``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import re
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CONNECTION_CLOSED

from zuno import limits
from zuno.config import McpServerConfig
from zuno.process.environment import withheld
from zuno.process.environment import withheld_environment as inherited_environment

# How much of a server's last stderr line a start failure quotes, and how long it waits for it.
STDERR_TAIL_BYTES = 300
STDERR_TAIL_WAIT_S = 2.0
_ENV_REF = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


class LinkError(Exception):
    """A connected server failed a request: ``kind`` is start, crashed, timeout or protocol."""

    def __init__(self, server: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.server = server
        self.kind = kind
        self.message = message


def expand_env(value: str, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return _ENV_REF.sub(lambda m: env.get(m.group(1), ""), value)


def server_environment(cfg: McpServerConfig) -> dict[str, str]:
    env = inherited_environment()
    for k, v in cfg.env.items():
        if not withheld(k):
            env[k] = expand_env(v)
    return env


# How many stdout lines that are not JSON-RPC a server's log notes per run (the rest are counted).
STDOUT_NOISE_NOTED_MAX = 100


@dataclass
class _Noise:
    """Where the stdout lines of one run of a server that are not JSON-RPC are noted."""

    path: Path
    seen: int = 0


# The connection the running task serves (the SDK's stdout reader runs in a task of that
# connection, so it sees the value its owner task set).
_SERVER_NOISE: contextvars.ContextVar[_Noise | None] = contextvars.ContextVar("zuno_mcp_noise", default=None)


class _StdoutNoise(logging.Filter):
    """The SDK logs each line of a server's stdout that is not JSON-RPC (a banner, a stray print)
    with a whole traceback, on Zuno's own stderr: the terminal of ``zuno run``, the client's log of
    ``zuno mcp``. The line is noted in that server's log instead, without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        noise = _SERVER_NOISE.get()
        if noise is None:
            return True
        noise.seen += 1
        if noise.seen > STDOUT_NOISE_NOTED_MAX:
            return False
        error: Any = record.exc_info[1] if record.exc_info else None
        try:
            detail = repr(error.errors()[0]["input"])
        except Exception:
            detail = " ".join(str(error or record.getMessage()).split())
        more = " (further ones are not noted)" if noise.seen == STDOUT_NOISE_NOTED_MAX else ""
        with contextlib.suppress(OSError), open(noise.path, "ab") as log:
            note = f"--- zuno: a stdout line that is not JSON-RPC was ignored{more}: {detail[:STDERR_TAIL_BYTES]} ---\n"
            log.write(note.encode())
        return False


logging.getLogger("mcp.client.stdio").addFilter(_StdoutNoise())


class _StderrSink:
    """A pipe the server writes its stderr to, copied into the log file up to a cap per run."""

    def __init__(self, path: Path, cap: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.cap = cap
        r, w = os.pipe()
        self.write_end = os.fdopen(w, "w")
        self._r = r
        self._tail = b""  # the last bytes of this run's stderr, for a start failure's message
        self.finished = threading.Event()

    def start(self) -> None:
        # A daemon thread: a server's child that keeps stderr open never holds up Zuno's exit.
        threading.Thread(target=self._pump, name=f"zuno-mcp-stderr-{self.path.stem}", daemon=True).start()

    def _pump(self) -> None:
        written = dropped = 0
        with open(self.path, "ab") as log:
            log.write(f"--- zuno: server started {time.strftime('%Y-%m-%dT%H:%M:%S')} ---\n".encode())
            while True:
                chunk = os.read(self._r, 65536)
                if not chunk:
                    break
                self._tail = (self._tail + chunk)[-STDERR_TAIL_BYTES:]
                room = self.cap - written
                if room > 0:
                    log.write(chunk[:room])
                    log.flush()
                    written += min(room, len(chunk))
                dropped += max(0, len(chunk) - max(room, 0))
            if dropped:
                log.write(f"\n--- zuno: {dropped} more bytes of stderr dropped (cap {self.cap}) ---\n".encode())
        os.close(self._r)
        self.finished.set()

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self._tail.decode("utf-8", "replace").splitlines() if ln.strip()]
        return lines[-1][:STDERR_TAIL_BYTES] if lines else ""

    def close_write(self) -> None:
        with contextlib.suppress(OSError):
            self.write_end.close()


class Link:
    def __init__(self, name: str, cfg: McpServerConfig, root: Path, log_dir: Path) -> None:
        self.name = name
        self.cfg = cfg
        self.root = root
        self.log_path = log_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.log"
        self.timeout_s = cfg.timeout_ms / 1000
        self.start_timeout_s = max(self.timeout_s, limits.MCP_START_TIMEOUT_MIN_S)
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._starting = asyncio.Lock()
        self.starts = 0
        self._sink: _StderrSink | None = None
        self._http_status: int | None = None  # the last HTTP error status an HTTP server answered
        self.ended_because: str | None = None  # why the previous connection ended, until reported

    # -- the connection -------------------------------------------------------------------------

    def _transport(self, stack: AsyncExitStack, sink: _StderrSink | None) -> Any:
        cfg = self.cfg
        if cfg.command is not None:
            cwd = Path(cfg.cwd) if cfg.cwd else self.root
            if not cwd.is_absolute():
                cwd = self.root / cwd
            params = StdioServerParameters(
                command=cfg.command, args=list(cfg.args), env=server_environment(cfg), cwd=str(cwd)
            )
            assert sink is not None
            return stdio_client(params, errlog=sink.write_end)  # type: ignore[arg-type]
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {k: expand_env(v) for k, v in cfg.headers.items()}
        if cfg.bearer:
            headers["Authorization"] = f"Bearer {expand_env(cfg.bearer)}"
        self._http_status = None

        async def note_status(response: Any) -> None:  # the SDK's error names no HTTP status
            if response.status_code >= 400:
                self._http_status = response.status_code

        http = httpx2.AsyncClient(headers=headers, timeout=self.timeout_s, event_hooks={"response": [note_status]})
        stack.push_async_callback(http.aclose)
        return streamable_http_client(str(cfg.url), http_client=http)

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        sink = _StderrSink(self.log_path, limits.MCP_STDERR_LOG_MAX_BYTES) if self.cfg.command else None
        self._sink = sink
        if sink is not None:
            _SERVER_NOISE.set(_Noise(self.log_path))  # this task's own context: the SDK's reader inherits it
        try:
            async with AsyncExitStack() as stack:
                if sink is not None:
                    sink.start()
                    stack.callback(sink.close_write)
                # The SDK's own timeout is the handshake's bound too: never below the time a start may
                # take (a call's own bound, timeout_ms, is kept by ``request``).
                client = Client(self._transport(stack, sink), read_timeout_seconds=self.start_timeout_s)
                await stack.enter_async_context(client)
                if sink is not None:
                    sink.close_write()  # the child holds its own copy
                ready.set_result(client)
                await stop.wait()
        except BaseException as e:
            if not ready.done():
                if isinstance(e, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(e)
            if not stop.is_set():
                self.ended_because = f"the connection ended ({_describe(e)})"
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            if sink is not None:
                sink.close_write()
            if not stop.is_set() and self.ended_because is None:
                self.ended_because = "the server closed the connection"

    async def client(self) -> Client:
        """The live client, starting (or restarting) the server when needed."""
        if self._client is not None and self._owner is not None and not self._owner.done():
            return self._client
        async with self._starting:
            if self._client is not None and self._owner is not None and not self._owner.done():
                return self._client
            await self._drop()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            stop = asyncio.Event()
            owner = asyncio.create_task(self._own(ready, stop), name=f"zuno-mcp-{self.name}")
            try:
                client = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout_s)
            except TimeoutError:
                stop.set()
                owner.cancel()
                raise LinkError(
                    self.name,
                    "start",
                    f"MCP server {self.name!r} did not finish starting within {self.start_timeout_s:g} s",
                ) from None
            except Exception as e:
                why = f"MCP server {self.name!r} could not be started: {_describe(e)}"
                raise LinkError(self.name, "start", why + await self._stderr_hint()) from None
            self._client, self._owner, self._stop = client, owner, stop
            self.starts += 1
            return client

    async def _stderr_hint(self) -> str:
        """What a server that failed to start last said on stderr, and where the rest of it is (an
        HTTP server: the HTTP status it answered)."""
        sink = self._sink
        if sink is None:
            status = self._http_status
            if status is None:
                return ""
            check = " (check the entry's bearer and headers)" if status in (401, 403) else ""
            return f"; it answered HTTP {status}{check}"
        await asyncio.to_thread(sink.finished.wait, STDERR_TAIL_WAIT_S)
        try:
            shown = self.log_path.relative_to(self.root)
        except ValueError:
            shown = self.log_path
        last = sink.last_line()
        said = f"; its stderr ended with {last!r}" if last else "; it wrote nothing to stderr"
        return f"{said} (the whole log: {shown})"

    async def _drop(self) -> None:
        owner, stop = self._owner, self._stop
        self._client = self._owner = self._stop = None
        if owner is None:
            return
        if stop is not None:
            stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), 5)
        except (TimeoutError, Exception):
            owner.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, 5)

    async def restart_note(self) -> str | None:
        """Why the previous connection ended, once, for the result of the call that reconnected."""
        note, self.ended_because = self.ended_because, None
        return note

    async def aclose(self) -> None:
        self.ended_because = None
        await self._drop()

    # -- requests -------------------------------------------------------------------------------

    async def request(self, what: str, make: Any) -> Any:
        """Run ``make(client)`` against the server; a crash, a hang past the timeout or garbage
        becomes a LinkError naming the server (and a hung server is stopped)."""
        client = await self.client()
        owner = self._owner
        assert owner is not None
        call = asyncio.ensure_future(make(client))
        try:
            done, _ = await asyncio.wait({call, owner}, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        if call in done:
            try:
                return call.result()
            except Exception as e:
                if owner.done() or getattr(e, "code", None) == CONNECTION_CLOSED:
                    self.ended_because = f"it died during {what}"
                    await self._drop()
                    raise LinkError(self.name, "crashed", f"MCP server {self.name!r} died during {what}") from None
                raise LinkError(
                    self.name, "protocol", f"MCP server {self.name!r} failed {what}: {_describe(e)}"
                ) from None
        call.cancel()
        if owner in done:
            self.ended_because = f"it died during {what}"
            await self._drop()
            raise LinkError(self.name, "crashed", f"MCP server {self.name!r} died during {what}")
        self.ended_because = f"it was stopped after it did not answer {what} within {self.cfg.timeout_ms} ms"
        await self._drop()
        raise LinkError(
            self.name, "timeout", f"MCP server {self.name!r} did not answer {what} within {self.cfg.timeout_ms} ms"
        )

    async def list_tools(self) -> list[types.Tool]:
        """Every page of the server's tools (never a silent part of them): a cursor sent twice or
        more than ``limits.MCP_TOOL_LIST_PAGES_MAX`` pages is a protocol error naming it."""
        out: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(limits.MCP_TOOL_LIST_PAGES_MAX):
            page = await self.request("tools/list", lambda c, cur=cursor: c.list_tools(cursor=cur))
            out.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return out
            if cursor in seen:
                raise LinkError(
                    self.name, "protocol", f"MCP server {self.name!r} sent the tools/list cursor {cursor[:64]!r} twice"
                )
            seen.add(cursor)
        raise LinkError(
            self.name,
            "protocol",
            f"MCP server {self.name!r} listed more than {limits.MCP_TOOL_LIST_PAGES_MAX} pages of tools "
            f"({len(out)} tools so far); leave it out or ask its author to list fewer",
        )


def _describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        inner = [x for x in e.exceptions]
        if inner:
            return _describe(inner[0])
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text}" if text != type(e).__name__ else text
