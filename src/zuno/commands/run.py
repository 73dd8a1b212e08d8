"""``zuno run`` and ``zuno resume``: drive an agent session with a model.

    zuno run [PROMPT] [--model ID/NAME] [--mode plan|work|goal] [--session ID | --continue] [--json]
    zuno resume ID [PROMPT] [--model ID/NAME] [--mode ...] [--json]

One-shot with a prompt (or a prompt on standard input); interactive when no prompt is given on a
terminal. ``--json`` prints one final object (session, stop_reason, final_text, steps, usage).
Ctrl-C cancels the model's answer or the running step; a second Ctrl-C exits (130), after the
session's jobs are stopped. Exit status: 0 an ordinary final, 1 any other stop, 2 nothing run
(usage, configuration, no provider), 130 interrupted, 143 terminated, 129 hung up. A store that
another process keeps locked is said as ``zuno call`` says it (the file, what became of the call),
with what became of the run: 1 when anything ran (a request to the model, a call), else 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.cli_support import (
    EXIT_HANGUP,
    EXIT_INTERRUPTED,
    EXIT_NOT_OK,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    RUNTIME_IMPORTS,
    Terminated,
    UsageError,
    add_common_arguments,
    add_session_arguments,
    approver_from_args,
    print_json,
    resolve_or_start,
    runtime_from_args,
    status_of_interrupted_wait,
)
from zuno.limits import RUN_HISTORY_LINES
from zuno.session_ids import InvalidSessionId, SessionNotFound
from zuno.startup_gc import StartupCollection

if TYPE_CHECKING:  # the agent (and asyncio) load when the command runs, not when the parser is built
    import asyncio

    from zuno.agent.api import Agent, RunResult
    from zuno.agent.events import AgentEvent
    from zuno.commands.run_view import InlineApprover, View
    from zuno.permissions import Approver
    from zuno.store.paths import StoreUnusable

# The session modes (zuno.agent.items.MODES, which a test holds this equal to), spelled here
# so that building the parser does not load the agent.
MODES = ("plan", "work", "goal")

NO_MODEL_HELP = (
    'no model is configured. Set "model": "<provider id>/<model name>" in zuno.json (with its '
    '"provider.<id>" entry: api, options.baseURL, options.apiKey), or pass --model; the built-in '
    "providers need only OPENAI_API_KEY (--model openai/<name>) or ANTHROPIC_API_KEY (--model anthropic/<name>)."
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="run the agent on a prompt (interactive without one on a terminal)")
    p.add_argument("prompt", nargs="?", default=None, help="the prompt (default: standard input, or interactive)")
    _agent_options(p)
    add_common_arguments(p, session=False)
    add_session_arguments(p)
    p.set_defaults(
        func=cmd_run, imports=(*RUNTIME_IMPORTS, "zuno.agent.api", "zuno.commands.run_view"), long_lived=True
    )

    p = sub.add_parser("resume", help="resume an agent session (after an interruption or a crash)")
    p.add_argument("session_id", metavar="ID")
    p.add_argument("prompt", nargs="?", default=None, help="a new prompt (default: continue where it stopped)")
    _agent_options(p)
    add_common_arguments(p, session=False)
    p.set_defaults(
        func=cmd_resume, imports=(*RUNTIME_IMPORTS, "zuno.agent.api", "zuno.commands.run_view"), long_lived=True
    )


def _agent_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="the model, <provider id>/<model name> (overrides config model)")
    p.add_argument("--mode", choices=MODES, default=None, help="plan, work or goal (kept by the session)")
    p.add_argument("--json", action="store_true", help="print one final JSON object")


def _checked_prompt(prompt: str, where: str) -> str:
    """The prompt as given, or a UsageError (nothing run) when it is blank or not UTF-8 (an
    argument or a pipe holding bytes that are not text reach Python as lone surrogates)."""
    from zuno.agent.prompt_check import prompt_problem  # light; not loaded by the printing commands

    problem = prompt_problem(prompt)
    if problem is not None:
        raise UsageError(f"the prompt {where} {problem}")
    return prompt


def _stdin_prompt() -> str:
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(
            f"the prompt on standard input is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}): "
            "give the prompt as UTF-8."
        ) from None
    return _checked_prompt(text, "on standard input")


def cmd_run(args: argparse.Namespace) -> int:
    prompt = args.prompt
    interactive = False
    if prompt is None:
        if sys.stdin.isatty():
            interactive = not args.json
            if not interactive:
                raise UsageError("--json needs a prompt: give it as an argument or on standard input.")
        else:
            prompt = _stdin_prompt()
    else:
        prompt = _checked_prompt(prompt, "given as an argument")
    return _main(args, args.session, args.continue_latest, prompt, interactive)


def cmd_resume(args: argparse.Namespace) -> int:
    prompt = args.prompt if args.prompt is None else _checked_prompt(args.prompt, "given as an argument")
    return _main(args, args.session_id, False, prompt, False, starts=False)


def _main(
    args: argparse.Namespace,
    session: str | None,
    continue_latest: bool,
    prompt: str | None,
    interactive: bool,
    starts: bool = True,
) -> int:
    # Collection paused (by the CLI's main already, before the command's imports) until the agent is
    # open: what it builds lives until exit (see zuno.startup_gc).
    startup: StartupCollection = getattr(args, "startup", None) or StartupCollection()
    startup.pause()
    try:
        return _run_agent(args, session, continue_latest, prompt, interactive, startup, starts)
    finally:
        startup.settle()


def _run_agent(
    args: argparse.Namespace,
    session: str | None,
    continue_latest: bool,
    prompt: str | None,
    interactive: bool,
    startup: StartupCollection,
    starts: bool,
) -> int:
    import asyncio

    from zuno.agent.api import Agent
    from zuno.commands.run_view import InlineApprover, PausingApprover, View
    from zuno.store.paths import StoreUnusable

    view = View(json_mode=args.json)
    inline: InlineApprover | None = None
    if not args.approve and sys.stdin.isatty() and sys.stderr.isatty():
        # asked in this terminal session, read by the event loop (a Ctrl-C at it is a refusal)
        inline = InlineApprover(view)
        approver: Approver = inline
    else:
        approver = PausingApprover(approver_from_args(args), view)
    rt = runtime_from_args(args, approver)
    ran = _Ran(view)
    try:
        try:
            sid = resolve_or_start(rt, session, continue_latest) if starts else rt.resolve_session(session)
        except SessionNotFound as e:
            if not starts:  # zuno resume ID: it has no --session
                raise UsageError(f'{e} Or start a new one with zuno run "…".') from None
            raise UsageError(str(e)) from None
        except InvalidSessionId as e:
            raise UsageError(str(e)) from None
        if args.model is None and getattr(rt.config, "model", None) in (None, ""):
            raise UsageError(NO_MODEL_HELP)
        if prompt is None and not interactive:
            from zuno.agent.api import nothing_to_resume, waiting_for_input

            if (err := nothing_to_resume(rt, sid) or waiting_for_input(rt, sid)) is not None:
                raise UsageError(str(err))
        # The SDK loads in a thread (the prompt shows meanwhile; the first request waits for it),
        # and the collector is settled when it is loaded.
        agent = Agent(
            rt, model=args.model, mode=args.mode, session_id=sid, load_in_background=True, on_loaded=startup.settle
        )
        try:
            if interactive:
                return _interactive(agent, view, inline, startup, ran)
            return asyncio.run(
                _one_shot(agent, view, prompt, json_mode=args.json, inline=inline, startup=startup, ran=ran)
            )
        except (UsageError, KeyboardInterrupt, BrokenPipeError, Terminated):
            raise  # BrokenPipeError: stdout's reader went away (`| head`); the turn was interrupted
        except StoreUnusable as e:  # the store locked by another process (at open, or mid-turn): no bug
            return _store_unusable(e, agent.id or sid, ran.seen)
        except Exception as e:  # a bug below the loop: one line, the transcript has the rest
            if isinstance(e, OSError) and e.errno == errno.EIO:
                # Output to a terminal that hung up before its SIGHUP was handled: the turn was
                # interrupted by it (a listener's failure), recorded so; as for SIGHUP, exit 129.
                _silence_output()
                return EXIT_HANGUP
            print(f"zuno: the agent stopped on an internal error: {type(e).__name__}: {e}", file=sys.stderr)
            return EXIT_NOT_OK
    finally:
        asyncio.run(rt.aclose())
        # The command is over: a Ctrl-C that comes while the interpreter shuts down (after it put
        # the default handler back) would otherwise replace the exit status with a signal death.
        signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Ran:
    """The view's listener, noting whether this command ran anything: a request went to the model
    (its record written first) or a tool call started."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.seen = False
        self.in_turn = False  # the same, for the turn of the interactive session running now

    def on_event(self, ev: AgentEvent) -> None:
        if ev.kind == "tool_call" or (ev.kind == "request" and getattr(ev, "phase", "") == "sent"):
            self.seen = self.in_turn = True
        self.view.on_event(ev)


def _store_unusable(e: StoreUnusable, session: str, ran: bool) -> int:
    """The store became unusable under the run (another process holds its lock): the store's own
    words (the file, what became of the call that needed the write), then what became of the run,
    on standard error (with --json too: no final object, as for any error). Exit 1 when anything
    ran (a request to the model, a call); 2 when nothing did, as for ``zuno call``."""
    ran = ran or bool(getattr(e, "ran", False))
    if ran:
        then = (
            f"The run of session {session} stopped there, its turn not ended on record: "
            f"`zuno resume {session}` goes on once the store is free (it ends that turn as interrupted)."
        )
    else:
        then = f"Nothing was run in session {session}: no request went to the model and no call started."
    print(f"zuno: {e} {then}", file=sys.stderr)
    if (status := status_of_interrupted_wait(e)) is not None:  # Ctrl-C during the store's busy wait
        return status
    return EXIT_NOT_OK if ran else EXIT_USAGE


def _turn_lost_to_lock(e: StoreUnusable, session: str, ran: bool) -> None:
    """In the interactive session a store locked by another process ends only the turn: the
    store's words (the file, what became of the call), then what became of the turn and what the
    next prompt does, on standard error; the prompt comes back."""
    if ran or bool(getattr(e, "ran", False)):
        then = (
            f"This turn of session {session} stopped there, its end not recorded. Type the next prompt once "
            "the store is free: the turn is ended as interrupted first (a call left unsettled is settled as "
            f"uncertain, never run again), then the session goes on; /exit leaves (`zuno resume {session}` "
            "goes on later)."
        )
    else:
        then = (
            "Nothing of this prompt was run (no request went to the model, no call started): type it again "
            "once the store is free, or /exit."
        )
    print(f"zuno: {e} {then}", file=sys.stderr, flush=True)


async def _one_shot(
    agent: Agent,
    view: View,
    prompt: str | None,
    *,
    json_mode: bool,
    inline: InlineApprover | None,
    startup: StartupCollection,
    ran: _Ran,
) -> int:
    import asyncio

    await _open(agent, startup)
    sig = _Interrupts()
    sig.install()
    sig.approver = inline
    try:
        with sig.turn(agent):
            try:
                result = await agent.run(prompt, on_event=ran.on_event)
            except asyncio.CancelledError:
                if json_mode:  # the one final object is printed for a terminated run too
                    print_json(_cancelled_json(agent))
                return sig.exit or EXIT_INTERRUPTED
            finally:
                await view.aend()
    finally:
        await agent.close()
    if json_mode:
        print_json(result.to_json())
    return sig.exit or _exit_status(result)


async def _open(agent: Agent, startup: StartupCollection) -> None:
    from zuno.agent.api import NoProvider
    from zuno.store import SessionBusy

    try:
        await agent.open()
    except (NoProvider, SessionBusy) as e:
        startup.settle()
        await agent.close()
        raise UsageError(str(e)) from None
    except BaseException:
        startup.settle()
        raise
    # The surface and the store are built; the SDK's loader settles the collector when it is done.


def _cancelled_json(agent: Agent) -> dict[str, Any]:
    """``--json``'s final object for a run cancelled from outside (SIGTERM, a second Ctrl-C), read
    from the record of its last turn (which the loop ended as interrupted)."""
    usage = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
    turn: dict[str, Any] = {}
    if agent.loop is not None:
        turns = agent.transcript.turns()
        turn = turns[-1] if turns else {}
        for r in agent.transcript.requests():
            if r.turn == turn.get("n"):
                for k in usage:
                    usage[k] += int(r.usage.get(k, 0))
    return {
        "session": agent.id,
        "stop_reason": "interrupted",
        "detail": turn.get("stop_detail") or "the run was cancelled from outside",
        "final_text": "",
        "steps": int(turn.get("steps") or 0),
        "usage": usage,
        "turns": 1 if turn else 0,
    }


def _exit_status(result: RunResult) -> int:
    if result.stop_reason == "final":
        return EXIT_OK
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_NOT_OK


_HANDLED = [0]  # SIGINT / SIGTERM handler runs (the wake-up thread waits for one)


def _wake_main_on_signals() -> None:
    """A SIGINT or SIGTERM the kernel hands to another thread (the SDK's loader, a worker that stays
    after a request) only flags Python's handler, which runs when the main thread next runs: blocked
    in the line editor's select it never did (a Ctrl-C at the prompt ignored, a SIGTERM there hung
    the session). A thread reading the signal wakeup fd sends the main thread SIGUSR2 (a no-op
    handler), again until the handler has run: one that came just before the main thread entered
    its wait (readline prints the prompt, then selects) does not interrupt it."""
    import threading
    import time

    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main thread (an embedding caller): nothing to wake
        os.close(r)
        os.close(w)
        return
    signal.signal(signal.SIGUSR2, lambda signum, frame: None)
    main = threading.main_thread().ident or 0
    woken = {signal.SIGINT.value, signal.SIGTERM.value, signal.SIGHUP.value}

    def watch() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR2})
        while data := os.read(r, 64):
            if woken.intersection(data):
                handled = _HANDLED[0]
                for _ in range(40):  # 2 s at most (the handler may have run before this read)
                    with contextlib.suppress(OSError, ProcessLookupError):
                        signal.pthread_kill(main, signal.SIGUSR2)
                    time.sleep(0.05)
                    if _HANDLED[0] != handled:
                        break

    threading.Thread(target=watch, name="zuno-signal-wake", daemon=True).start()


class _Interrupts:
    """Ctrl-C for the whole command (a process-level handler, so no event loop's own handling
    can put Python's default back): the first interrupts the turn (the stream or the step), a
    second exits (the main task is cancelled, the session closes and stops its jobs); one that
    comes while the command is ending changes nothing but the exit status. SIGTERM exits; so does
    SIGHUP (the terminal closed: 129), its output sent to /dev/null first, as nobody can read it and
    writing to a hung-up terminal fails: the step is cancelled and settles as for SIGTERM."""

    def __init__(self) -> None:
        self.agent: Agent | None = None
        self.main: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.count = 0
        self.exit: int | None = None
        self.at_prompt = False
        self.approver: InlineApprover | None = None

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGHUP, self._on_signal)
        _wake_main_on_signals()

    @contextlib.contextmanager
    def turn(self, agent: Agent) -> Any:
        import asyncio

        self.agent, self.main, self.loop, self.count = agent, asyncio.current_task(), asyncio.get_running_loop(), 0
        try:
            yield self
        finally:
            self.main = None

    def _on_signal(self, signum: int, frame: object) -> None:
        _HANDLED[0] += 1
        if signum == signal.SIGHUP:
            _silence_output()
        ending = EXIT_HANGUP if signum == signal.SIGHUP else EXIT_TERMINATED  # (not SIGINT)
        if self.at_prompt:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.exit = ending
            raise Terminated(ending)  # SIGTERM at the prompt: the line editor's wait ends (it was ignored)
        if signum == signal.SIGINT and self.approver is not None and self.approver.asking:
            print("^C", file=sys.stderr, flush=True)
            self.approver.refuse_pending()  # Ctrl-C at an approval question is a refusal
            return
        main, loop, agent = self.main, self.loop, self.agent
        if main is None or loop is None or agent is None or main.done():
            self.exit = self.exit or (ending if signum != signal.SIGINT else EXIT_INTERRUPTED)
            return
        from zuno.store.connection import note_deferred

        self.count += 1
        note_deferred(signum, loop)  # its effect waits for the loop: a store wait holding it up ends
        if signum == signal.SIGINT and self.count == 1:
            print("\nzuno: interrupting (Ctrl-C again to exit)", file=sys.stderr, flush=True)
            loop.call_soon_threadsafe(agent.interrupt)
            return
        self.exit = ending if signum != signal.SIGINT else EXIT_INTERRUPTED
        loop.call_soon_threadsafe(main.cancel)


def _silence_output() -> None:
    """The terminal hung up: stdout and stderr go to /dev/null from now on (what the close would
    print cannot be read, and writing it to the terminal fails with EIO)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(null, fd)
        os.close(null)


def _save_history(readline: Any, history: Path, added: int) -> None:
    """Append this session's lines to the history file (created private: prompts can hold secrets),
    which is then cut to its last RUN_HISTORY_LINES: another session's lines, saved while this one
    ran, stay (writing the whole in-memory history replaced them), and the file does not grow
    without bound."""
    with contextlib.suppress(OSError):
        history.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        readline.append_history_file(min(added, RUN_HISTORY_LINES), history)  # then truncated to the length


def _interactive(
    agent: Agent, view: View, inline: InlineApprover | None, startup: StartupCollection, ran: _Ran
) -> int:
    """A line editor with history; each line is one turn. /mode plan|work|goal switches the mode,
    /goal resume [--request GI_ID] [answer] resumes a paused Goal, /exit (or Ctrl-D) leaves. A store locked by another
    process ends the turn only (``_turn_lost_to_lock``); the next prompt goes on from there."""
    import asyncio

    from zuno.store.paths import StoreUnusable

    try:
        import readline
    except ImportError:  # pragma: no cover - readline is part of CPython on Linux and macOS
        readline = None  # type: ignore[assignment]
    history = Path(os.environ.get("ZUNO_CONFIG_DIR") or Path.home() / ".config" / "zuno") / "history"
    added = 0  # the lines this session adds to the history
    if readline is not None:
        readline.set_auto_history(False)
        readline.set_history_length(RUN_HISTORY_LINES)
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    loop = asyncio.new_event_loop()
    code = EXIT_OK
    sig = _Interrupts()
    try:
        loop.run_until_complete(_open(agent, startup))
        mode = agent.transcript.state().mode
        print(f"zuno: session {agent.id}, mode {mode}. /mode, /goal resume, /exit; Ctrl-C interrupts.")
        sig.install()
        sig.approver = inline
        sig.at_prompt = True
        while True:
            try:
                try:
                    line = input("zuno> ")
                except EOFError:
                    print()
                    break
                except KeyboardInterrupt:
                    print()
                    continue
                except Terminated:
                    print()
                    code = sig.exit or EXIT_TERMINATED
                    break
            except OSError as e:  # reading the line, or ending it: EIO is a terminal that hung up
                if e.errno != errno.EIO:
                    raise
                _silence_output()  # (its SIGHUP may not have been handled yet)
                code = EXIT_HANGUP
                break
            line = line.strip()
            if not line:
                continue
            if readline is not None:
                readline.add_history(line)
                added += 1
            if line in ("/exit", "/quit"):
                break
            if line.startswith("/mode"):
                want = line.split()[1:] or [""]
                if want[0] not in MODES:
                    print(f"zuno: /mode {' | '.join(MODES)}")
                else:
                    try:
                        agent.set_mode(want[0])  # type: ignore[arg-type]
                    except StoreUnusable as e:  # locked by another process: the session goes on
                        print(f"zuno: {e} The mode was not changed: give /mode again once the store is free.",
                              file=sys.stderr)
                    else:
                        print(f"zuno: mode {want[0]}")
                continue
            if line.split()[0] == "/goal":  # /goal resume [--request GI_ID] [your answer]
                from zuno.commands.goal_resume import resume_from_line

                try:
                    print(f"zuno: {resume_from_line(agent.runtime.store, agent.id, line)}")
                except StoreUnusable as e:
                    print(f"zuno: {e} The Goal was not resumed: give /goal resume again once the store is free.",
                          file=sys.stderr)
                continue

            async def turn(text: str = line) -> None:
                with sig.turn(agent):
                    try:
                        await agent.run(text, on_event=ran.on_event)
                    finally:
                        await view.aend()

            sig.at_prompt = False
            ran.in_turn = False
            task = loop.create_task(turn())
            try:
                loop.run_until_complete(task)
            except asyncio.CancelledError:
                code = sig.exit or EXIT_INTERRUPTED
                break
            except StoreUnusable as e:  # the store locked by another process: the turn ends, not the session
                _turn_lost_to_lock(e, agent.id, ran.in_turn)
            finally:
                sig.at_prompt = True
    finally:
        sig.at_prompt = False  # a signal now only sets the exit status: the session closes whole
        if readline is not None and added:
            _save_history(readline, history, added)
        loop.run_until_complete(agent.close())
        loop.close()
    return sig.exit or code  # (a SIGTERM / SIGHUP that came while the session closed)
