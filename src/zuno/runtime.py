"""Runtime and Session: the wiring. Every transport goes through ``Session.step``.

async with zuno.Runtime(root=".") as rt:
    async with rt.session() as s:
        result = await s.step([{"name": "read", "arguments": {"path": "README.md"}}])
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from zuno.admitting import CROSS_CUTTING, subject_forms
from zuno.config import Config
from zuno.declarations import Declarations, Outcome
from zuno.dispatch import Dispatcher
from zuno.permissions import Approver, NoApprover, decide, denied_outright
from zuno.records import StepResult, StepWrites
from zuno.session_ids import validate_session_id
from zuno.surface import Registry, Surface, build_surface, default_registry
from zuno.tool import Services, Tool
from zuno.workspace_store import WorkspaceStore

UNCERTAIN_RECOVERY_TEXT = (
    "[uncertain] This call was interrupted before it settled: the process driving the session stopped "
    "while it ran. What it changed is unknown. Zuno does not re-run it; inspect the real state it would "
    "have changed before deciding anything."
)


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    if isinstance(item, Tool):
        return item
    declared = getattr(item, "__zuno_tool__", None)
    if isinstance(declared, Tool):
        return declared
    raise TypeError(
        f"Runtime(tools=...): {item!r} is not a tool; declare the function with @zuno.tool or pass a zuno.Tool."
    )


class Runtime(WorkspaceStore):
    """The wiring of one workspace: config, surface, store, approver.

    ``tools`` adds tools to the surface next to the profile's and the config's extensions: functions
    declared with ``@zuno.tool`` or ``zuno.Tool`` instances. The config's ``tools.<name>`` switch and
    ``agent.tools`` allowlist apply to them as to any extension.

    The store is opened on first use: building a Runtime writes nothing, so a command that only
    looks (``zuno tools``) leaves no ``.zuno/`` behind. (What only reads the store needs no surface:
    ``zuno.workspace_store.WorkspaceStore``.)
    """

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        config: Config | None = None,
        config_file: str | os.PathLike[str] | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        profile: str | None = None,
        db: str | os.PathLike[str] | None = None,
        approver: Approver | None = None,
        registry: Registry | None = None,
        tools: Sequence[Tool | Callable[..., Any]] | None = None,
    ) -> None:
        super().__init__(
            root,
            config=config,
            config_file=config_file,
            config_overrides=config_overrides,
            profile=profile,
            db=db,
            migrations=lambda: self.registry.migrations,
        )
        registry = registry or default_registry()
        self.registry = registry
        extra = [_as_tool(t) for t in tools or ()]
        self.surface: Surface = build_surface(self.config, self.root, registry, extra_tools=extra)
        self.approver: Approver = approver or NoApprover()
        # The user's MCP servers (config "mcp"): connected when the first session opens.
        self.mcp: Any = None
        self.deferred: frozenset[str] = frozenset()
        self._mcp_started = False
        if any(cfg.enabled for cfg in self.config.mcp.values()):
            from zuno.connect.mcp import McpHub

            self.mcp = McpHub(self.config, self.root, self.workspace.state_dir / "logs" / "mcp")

    async def start_mcp(self) -> None:
        """Connect the configured MCP servers (once) and put their tools on the surface; with
        deferred schemas, withhold them from the visible tools and add tool_search."""
        if self.mcp is None or self._mcp_started:
            return
        self._mcp_started = True
        from zuno.connect.mcp import ToolSearchTool, should_defer

        added = await self.mcp.start(set(self.surface.tools))
        self.surface.tools.update(added)
        connected = list(self.mcp.tools.values())
        if should_defer(self.config.tool_search.defer, connected):
            self.deferred = frozenset(t.name for t in connected)
            self.surface.tools["tool_search"] = ToolSearchTool(lambda: [self.surface.tools[n] for n in self.deferred])

    def session(self, session_id: str | None = None) -> Session:
        """A session: a new one, or the one named (continued, or created with that id). The id is
        validated first (InvalidSessionId); nothing is written until ``open()``, which refuses a
        session of another workspace root (``SessionOfAnotherWorkspace``: a store shared with --db)."""
        if session_id is not None:
            validate_session_id(session_id)
        return Session(self, session_id)

    def agent(self, model: str | None = None, **options: Any) -> Any:
        """An agent session driven by a model (``zuno.agent.api.Agent``; options: mode, session_id,
        continue_latest, provider, summary_provider, wait_background, load_in_background, on_loaded)::

        async with rt.agent(model="local/qwen3-coder") as agent:
            result = await agent.run("fix the failing test")
        """
        from zuno.agent.api import Agent

        return Agent(self, model=model, **options)

    async def aclose(self) -> None:
        try:
            if self.mcp is not None:
                await self.mcp.aclose()
        finally:
            self.close_stores()

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Session:
    """One conversation's worth of steps, driven by one process at a time."""

    def __init__(self, runtime: Runtime, session_id: str | None) -> None:
        if session_id is not None:
            validate_session_id(session_id)
        self.runtime = runtime
        self._requested_id = session_id
        self.id = ""
        self.services = Services()
        self._dispatcher: Dispatcher | None = None
        self._startup_notices: list[dict[str, Any]] = []

    async def open(self) -> Session:
        rt = self.runtime
        await rt.start_mcp()
        self.id = rt.store.ensure_session(self._requested_id, str(rt.root), rt.surface.profile)
        rt.store.acquire_session(self.id)
        self.recover()
        self._dispatcher = Dispatcher(
            session_id=self.id,
            workspace=rt.workspace,
            store=rt.store,
            config=rt.config,
            surface=rt.surface,
            services=self.services,
            approver=rt.approver,
        )
        rt.store.add_event(self.id, "session-opened", {"pid": os.getpid(), "profile": rt.surface.profile})
        if rt.mcp is not None:
            for server, why in rt.mcp.failures.items():
                rt.store.add_notice(
                    self.id, "mcp_server_failed", f"{why}; its tools are not available.", {"server": server}
                )
            for tool, why in rt.mcp.left_out.items():
                rt.store.add_notice(self.id, "mcp_tool_left_out", f"{why}.", {"tool": tool})
        return self

    def recover(self) -> None:
        """Settle every call whose intent row has no result as uncertain, and queue a notice for
        the next step naming the call, its tool and its attempt. Nothing is re-run. Done when the
        session opens; again by its driver after a write it could not make (a store another
        process kept locked) left a call unsettled while the session stayed open."""
        store = self.runtime.store
        for row in store.unsettled_calls(self.id):
            store.settle_call(
                row.seq,
                outcome=str(Outcome.uncertain),
                block_kind=None,
                cancelled=False,
                text=UNCERTAIN_RECOVERY_TEXT,
                metadata={"recovered": True},
                started_at=row.started_at,
                ended_at=None,
            )
            store.add_event(
                self.id,
                "call-recovered",
                {"tool": row.name, "attempt": row.attempt, "outcome": "uncertain"},
                step=row.step,
                call_seq=row.seq,
                call_id=row.call_id,
            )
            replay = (
                "its replay policy is Safe, so it may be run again"
                if row.replay == "Safe"
                else ("its replay policy is Never: inspect the authoritative state before any new mutation")
            )
            store.add_notice(
                self.id,
                "uncertain_call",
                f"Call {row.call_id} ({row.name}, attempt {row.attempt}, step {row.step}) was interrupted before "
                f"it settled and is now uncertain; it was not re-run. {replay}.",
                {
                    "call_id": row.call_id,
                    "tool": row.name,
                    "attempt": row.attempt,
                    "step": row.step,
                    "replay": row.replay,
                },
            )

    def _resolve(self, call: Any) -> tuple[Tool, Any] | None:
        if not isinstance(call, dict):
            return None
        tool = self.runtime.surface.tools.get(str(call.get("name") or ""))
        if tool is None:
            return None
        arguments: Any = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                return None
        if not isinstance(arguments, dict):
            return None
        rest = {k: v for k, v in arguments.items() if k not in CROSS_CUTTING}
        try:
            return tool, tool.Args.model_validate(rest)
        except ValidationError:
            return None

    def classify(self, call: Any) -> Declarations | None:
        """The declarations the dispatcher would give this call (resolve -> validate -> classify),
        without running it, recording anything or asking anyone; None when the call would be
        refused before it could run (unknown tool, bad arguments). Transports that order requests
        themselves (``zuno mcp``) use it; the step still admits the call in full."""
        resolved = self._resolve(call)
        return None if resolved is None else resolved[0].classify(resolved[1])

    def approval_needed(self, call: Any) -> tuple[str, str | None] | None:
        """(reason, subject) when the permission rules or strict mode would ask before this call
        runs, else None (it is allowed, denied, or refused before permission). Nothing is recorded;
        the step decides again in full."""
        resolved = self._resolve(call)
        if resolved is None:
            return None
        tool, args = resolved
        subject = tool.subject(args)
        forms = subject_forms(self.runtime.config, self.runtime.workspace, tool, args)
        decision = decide(self.runtime.config.permission, tool.name, forms or subject, tool.classify(args))
        return (decision.reason, subject) if decision.action == "ask" else None

    def visible_tools(self) -> list[Tool]:
        """The tools whose schemas the model should see now, in surface order: the surface less the
        tools a deny rule (without a pattern) refuses outright (``permissions.denied_outright``: a
        patternless ``read`` deny refuses glob, grep and view_image too), and less the connected MCP tools whose
        schemas are deferred and that no tool_search of this session has matched yet."""
        rt = self.runtime
        tools = list(rt.surface.tools.values())
        tools = [t for t in tools if denied_outright(rt.config.permission, t.name) is None]
        if rt.deferred:
            from zuno.connect.mcp import expanded_names

            shown = expanded_names(rt.store, self.id) if self.id else set()
            tools = [t for t in tools if t.name not in rt.deferred or t.name in shown]
        return tools

    async def step(
        self, calls: list[Any], *, also: StepWrites | None = None, hidden: Mapping[str, str] | None = None
    ) -> StepResult:
        """Run one step. ``also``: the caller's own durable writes that belong with the results,
        committed with the step's last settlement (see ``StepWrites``). ``hidden``: tools of the
        surface the caller did not offer (name → why); a call to one is blocked as unavailable."""
        if not isinstance(calls, list | tuple):
            one = " (one call: pass [call])" if isinstance(calls, Mapping) else ""
            raise TypeError(
                f"Session.step takes a list of calls, each {{'name': ..., 'arguments': {{...}}}}; "
                f"got {type(calls).__name__}{one}"
            )
        if self._dispatcher is None:
            await self.open()
        assert self._dispatcher is not None
        return await self._dispatcher.step(calls, also=also, hidden=hidden)

    def cancel(self) -> None:
        """Cancel the step in progress; it returns settled results for every call."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()

    async def close(self) -> None:
        try:
            await self.services.aclose()
        finally:
            if self.id:
                with self.runtime.store.best_effort():  # a locked store skips it (the lock is reported)
                    self.runtime.store.add_event(self.id, "session-closed", {})
                self.runtime.store.release_session(self.id)

    async def __aenter__(self) -> Session:
        return await self.open()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
