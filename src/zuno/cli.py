"""The zuno command: batch, steps, call, tools, events, receipt (and the commands in
``zuno.commands``: sessions, version).

Exit statuses, every command (docs/cli.md): 0 the work succeeded (``zuno call``: the call's
outcome was ok; ``zuno batch`` / ``zuno steps``: every call's outcome was ok); 1 it ran but did not
succeed (an outcome other than ok, or a ``zuno steps`` line that could not be run); 2 usage or
configuration error, nothing run; 130 interrupted (SIGINT); 143 terminated (SIGTERM). No command
prints a traceback: an unusable input is one line naming the file, the problem and the fix.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.cli_support import (
    EXIT_INTERRUPTED,
    EXIT_NOT_OK,
    EXIT_OK,
    EXIT_USAGE,
    RUNTIME_IMPORTS,
    STORE_IMPORTS,
    Terminated,
    UsageError,
    add_common_arguments,
    add_session_arguments,
    hoist_common_options,
    print_json,
    runtime_from_args,
    status_of_interrupted_wait,
    store_from_args,
)
from zuno.commands import command_modules
from zuno.commands.version import zuno_version
from zuno.declarations import Outcome
from zuno.startup_gc import StartupCollection

if TYPE_CHECKING:  # loaded by the commands that build a runtime; `zuno --version` needs none of them
    from zuno.cli_session import StopSignals
    from zuno.records import StepResult
    from zuno.runtime import Session

# The errors that mean "unusable input or configuration, nothing run" (exit 2). Their classes live in
# modules that a command may never load (`zuno --version` loads neither the config nor the store),
# and an instance of one can only exist once its module is loaded: main() catches those loaded.
USAGE_ERRORS = (
    ("zuno.cli_support", "UsageError"),
    ("zuno.config", "ConfigError"),
    ("zuno.store.sqlite", "SessionBusy"),
    ("zuno.store.paths", "StoreUnusable"),
    ("zuno.session_ids", "InvalidSessionId"),
    ("zuno.session_ids", "SessionNotFound"),
)


def _usage_errors() -> tuple[type[BaseException], ...]:
    return tuple(getattr(sys.modules[m], name) for m, name in USAGE_ERRORS if m in sys.modules)


def _sqlite_errors() -> tuple[type[BaseException], ...]:
    """sqlite3.Error once sqlite3 is loaded (only then can one be raised; `zuno --version` never loads it)."""
    sqlite3 = sys.modules.get("sqlite3")
    return (sqlite3.Error,) if sqlite3 is not None else ()


_print_json = print_json
_runtime = runtime_from_args
_common = add_common_arguments


def _step_status(result: StepResult) -> int:
    return EXIT_OK if all(r.outcome is Outcome.ok for r in result.results) else EXIT_NOT_OK


# The commands that run calls drive a session (zuno.cli_session, and asyncio): imported with the runtime.
SESSION_IMPORTS = (*RUNTIME_IMPORTS, "zuno.cli_session")


def cmd_batch(args: argparse.Namespace) -> int:
    from zuno.cli_session import read_calls, run

    calls = read_calls(args.file)

    async def body(session: Session, stop: StopSignals) -> int:
        result = await session.step(calls)
        _print_json(result.to_json())
        return _step_status(result)

    return run(args, body)


def cmd_steps(args: argparse.Namespace) -> int:
    """JSON Lines in, one step (a JSON array of calls) per line; one single-line JSON object out per
    step, in the batch shape. One session, one process: background jobs live until the input ends,
    then their groups are stopped and their end recorded (the session's close)."""
    import asyncio

    from zuno.cli_session import decode_utf8, parse_json, run

    fd = sys.stdin.fileno() if args.file in (None, "-") else -1
    if args.file not in (None, "-"):
        p = Path(args.file)
        if p.is_dir():
            raise UsageError(f"steps file {args.file} is a directory, not a file. Name a JSON Lines file.")
        if not p.exists():
            raise UsageError(f"steps file {args.file} does not exist. Check the path, or use - for standard input.")
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))  # closed when the input ends
            try:
                os.pread(fd, 1, 0)  # readable at all? (before the session opens and writes anything)
            except OSError:
                os.close(fd)
                raise
        except OSError as e:
            raise UsageError(f"steps file {args.file} cannot be read ({e.strerror}). Check its permissions.") from None

    async def body(session: Session, stop: StopSignals) -> int:
        from zuno.jobs import JobManager

        # The session's job service from the start: jobs an earlier process of this session left
        # behind (it died; its guards killed their groups) are recorded and reported in step 1.
        JobManager.for_session(session)
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        read_error: list[str] = []

        def reader() -> None:
            # A daemon thread reading the descriptor itself (no buffered file object, whose lock a
            # blocked read would hold at interpreter exit): a blocked read never holds the process.
            parts: list[bytes] = []  # the line read so far (only new bytes are searched for newlines)
            try:
                while chunk := os.read(fd, 1 << 16):
                    *complete, rest = chunk.split(b"\n")
                    if complete:
                        complete[0] = b"".join([*parts, complete[0]])
                        for raw in complete:
                            loop.call_soon_threadsafe(lines.put_nowait, raw)
                        parts = []
                    parts.append(rest)
                if tail := b"".join(parts):
                    loop.call_soon_threadsafe(lines.put_nowait, tail)
            except OSError as e:
                read_error.append(e.strerror or str(e))
            except (ValueError, RuntimeError):
                pass
            finally:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(lines.put_nowait, None)

        def end_input() -> None:  # SIGINT / SIGTERM / SIGHUP end the input: jobs are stopped and recorded
            print("zuno: stopping background jobs", file=sys.stderr)
            lines.put_nowait(None)

        stop.listeners.append(end_input)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGHUP, end_input)
        threading.Thread(target=reader, name="zuno-steps-input", daemon=True).start()
        status = EXIT_OK
        try:
            lineno = 0
            while True:
                raw = await lines.get()
                if raw is None or stop.status is not None:
                    break
                lineno += 1
                if not raw.strip():
                    continue
                try:
                    calls = parse_json(decode_utf8(raw, f"line {lineno}"), f"line {lineno}")
                except UsageError as e:
                    status = EXIT_NOT_OK
                    _print_line({"line": lineno, "error": f"{e} Not run."})
                    continue
                if not isinstance(calls, list):
                    from zuno.config import json_type_name

                    status = EXIT_NOT_OK
                    _print_line(
                        {
                            "line": lineno,
                            "error": f"line {lineno}: a step is a JSON array of calls, not {json_type_name(calls)}"
                            + (" (one call: wrap it in [ ])" if isinstance(calls, dict) else "")
                            + ". Not run.",
                        }
                    )
                    continue
                result = await session.step(calls)
                _print_line(result.to_json())
                if _step_status(result) != EXIT_OK:
                    status = EXIT_NOT_OK
            if read_error:
                where = "standard input" if args.file in (None, "-") else f"steps file {args.file}"
                print(f"zuno: {where} cannot be read ({read_error[0]}). Check the file.", file=sys.stderr)
                status = EXIT_USAGE if lineno == 0 else EXIT_NOT_OK
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGHUP)
            if args.file not in (None, "-"):
                with contextlib.suppress(OSError):
                    os.close(fd)
        return status

    return run(args, body)


def _print_line(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def cmd_call(args: argparse.Namespace) -> int:
    from zuno.cli_session import parse_json, run

    arguments = parse_json(args.arguments, "ARGS_JSON") if args.arguments else {}
    call = {"name": args.name, "arguments": arguments}

    async def body(session: Session, stop: StopSignals) -> int:
        if not args.json:
            print(f"zuno: session {session.id} (continue it with -c or --session {session.id})", file=sys.stderr)
        result = await session.step([call])
        rec = result.results[0]
        if args.json:
            _print_json({"session": result.session, "step": result.step, "notices": result.notices, **rec.to_json()})
        else:
            for n in result.notices:
                print(f"[notice] {_call_text_for(sys.stderr, n['text'])}", file=sys.stderr)
            sys.stdout.write(_call_text_for(sys.stdout, rec.text) + "\n")
        return EXIT_OK if rec.outcome is Outcome.ok else EXIT_NOT_OK

    return run(args, body)


def _call_text_for(stream: Any, text: str) -> str:
    """``zuno call``'s human text as it goes to ``stream``: on a terminal its control characters
    (escape sequences, carriage returns, bells) and bidi controls are shown, never obeyed (a file
    read may hold any of them); to a pipe or a file the text exactly as the model sees it."""
    if not _is_terminal(stream):
        return text
    from zuno.commands.terminal_markdown import visible_controls

    return visible_controls(text)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def cmd_tools(args: argparse.Namespace) -> int:
    import asyncio

    from zuno.permissions import denied_outright

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
            # Refused whatever its arguments (a deny rule without a pattern): the model is not offered it
            # (Session.visible_tools, zuno mcp's tools/list); the rule, as written in the config.
            if (rule := denied_outright(rt.config.permission, name)) is not None:
                row["deniedBy"] = rule.model_dump(exclude_none=True)
            rows.append(row)
        if args.json:
            _print_json({"profile": rt.surface.profile, "tools": rows, "unavailable": rt.surface.disabled})
        else:
            _print_tool_rows(rows, rt.surface.disabled)
        return EXIT_OK
    finally:
        asyncio.run(rt.aclose())


def _print_tool_rows(rows: list[dict[str, Any]], disabled: dict[str, str]) -> None:
    """``zuno tools`` for a human: a line per tool, its text's control characters shown, never obeyed
    (an extension's or a connected MCP server's description is not Zuno's)."""
    from zuno.commands.terminal_markdown import visible_controls

    def out(line: str) -> None:
        print(visible_controls(line))

    for r in rows:
        d = r["declarations"]
        first = r["description"].split("\n")[0].split(". ")[0].rstrip(".")
        out(f"{r['name']:<14} {d['effect']:<13} {d['replay']:<5} {d['concurrency']:<18} {first}")
        if "actionEffects" in r:  # a mixed tool: its effect is read from the validated action
            by = ", ".join(f"{a} {e}" for a, e in r["actionEffects"].items())
            out(f"{'':<14} by action: {by}")
        if "deniedBy" in r:  # not offered to the model: every call would be refused
            rule = json.dumps(r["deniedBy"], ensure_ascii=False)
            out(f"{'':<14} not offered: every call is denied by permission rule {rule}")
    for name, why in disabled.items():
        out(f"{name:<14} (unavailable: {why})")


def cmd_events(args: argparse.Namespace) -> int:
    rt = store_from_args(args)  # only the store: no tool surface
    try:
        sid = rt.resolve_session(args.session, continue_latest=args.continue_latest)
        store = rt.existing_store()
        assert sid is not None and store is not None
        events = store.events(sid)
        if args.json:
            _print_json({"session": sid, "events": events})
        else:
            from zuno.commands.terminal_markdown import visible_controls  # an event's text shown, never obeyed

            for e in events:
                who = f" {e['call_id']}" if e["call_id"] else ""
                line = f"{e['seq']:>6} step {e['step'] or '-':>3}{who} {e['kind']} " + json.dumps(
                    e["data"], ensure_ascii=False
                )
                print(visible_controls(line))
        return EXIT_OK
    finally:
        rt.close_stores()


def cmd_receipt(args: argparse.Namespace) -> int:
    from zuno.tools.shell.receipts import render_receipt

    if not args.receipt_id.startswith("rcp_"):
        raise UsageError(f"{args.receipt_id!r} is not a verification receipt id (they look like rcp_…).")
    rt = store_from_args(args)  # only the store: no tool surface
    try:
        r = rt.receipt(args.receipt_id)
        if r is None:
            raise UsageError(f"no verification receipt {args.receipt_id!r} in {rt.db_path}.")
        if args.json:
            _print_json(r)
        else:
            print(render_receipt(r))
        return EXIT_OK
    finally:
        rt.close_stores()


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for (not at every start)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        sys.stdout.write(f"zuno {zuno_version()}\n")  # on standard output, as argparse's own action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zuno", description="A tool runtime for coding agents.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("batch", help="run a JSON array of calls as one model step")
    p.add_argument("file", nargs="?", default="-", help="a JSON file, or - for standard input")
    _common(p, session=False)
    add_session_arguments(p, new=True)
    p.set_defaults(func=cmd_batch, imports=SESSION_IMPORTS)

    p = sub.add_parser("steps", help="run JSON Lines, one step (array of calls) per line, in one session")
    p.add_argument("file", nargs="?", default="-", help="a JSON Lines file, or - for standard input")
    _common(p, session=False)
    add_session_arguments(p, new=True)
    p.set_defaults(func=cmd_steps, imports=SESSION_IMPORTS)

    p = sub.add_parser("call", help="run one call")
    p.add_argument("name", metavar="NAME", help="the tool to call")
    p.add_argument("arguments", metavar="ARGS_JSON", nargs="?", default=None, help="the arguments as a JSON object")
    p.add_argument("--json", action="store_true", help="print the whole record as JSON")
    _common(p, session=False)
    add_session_arguments(p, new=True)
    p.set_defaults(func=cmd_call, imports=SESSION_IMPORTS)

    p = sub.add_parser("tools", help="list the tool surface with declarations")
    p.add_argument("--json", action="store_true")
    _common(p, session=False)
    p.set_defaults(func=cmd_tools, imports=RUNTIME_IMPORTS)

    p = sub.add_parser("events", help="list a session's durable events")
    p.add_argument("--json", action="store_true")
    _common(p, session=False)
    add_session_arguments(p, required=True)
    p.set_defaults(func=cmd_events, imports=STORE_IMPORTS)

    p = sub.add_parser("receipt", help="show a stored verification receipt (rcp_…) of a shell call")
    p.add_argument("receipt_id", metavar="RCP_ID")
    p.add_argument("--json", action="store_true")
    _common(p, session=False)
    p.set_defaults(func=cmd_receipt, imports=STORE_IMPORTS)

    # Commands that live in their own modules (zuno.commands.*): each adds its parser.
    for module in command_modules():
        module.add_parser(sub)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    try:
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    except AttributeError:
        pass
    startup = StartupCollection()
    try:
        return _run_parsed(argv, startup)
    finally:
        startup.settle()  # (a command that paused the collector settles it itself; this is the net)


def _run_parsed(argv: list[str] | None, startup: StartupCollection) -> int:
    try:
        args = build_parser().parse_args(hoist_common_options(sys.argv[1:] if argv is None else argv))
        if getattr(args, "long_lived", False):
            # The command builds what it keeps until exit (see zuno.startup_gc); it settles
            # ``args.startup`` once that is built.
            startup.pause()
        args.startup = startup
        # What the command runs is imported now, before the SIGTERM handler is installed (as all of
        # Zuno was imported before its imports were made lazy): a signal never lands in an import.
        for module in getattr(args, "imports", ()):
            importlib.import_module(module)
    except KeyboardInterrupt:
        print("zuno: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    # Outside a running session (whose loop handles it: the step is cancelled and settles), SIGTERM
    # stops the command with 143 rather than killing it mid-write without a word.
    with contextlib.suppress(ValueError):  # not the main thread (an embedding caller)
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args))
    except _usage_errors() as e:
        print(f"zuno: {e}", file=sys.stderr)
        if (status := status_of_interrupted_wait(e)) is not None:  # Ctrl-C during a store's busy wait
            return status
        return EXIT_NOT_OK if getattr(e, "ran", False) else EXIT_USAGE  # ran: a locked store, mid-call
    except _sqlite_errors() as e:
        where = getattr(args, "db", None) or os.environ.get("ZUNO_DB") or "the store"
        print(f"zuno: {where} cannot be used ({e}). Check the file, or name another with --db.", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("zuno: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated as e:
        print("zuno: terminated", file=sys.stderr)
        return e.status
    except BrokenPipeError:
        with contextlib.suppress(OSError):  # the reader went away: say nothing more on stdout
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_NOT_OK
    except Exception as e:  # a bug in zuno itself: one line, never a traceback
        print(
            f"zuno: internal error: {type(e).__name__}: {e}. Nothing more was run; please report it.",
            file=sys.stderr,
        )
        return EXIT_NOT_OK
