"""``zuno run`` and ``zuno resume``: drive an agent session with a model.

    zuno run [PROMPT] [--model ID/NAME] [--mode plan|work|goal] [--session ID | --continue] [--json]
    zuno resume ID [PROMPT] [--model ID/NAME] [--mode ...] [--json]

One-shot with a prompt (or a prompt on standard input); interactive when no prompt is given on a
terminal. ``--json`` prints one final object (session, stop_reason, final_text, steps, usage).
Ctrl-C cancels the model's answer or the running step; a second Ctrl-C exits (130), after the
session's jobs are stopped. Exit status: 0 an ordinary final, 1 any other stop, 2 nothing run
(usage, configuration, no provider), 130 interrupted, 143 terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from zuno.agent.api import Agent, NoProvider, RunResult
from zuno.agent.events import AgentEvent, NoticeEvent, StopEvent, TextEvent, ToolCallEvent, ToolResultEvent
from zuno.agent.transcript import MODES
from zuno.cli_support import (
    EXIT_INTERRUPTED,
    EXIT_NOT_OK,
    EXIT_OK,
    EXIT_TERMINATED,
    UsageError,
    add_common_arguments,
    print_json,
    runtime_from_args,
)
from zuno.session_ids import InvalidSessionId, SessionNotFound
from zuno.store import SessionBusy

NO_MODEL_HELP = (
    'no model is configured. Set "model": "<provider id>/<model name>" in zuno.json (with its '
    '"provider.<id>" entry: api, options.baseURL, options.apiKey), or pass --model; the built-in '
    "providers need only OPENAI_API_KEY (--model openai/<name>) or ANTHROPIC_API_KEY (--model anthropic/<name>)."
)
TOOL_LINE_MAX = 100


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="run the agent on a prompt (interactive without one on a terminal)")
    p.add_argument("prompt", nargs="?", default=None, help="the prompt (default: standard input, or interactive)")
    _agent_options(p)
    add_common_arguments(p)
    p.add_argument("--continue", "-c", dest="continue_latest", action="store_true", help="continue the latest session")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("resume", help="resume an agent session (after an interruption or a crash)")
    p.add_argument("session_id", metavar="ID")
    p.add_argument("prompt", nargs="?", default=None, help="a new prompt (default: continue where it stopped)")
    _agent_options(p)
    add_common_arguments(p, session=False)
    p.set_defaults(func=cmd_resume)


def _agent_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="the model, <provider id>/<model name> (overrides config model)")
    p.add_argument("--mode", choices=MODES, default=None, help="plan, work or goal (kept by the session)")
    p.add_argument("--json", action="store_true", help="print one final JSON object")


def cmd_run(args: argparse.Namespace) -> int:
    if args.session and args.continue_latest:
        raise UsageError("--session and --continue name the session twice: give one of them.")
    prompt = args.prompt
    interactive = False
    if prompt is None:
        if sys.stdin.isatty():
            interactive = not args.json
            if not interactive:
                raise UsageError("--json needs a prompt: give it as an argument or on standard input.")
        else:
            prompt = sys.stdin.read()
            if not prompt.strip():
                raise UsageError("the prompt on standard input is empty: give a prompt.")
    return _main(args, args.session, args.continue_latest, prompt, interactive, resume=False)


def cmd_resume(args: argparse.Namespace) -> int:
    return _main(args, args.session_id, False, args.prompt, False, resume=True)


def _main(
    args: argparse.Namespace,
    session: str | None,
    continue_latest: bool,
    prompt: str | None,
    interactive: bool,
    *,
    resume: bool,
) -> int:
    rt = runtime_from_args(args)
    try:
        try:
            sid = rt.resolve_session(session, continue_latest=continue_latest)
        except (InvalidSessionId, SessionNotFound) as e:
            raise UsageError(str(e)) from None
        if args.model is None and getattr(rt.config, "model", None) in (None, ""):
            raise UsageError(NO_MODEL_HELP)
        agent = Agent(rt, model=args.model, mode=args.mode, session_id=sid)
        view = _View(json_mode=args.json)
        if interactive:
            return _interactive(agent, view)
        return asyncio.run(_one_shot(agent, view, prompt, resume=resume, json_mode=args.json))
    finally:
        asyncio.run(rt.aclose())


async def _one_shot(agent: Agent, view: _View, prompt: str | None, *, resume: bool, json_mode: bool) -> int:
    await _open(agent)
    status: dict[str, int] = {}
    try:
        with _signals(agent, status):
            try:
                result = await agent.run(prompt, on_event=view.on_event, resume=resume)
            except asyncio.CancelledError:
                return status.get("exit", EXIT_INTERRUPTED)
    finally:
        await agent.close()
    view.end()
    if json_mode:
        print_json(result.to_json())
    if "exit" in status:
        return status["exit"]
    return _exit_status(result)


async def _open(agent: Agent) -> None:
    try:
        await agent.open()
    except (NoProvider, SessionBusy) as e:
        await agent.close()
        raise UsageError(str(e)) from None


def _exit_status(result: RunResult) -> int:
    if result.stop_reason == "final":
        return EXIT_OK
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_NOT_OK


@contextlib.contextmanager
def _signals(agent: Agent, status: dict[str, int]) -> Any:
    """Ctrl-C: the first interrupts the turn (the stream or the step), a second exits (the main
    task is cancelled, the session closes and stops its jobs). SIGTERM exits at once."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    count = {"n": 0}

    def on_sigint() -> None:
        count["n"] += 1
        if count["n"] == 1:
            print("\nzuno: interrupting (Ctrl-C again to exit)", file=sys.stderr, flush=True)
            agent.interrupt()
        else:
            status["exit"] = EXIT_INTERRUPTED
            if main is not None:
                main.cancel()

    def on_sigterm() -> None:
        status["exit"] = EXIT_TERMINATED
        if main is not None:
            main.cancel()

    installed = []
    for sig, fn in ((signal.SIGINT, on_sigint), (signal.SIGTERM, on_sigterm)):
        try:
            loop.add_signal_handler(sig, fn)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        yield count
    finally:
        for sig in installed:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def _interactive(agent: Agent, view: _View) -> int:
    """A line editor with history; each line is one turn. /mode plan|work|goal switches the mode,
    /exit (or Ctrl-D) leaves."""
    try:
        import readline
    except ImportError:  # pragma: no cover - readline is part of CPython on Linux and macOS
        readline = None  # type: ignore[assignment]
    history = Path(os.environ.get("ZUNO_CONFIG_DIR") or Path.home() / ".config" / "zuno") / "history"
    if readline is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    loop = asyncio.new_event_loop()
    code = EXIT_OK
    try:
        loop.run_until_complete(_open(agent))
        print(f"zuno: session {agent.id}, mode {agent.transcript.state().mode}. /mode, /exit; Ctrl-C interrupts.")
        while True:
            try:
                line = input("zuno> ")
            except EOFError:
                print()
                break
            except KeyboardInterrupt:
                print()
                continue
            line = line.strip()
            if not line:
                continue
            if line in ("/exit", "/quit"):
                break
            if line.startswith("/mode"):
                want = line.split()[1:] or [""]
                if want[0] not in MODES:
                    print(f"zuno: /mode {' | '.join(MODES)}")
                else:
                    agent.set_mode(want[0])  # type: ignore[arg-type]
                    print(f"zuno: mode {want[0]}")
                continue
            status: dict[str, int] = {}

            async def turn(text: str = line, status: dict[str, int] = status) -> None:
                with _signals(agent, status):
                    await agent.run(text, on_event=view.on_event)

            task = loop.create_task(turn())
            try:
                loop.run_until_complete(task)
            except asyncio.CancelledError:
                code = status.get("exit", EXIT_INTERRUPTED)
                break
            view.end()
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                history.parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(history)
        loop.run_until_complete(agent.close())
        loop.close()
    return code


class _View:
    """The live terminal view: streamed text on stdout, one compact line per tool call on stderr."""

    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode
        self.mid_line = False
        self.calls: dict[str, str] = {}

    def _err(self, text: str) -> None:
        if self.mid_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False
        print(text, file=sys.stderr, flush=True)

    def on_event(self, ev: AgentEvent) -> None:
        if isinstance(ev, TextEvent):
            if not self.json_mode:
                sys.stdout.write(ev.text)
                sys.stdout.flush()
                self.mid_line = not ev.text.endswith("\n")
        elif isinstance(ev, ToolCallEvent):
            self.calls[ev.call_id] = f"{ev.name} {ev.arguments}"
        elif isinstance(ev, ToolResultEvent):
            what = self.calls.pop(ev.call_id, ev.name)
            if len(what) > TOOL_LINE_MAX:
                what = what[: TOOL_LINE_MAX - 1] + "…"
            self._err(f"  · {what} → {ev.outcome}{' (cancelled)' if ev.cancelled else ''}")
        elif isinstance(ev, NoticeEvent):
            self._err(f"  · notice: {ev.text.splitlines()[0][:TOOL_LINE_MAX]}")
        elif isinstance(ev, StopEvent) and ev.stop_reason != "final":
            self._err(f"zuno: stopped: {ev.stop_reason} ({ev.detail})")

    def end(self) -> None:
        if self.mid_line and not self.json_mode:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.mid_line = False
