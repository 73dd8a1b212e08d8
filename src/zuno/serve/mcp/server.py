"""``zuno mcp``: the surface served to an MCP client, every call through ``Session.step``.

One Zuno session per client identity (stdio: the process; HTTP: the authenticated client), with
its own arrival-order gate. A tools/call request is one step of one call; requests in flight
together keep the dispatcher's rules (see ``gate``). A cancelled request cancels its own step,
which settles per the tool's cancellation rules before the request ends. Long calls report
progress when the client sent a progress token.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from zuno.declarations import Concurrency
from zuno.permissions import ApprovalRequest
from zuno.records import StepResult
from zuno.runtime import Runtime, Session
from zuno.serve.mcp.approvals import (
    APPROVAL_KEY,
    APPROVAL_SCHEMA,
    APPROVAL_TIMEOUT_S,
    CURRENT,
    McpApprover,
    RequestApproval,
    RequestStateSeal,
    approval_message,
    consent,
)
from zuno.serve.mcp.gate import ArrivalGate
from zuno.serve.mcp.listing import tool_listing
from zuno.serve.mcp.params_errors import NamedParamsErrors
from zuno.serve.mcp.results import call_tool_result, failure_result

SERVER_NAME = "zuno"
PROGRESS_INTERVAL_S = 1.0
STDIO_IDENTITY = "stdio"

Identify = Callable[[ServerRequestContext[Any, Any]], str]


@dataclass
class Client:
    """What one client identity owns: its Zuno session and its gate."""

    session: Session
    gate: ArrivalGate


class Frontend:
    """The Zuno side of ``zuno mcp``: sessions per client identity, the approval seal."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        session_id: str | None = None,
        approver: McpApprover | None = None,
        identify: Identify | None = None,
    ) -> None:
        self.runtime = runtime
        self._resume = session_id
        self.approver = approver if approver is not None else McpApprover()
        self.identify: Identify = identify or (lambda ctx: STDIO_IDENTITY)
        self.seal = RequestStateSeal()
        self._clients: dict[str, Client] = {}
        self._opening = asyncio.Lock()
        self._closing: set[asyncio.Task[None]] = set()
        # How a transport that shuts down by itself is asked to (HTTP); None: cancel the server task.
        self.stop: Callable[[], None] | None = None

    async def client(self, identity: str) -> Client:
        found = self._clients.get(identity)
        if found is not None:
            return found
        async with self._opening:
            found = self._clients.get(identity)
            if found is None:
                # Only the first client resumes the session named on the command line: two clients
                # never share a session (receipts, artifacts, jobs, notices).
                sid, self._resume = self._resume, None
                session = self.runtime.session(sid)
                await session.open()
                found = self._clients[identity] = Client(session, ArrivalGate())
        return found

    def sessions(self) -> dict[str, str]:
        return {identity: c.session.id for identity, c in self._clients.items()}

    def connection_ended(self, suffix: str) -> None:
        """A transport's connection ended for good (HTTP: the client's DELETE, the idle timeout):
        the Zuno session of every identity ending with ``suffix`` is closed (its background jobs
        end with it, as with the process) once its requests in flight have settled."""
        for identity in [i for i in self._clients if i.endswith(suffix)]:
            client = self._clients.pop(identity)
            task = asyncio.get_running_loop().create_task(self._close(client))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(client: Client) -> None:
        async with client.gate.slot(True):  # every earlier request settles (and is recorded) first
            await client.session.close()

    async def aclose(self) -> None:
        if self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.session.close()

    # -- handlers -------------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if params is not None and params.cursor:  # ("" read as none, as lenient clients send it)
            # Zuno lists every tool in one page and never sends a cursor: any cursor is one it did
            # not give (MCP: an invalid cursor SHOULD be -32602), not a request for the first page.
            raise MCPError(
                types.INVALID_PARAMS,
                f"Invalid params: unknown cursor {params.cursor[:64]!r}; zuno mcp lists every tool in one page "
                "(no nextCursor), so send tools/list without a cursor",
            )
        client = await self.client(self.identify(ctx))
        tools = [types.Tool.model_validate(tool_listing(t)) for t in client.session.visible_tools()]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        identity = self.identify(ctx)
        client = self._clients.get(identity) or await self.client(identity)
        call = {"name": params.name, "arguments": params.arguments or {}}
        decl = client.session.classify(call)
        exclusive = decl is not None and decl.concurrency is Concurrency.Exclusive
        approval = RequestApproval()
        if not self.approver.auto:
            asked = self._approval(ctx, client.session, identity, call, params, approval)
            if asked is not None:
                return asked
        token = CURRENT.set(approval)
        try:
            async with client.gate.slot(exclusive):
                result = await self._run(ctx, client.session, call)
        except Exception as e:  # the session or the store failed: a result, never an opaque -32603
            return failure_result(f"[error] zuno could not run {params.name}: {type(e).__name__}: {e}")
        finally:
            CURRENT.reset(token)
        if params.name == "tool_search" and result.results and result.results[0].metadata.get("matches"):
            # tool_search expanded the visible surface: a legacy client re-lists on this notification.
            with contextlib.suppress(Exception):
                if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                    await ctx.session.send_tool_list_changed()
        return call_tool_result(result)

    def _approval(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: Session,
        identity: str,
        call: dict[str, Any],
        params: types.CallToolRequestParams,
        approval: RequestApproval,
    ) -> types.InputRequiredResult | None:
        """Decide how this call's approval (if any) is asked; an InputRequiredResult to return now
        on a 2026-07-28 connection that has not answered yet."""
        caps = ctx.session.client_capabilities
        can_ask = caps is not None and caps.elicitation is not None
        if not can_ask:
            return None  # nobody can answer: the step refuses the call, naming how to allow it
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            needed = session.approval_needed(call)
            if needed is None:
                return None
            reason, subject = needed
            digest = self.seal.call_digest(identity, call["name"], call["arguments"])
            state = params.request_state
            if state is None or not self.seal.check(state, digest):
                return types.InputRequiredResult(
                    input_requests={
                        APPROVAL_KEY: types.ElicitRequest(
                            params=types.ElicitRequestFormParams(
                                message=approval_message(call["name"], subject, reason),
                                requested_schema=APPROVAL_SCHEMA,
                            )
                        )
                    },
                    request_state=self.seal.seal(digest),
                )
            answer = (params.input_responses or {}).get(APPROVAL_KEY)
            approval.answer = consent(getattr(answer, "action", None), getattr(answer, "content", None))
            return None

        async def ask(request: ApprovalRequest) -> bool | None:
            return await self._elicit(ctx, request)

        approval.ask = ask
        return None

    async def _elicit(self, ctx: ServerRequestContext[Any, Any], request: ApprovalRequest) -> bool:
        message = approval_message(request.tool, request.subject, request.reason)
        try:
            with anyio.fail_after(APPROVAL_TIMEOUT_S):
                answer = await ctx.session.elicit_form(message, APPROVAL_SCHEMA, related_request_id=ctx.request_id)
        except Exception:  # a timeout, a client error, a malformed answer: not consent
            return False
        return consent(answer.action, answer.content)

    async def _run(self, ctx: ServerRequestContext[Any, Any], session: Session, call: dict[str, Any]) -> StepResult:
        """Run the step in its own task: a cancelled request cancels it, and waits (shielded) until
        it has settled and recorded every call."""
        task = asyncio.create_task(session.step([call]))
        t0 = time.monotonic()
        meta: Any = ctx.meta or {}
        # A token is any string or integer, 0 and "" included: only its absence means "no progress".
        wants_progress = meta.get("progress_token", meta.get("progressToken")) is not None
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_S if wants_progress else None)
                if done:
                    break
                elapsed = time.monotonic() - t0
                await ctx.session.report_progress(elapsed, None, f"{call['name']} running for {elapsed:.0f} s")
        except BaseException:
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait({task})
            raise
        return task.result()


class _Server(Server[Any]):
    """The SDK's server, whose handshake says what Zuno does on every transport: the tool list
    changes (``tool_search`` expands it; a legacy client is notified). The HTTP session manager
    builds its options without arguments, which said ``listChanged: false``."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


def build_server(frontend: Frontend) -> Server[Any]:
    from importlib.metadata import version

    server = _Server(
        SERVER_NAME,
        version=version("zuno"),
        instructions=(
            "Zuno's tools: every call is admitted, recorded durably and settled with a typed outcome "
            "(structuredContent.outcome). Withheld output is saved in full; page it with the tool the notice names."
        ),
        on_list_tools=frontend.list_tools,
        on_call_tool=frontend.call_tool,
    )
    server.middleware.append(NamedParamsErrors())
    return server
