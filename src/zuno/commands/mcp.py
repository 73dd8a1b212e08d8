"""``zuno mcp``: serve the surface to an MCP client over stdio (default) or streamable HTTP.

zuno mcp [--root DIR] [--profile P] [--session ID | --continue] [--approve]
zuno mcp --http 127.0.0.1:PORT [--token TOKEN]
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from zuno.cli_support import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    RUNTIME_IMPORTS,
    UsageError,
    add_common_arguments,
    add_session_arguments,
    runtime_from_args,
    session_from_args,
)
from zuno.session_ids import InvalidSessionId, SessionNotFound


def add_parser(sub: Any) -> None:
    p = sub.add_parser("mcp", help="serve the tool surface to an MCP client (stdio, or --http)")
    add_common_arguments(p, session=False)
    add_session_arguments(p, new=True)
    p.add_argument("--http", default=None, metavar="HOST:PORT", help="serve streamable HTTP at /mcp instead of stdio")
    p.add_argument(
        "--token",
        action="append",
        default=None,
        help="a bearer token HTTP clients must send (generated when not given); repeat it to name several "
        "clients, each its own session",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --http on an address that is not loopback (the bearer token is still required)",
    )
    p.set_defaults(func=run, imports=RUNTIME_IMPORTS)


def _fail(message: str) -> int:
    print(f"zuno mcp: {message}", file=sys.stderr)
    return EXIT_USAGE


def run(args: argparse.Namespace) -> int:
    import asyncio

    from zuno.config import ConfigError
    from zuno.serve.mcp.approvals import McpApprover

    approver = McpApprover(auto=bool(args.approve))
    try:
        http = _parse_http(args.http, args.allow_remote) if args.http else None
        rt = runtime_from_args(args, approver=approver)
        try:
            session_id = session_from_args(rt, args)
        except BaseException:
            asyncio.run(rt.aclose())
            raise
    except (UsageError, ConfigError, InvalidSessionId, SessionNotFound) as e:
        return _fail(str(e))
    return asyncio.run(_serve(rt, session_id, approver, http, args.token))


def _parse_http(value: str, allow_remote: bool) -> tuple[str, int]:
    from zuno.serve.mcp.http import parse_bind

    return parse_bind(value, allow_remote)


async def _serve(
    rt: Any, session_id: str | None, approver: Any, http: tuple[str, int] | None, token: list[str] | None
) -> int:
    import asyncio

    from zuno.config import ConfigError
    from zuno.serve.mcp.server import Frontend
    from zuno.store import SessionBusy
    from zuno.store.connection import add_deferring_handler

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    stopped: dict[str, int] = {}

    frontend = Frontend(rt, session_id=session_id, approver=approver)

    def stop(status: int) -> None:
        stopped.setdefault("status", status)
        if frontend.stop is not None:
            frontend.stop()
        elif main is not None:
            main.cancel()

    # (noted until the loop runs: a store wait that keeps it from running, such as a call's write
    # on a store another program keeps locked, ends at once)
    add_deferring_handler(loop, signal.SIGTERM, stop, EXIT_TERMINATED)
    add_deferring_handler(loop, signal.SIGINT, stop, EXIT_INTERRUPTED)
    try:
        if http is None:
            from zuno.serve.mcp.stdio import serve_stdio

            await serve_stdio(frontend)
        else:
            from zuno.serve.mcp.http import serve_http

            await serve_http(frontend, http[0], http[1], token)
    except (SessionBusy, ConfigError, UsageError) as e:
        print(f"zuno mcp: {e}", file=sys.stderr)
        return EXIT_USAGE
    except asyncio.CancelledError:
        pass
    finally:
        try:
            await frontend.aclose()
        finally:
            await rt.aclose()
    return stopped.get("status", EXIT_OK)
