"""The zuno command: batch, steps, call, tools, events, receipt.

A batch that ran exits 0 whatever its outcomes; unusable input (bad JSON, bad config, unknown
profile, a session held by another process) exits 2 with a clear message and runs nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from zuno.cli_support import EXIT_OK, EXIT_USAGE, UsageError, add_common_arguments, print_json, runtime_from_args
from zuno.commands import command_modules
from zuno.config import ConfigError
from zuno.runtime import Session
from zuno.store import SessionBusy

_print_json = print_json
_runtime = runtime_from_args
_common = add_common_arguments


def _read_calls(source: str | None) -> list[Any]:
    if source in (None, "-"):
        text = sys.stdin.read()
        where = "standard input"
    else:
        p = Path(source)
        if not p.is_file():
            raise UsageError(f"batch file {source} does not exist.")
        text = p.read_text(encoding="utf-8")
        where = source
    try:
        calls = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}).") from e
    if not isinstance(calls, list):
        raise UsageError(f"{where}: a batch is a JSON array of calls, not a {type(calls).__name__}.")
    return calls


async def _with_session(args: argparse.Namespace, body: Callable[[Session], Awaitable[int]]) -> int:
    rt = _runtime(args)
    try:
        session = rt.session(args.session)
        await session.open()
        loop = asyncio.get_running_loop()
        interrupted = {"n": 0}

        def on_sigint() -> None:
            interrupted["n"] += 1
            if interrupted["n"] == 1:
                print("\nzuno: cancelling the step (Ctrl-C again to abandon it)", file=sys.stderr)
                session.cancel()
            else:
                os._exit(130)

        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            return await body(session)
        finally:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (NotImplementedError, RuntimeError):
                pass
            await session.close()
    finally:
        await rt.aclose()


def cmd_batch(args: argparse.Namespace) -> int:
    calls = _read_calls(args.file)

    async def body(session: Session) -> int:
        result = await session.step(calls)
        _print_json(result.to_json())
        return EXIT_OK

    return asyncio.run(_with_session(args, body))


def cmd_steps(args: argparse.Namespace) -> int:
    """JSON Lines in, one step (a JSON array of calls) per line; one single-line JSON object out per
    step, in the batch shape. One session, one process: background jobs live until the input ends,
    then their groups are stopped and their end recorded (the session's close)."""
    if args.file not in (None, "-") and not Path(args.file).is_file():
        raise UsageError(f"steps file {args.file} does not exist.")

    async def body(session: Session) -> int:
        from zuno.jobs import JobManager

        # The session's job service from the start: jobs an earlier process of this session left
        # behind (it died; its guards killed their groups) are recorded and reported in step 1.
        JobManager.for_session(session)
        loop = asyncio.get_running_loop()
        stream = sys.stdin if args.file in (None, "-") else open(args.file, encoding="utf-8")  # noqa: ASYNC230
        lines: asyncio.Queue[str] = asyncio.Queue()

        def reader() -> None:  # a daemon thread: a blocked read never holds the process open
            try:
                for raw in iter(stream.readline, ""):
                    loop.call_soon_threadsafe(lines.put_nowait, raw)
            except (OSError, ValueError):
                pass
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(lines.put_nowait, "")

        def on_term() -> None:  # SIGTERM / SIGHUP end the input: jobs are stopped and recorded
            print("zuno: terminating: stopping background jobs", file=sys.stderr)
            lines.put_nowait("")

        for sig in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_term)
        threading.Thread(target=reader, name="zuno-steps-input", daemon=True).start()
        bad = 0
        try:
            lineno = 0
            while True:
                line = await lines.get()
                if not line:
                    break
                lineno += 1
                if not line.strip():
                    continue
                try:
                    calls = json.loads(line)
                except json.JSONDecodeError as e:
                    bad += 1
                    _print_line({"line": lineno, "error": f"not valid JSON ({e.msg} at column {e.colno}); not run."})
                    continue
                if not isinstance(calls, list):
                    bad += 1
                    _print_line(
                        {
                            "line": lineno,
                            "error": f"a step is a JSON array of calls, not a {type(calls).__name__}; not run.",
                        }
                    )
                    continue
                result = await session.step(calls)
                _print_line(result.to_json())
        finally:
            for sig in (signal.SIGTERM, signal.SIGHUP):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
            if stream is not sys.stdin:
                stream.close()
        return EXIT_USAGE if bad else EXIT_OK

    return asyncio.run(_with_session(args, body))


def _print_line(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments) if args.arguments else {}
    except json.JSONDecodeError as e:
        raise UsageError(f"ARGS_JSON is not valid JSON ({e.msg} at column {e.colno}).") from e
    call = {"name": args.name, "arguments": arguments}

    async def body(session: Session) -> int:
        result = await session.step([call])
        if args.json:
            rec = result.results[0].to_json()
            _print_json({"session": result.session, "step": result.step, "notices": result.notices, **rec})
        else:
            for n in result.notices:
                print(f"[notice] {n['text']}", file=sys.stderr)
            sys.stdout.write(result.results[0].text + "\n")
        return EXIT_OK

    return asyncio.run(_with_session(args, body))


def cmd_tools(args: argparse.Namespace) -> int:
    rt = _runtime(args)
    try:
        rows = []
        for name, tool in rt.surface.tools.items():
            row: dict[str, Any] = {
                "name": name,
                "description": tool.description,
                "declarations": tool.declarations.as_dict(),
                "inputSchema": tool.input_schema(),
            }
            if tool.action_effects is not None:
                row["classifiedBy"] = "action"
                row["actionEffects"] = {k: str(v) for k, v in tool.action_effects.items()}
            rows.append(row)
        if args.json:
            _print_json({"profile": rt.surface.profile, "tools": rows, "unavailable": rt.surface.disabled})
        else:
            for r in rows:
                d = r["declarations"]
                first = r["description"].split(". ")[0].rstrip(".")
                print(f"{r['name']:<14} {d['effect']:<13} {d['replay']:<5} {d['concurrency']:<18} {first}")
                if "actionEffects" in r:  # a mixed tool: its effect is read from the validated action
                    by = ", ".join(f"{a} {e}" for a, e in r["actionEffects"].items())
                    print(f"{'':<14} by action: {by}")
            for name, why in rt.surface.disabled.items():
                print(f"{name:<14} (unavailable: {why})")
        return EXIT_OK
    finally:
        asyncio.run(rt.aclose())


def cmd_events(args: argparse.Namespace) -> int:
    rt = _runtime(args)
    try:
        if not rt.store.session_exists(args.session):
            raise UsageError(f"no session {args.session!r} in {rt.store.path}.")
        events = rt.store.events(args.session)
        if args.json:
            _print_json({"session": args.session, "events": events})
        else:
            for e in events:
                who = f" {e['call_id']}" if e["call_id"] else ""
                print(
                    f"{e['seq']:>6} step {e['step'] or '-':>3}{who} {e['kind']} "
                    + json.dumps(e["data"], ensure_ascii=False)
                )
        return EXIT_OK
    finally:
        asyncio.run(rt.aclose())


def cmd_receipt(args: argparse.Namespace) -> int:
    from zuno.tools.shell.receipts import get_receipt, render_receipt

    if not args.receipt_id.startswith("rcp_"):
        raise UsageError(f"{args.receipt_id!r} is not a verification receipt id (they look like rcp_…).")
    rt = _runtime(args)
    try:
        r = get_receipt(rt.store, args.receipt_id)
        if r is None:
            raise UsageError(f"no verification receipt {args.receipt_id!r} in {rt.store.path}.")
        if args.json:
            _print_json(r)
        else:
            print(render_receipt(r))
        return EXIT_OK
    finally:
        asyncio.run(rt.aclose())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zuno", description="A tool runtime for coding agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("batch", help="run a JSON array of calls as one model step")
    p.add_argument("file", nargs="?", default="-", help="a JSON file, or - for standard input")
    _common(p)
    p.set_defaults(func=cmd_batch)

    p = sub.add_parser("steps", help="run JSON Lines, one step (array of calls) per line, in one session")
    p.add_argument("file", nargs="?", default="-", help="a JSON Lines file, or - for standard input")
    _common(p)
    p.set_defaults(func=cmd_steps)

    p = sub.add_parser("call", help="run one call")
    p.add_argument("name")
    p.add_argument("arguments", nargs="?", default=None, help="the arguments as a JSON object")
    p.add_argument("--json", action="store_true", help="print the whole record as JSON")
    _common(p)
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("tools", help="list the tool surface with declarations")
    p.add_argument("--json", action="store_true")
    _common(p, session=False)
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("events", help="list a session's durable events")
    p.add_argument("--json", action="store_true")
    _common(p, session=False)
    p.add_argument("--session", required=True)
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("receipt", help="show a stored verification receipt (rcp_…) of a shell call")
    p.add_argument("receipt_id", metavar="RCP_ID")
    p.add_argument("--json", action="store_true")
    _common(p, session=False)
    p.set_defaults(func=cmd_receipt)

    # Commands that live in their own modules (zuno.commands.*): each adds its parser.
    for module in command_modules():
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    except AttributeError:
        pass
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (UsageError, ConfigError, SessionBusy) as e:
        print(f"zuno: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
