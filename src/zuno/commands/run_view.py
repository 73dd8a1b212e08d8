"""The live view of ``zuno run``: streamed Markdown on stdout, one line per tool call on stderr,
a spinner while waiting, and approvals asked inline.

- Text deltas go through ``MarkdownStream``: rendered when stdout is a terminal and ``NO_COLOR``
  is unset, byte-exact otherwise.
- The spinner (stderr a terminal, not ``--json``) turns while the model has not sent its first
  token and while a step's tools run; it is an asyncio task, cleared before anything is printed
  and cancelled when the wait ends (or the turn does: Ctrl-C included).
- A tool call's line: ``✓ read README.md``, ``✗ shell false — exit 1 (error)``,
  ``⊘ write x.txt (blocked: denied)``.
- ``InlineApprover`` asks a strict-mode approval on the same terminal (the spinner paused): only
  an explicit ``y`` / ``yes`` consents; Enter, anything else, end of input or Ctrl-C refuse.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any

from zuno.agent.events import (
    AgentEvent,
    NoticeEvent,
    RequestEvent,
    StopEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from zuno.agent.types import well_formed
from zuno.commands.terminal_markdown import MarkdownStream, visible_controls
from zuno.commands.terminal_width import char_width
from zuno.permissions import ApprovalRequest, Approver

TOOL_LINE_MAX = 100
EMPTY_ANSWER = "zuno: the model's answer was empty (it ended its turn with no text); ask again, or check the model"
SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_INTERVAL_S = 0.08
CLEAR_LINE = "\r\x1b[K"
_SUBJECT_KEYS = ("path", "command", "url", "outputPath", "pattern", "query", "id", "job", "name")


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def call_subject(arguments: str) -> str:
    """What a call is about, from its JSON arguments: a path, a command, a URL, a pattern; one line."""
    try:
        args = json.loads(arguments) if arguments else {}
    except ValueError:
        return ""
    if not isinstance(args, dict):
        return ""
    for key in _SUBJECT_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    paths = args.get("paths")
    if isinstance(paths, list) and paths and all(isinstance(p, str) for p in paths):
        return ", ".join(paths)
    return ""


def tool_line(name: str, subject: str, ev: ToolResultEvent) -> str:
    """One compact line for a call's outcome (the model's control characters shown, never obeyed)."""
    head = visible_controls(f"{name} {subject}".rstrip())
    if ev.cancelled:
        sym, tail = "⊘", " (cancelled)"
    elif ev.outcome == "ok":
        sym, tail = "✓", ""
    elif ev.outcome == "blocked":
        sym, tail = "⊘", f" (blocked: {ev.block_kind})" if ev.block_kind else " (blocked)"
    else:
        sym = "✗" if ev.outcome == "error" else "?"
        tail = f" — exit {ev.exit_code} ({ev.outcome})" if ev.exit_code not in (None, 0) else f" ({ev.outcome})"
    room = TOOL_LINE_MAX - len(tail) - 2
    if len(head) > room:
        head = head[: max(room - 1, 1)] + "…"
    return f"{sym} {head}{tail}"


def _columns(stream: Any) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


def _fit(line: str, columns: int) -> str:
    """``line`` cut to fit one row (counting every character of uncertain width as two cells): a
    line that wraps leaves its first rows behind each frame, as erase-line clears only the last."""
    room, used = columns - 1, 0
    for i, ch in enumerate(line):
        used += char_width(ch, ambiguous=2) or 2
        if used > room:
            return line[: max(i - 2, 0)] + "…"
    return line


class Spinner:
    """A one-line animation on stderr, run by an asyncio task (never a thread)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.label = ""
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self, label: str) -> None:
        self.label = label
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._spin())

    async def _spin(self) -> None:
        i = 0
        while True:
            line = _fit(f"{SPINNER_FRAMES[i % len(SPINNER_FRAMES)]} {self.label}", _columns(self.stream))
            self.stream.write(f"{CLEAR_LINE}{line}")
            self.stream.flush()
            i += 1
            await asyncio.sleep(SPINNER_INTERVAL_S)

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            self.stream.write(CLEAR_LINE)
            self.stream.flush()

    async def aclose(self) -> None:
        task = self._task
        self.stop()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class View:
    """Streamed text on stdout, one compact line per tool call on stderr, a spinner on a terminal."""

    def __init__(self, json_mode: bool, stdout: Any = None, stderr: Any = None) -> None:
        self.json_mode = json_mode
        self.out = stdout or sys.stdout
        self.err = stderr or sys.stderr
        terminal = _tty(self.out) and not json_mode
        dumb = os.environ.get("TERM") == "dumb"  # no cursor movement, no erasing: no spinner, no rendering
        color = terminal and not os.environ.get("NO_COLOR") and not dumb
        self.markdown = MarkdownStream(color=color, visible=terminal)
        self.spinner = Spinner(self.err) if (_tty(self.err) and not json_mode and not dumb) else None
        self.mid_line = False
        self.calls: dict[str, tuple[str, str]] = {}
        self._high = ""  # a high surrogate that ended a delta: the other half of its pair starts the next

    # -- the spinner --------------------------------------------------------------------------

    def _spin(self, label: str) -> None:
        if self.spinner is not None:
            self.spinner.start(label)

    def _quiet(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()

    def pause(self) -> str | None:
        """Stop the spinner for a question; the label to resume with (None: it was not turning)."""
        if self.spinner is None or not self.spinner.running:
            return None
        label = self.spinner.label
        self.spinner.stop()
        return label

    def resume(self, label: str | None) -> None:
        if label is not None:
            self._spin(label)

    # -- output -------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        if not text:
            return
        self._quiet()
        self.out.write(text)
        self.out.flush()
        self.mid_line = not text.endswith("\n")

    def _flush_text(self) -> None:
        held, self._high = self._high, ""
        self._write((self.markdown.feed(well_formed(held)) if held else "") + self.markdown.finish())

    def _text(self, text: str) -> str:
        """A delta as valid text: a surrogate pair a server split across two deltas is joined."""
        text, self._high = self._high + text, ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._high = text[:-1], text[-1]
        return well_formed(text)

    def _err(self, text: str) -> None:
        self._flush_text()
        self._quiet()
        if self.mid_line:
            self.out.write("\n")
            self.out.flush()
            self.mid_line = False
        print(text, file=self.err, flush=True)

    def say(self, text: str) -> None:
        """A line of the command's own (a question, a notice) on stderr, the spinner cleared."""
        self._err(text)

    def on_event(self, ev: AgentEvent) -> None:
        if isinstance(ev, TextEvent):
            if not self.json_mode:
                self._quiet()  # the first token ends the wait
                self._write(self.markdown.feed(self._text(ev.text)))
        elif isinstance(ev, RequestEvent):
            if ev.phase == "sent":
                self._spin("thinking…" if ev.purpose == "turn" else f"{ev.purpose}…")
            elif ev.phase == "restarted":
                # The text shown since the request went out is void; the answer starts again.
                if ev.purpose == "turn":
                    self._err(f"  · {ev.detail} (attempt {ev.attempts})")
                self._spin("thinking…" if ev.purpose == "turn" else f"{ev.purpose}…")
            else:
                self._flush_text()
                self._quiet()
        elif isinstance(ev, ToolCallEvent):
            self._flush_text()
            self.calls[ev.call_id] = (visible_controls(ev.name), call_subject(ev.arguments))
            names = sorted({n for n, _ in self.calls.values()})
            self._spin(f"running {', '.join(names)}…")
        elif isinstance(ev, ToolResultEvent):
            name, subject = self.calls.pop(ev.call_id, (ev.name, ""))
            self._err(tool_line(name, subject, ev))
            if self.calls:
                self._spin(self.spinner.label if self.spinner else "")
        elif isinstance(ev, NoticeEvent):
            self._err(f"  · notice: {visible_controls((ev.text.splitlines() or [''])[0][:TOOL_LINE_MAX])}")
        elif isinstance(ev, StopEvent):
            self._flush_text()
            self._quiet()
            if ev.stop_reason != "final":
                self._err(f"zuno: stopped: {ev.stop_reason} ({visible_controls(ev.detail)})")
            elif not ev.final_text.strip() and not self.json_mode:
                # Otherwise an empty answer is silence and exit 0, as if nothing had run.
                self._err(EMPTY_ANSWER)

    def end(self) -> None:
        self._flush_text()
        self._quiet()
        self.calls.clear()
        if self.mid_line and not self.json_mode:
            self.out.write("\n")
            self.out.flush()
            self.mid_line = False

    async def aend(self) -> None:
        try:
            self.end()  # may raise BrokenPipeError: the spinner still stops
        finally:
            if self.spinner is not None:
                await self.spinner.aclose()


class PausingApprover:
    """Another approver (the CLI's terminal one), with the spinner stopped while it asks."""

    def __init__(self, inner: Approver, view: View) -> None:
        self.inner = inner
        self.view = view

    async def approve(self, request: ApprovalRequest) -> bool | None:
        label = self.view.pause()
        try:
            return await self.inner.approve(request)
        finally:
            self.view.resume(label)


def approval_question(request: ApprovalRequest) -> str:
    """The question, one line; the model's control characters (an escape sequence that would erase
    or rewrite it) shown as their symbols, so what is asked is what the call does."""
    subject = f" {' '.join(request.subject.split())}" if request.subject else ""
    text = f"{request.tool}{subject} ({request.declarations.effect}) — {' '.join(request.reason.split())}"
    return f"? approve {visible_controls(text)} [y/N] "


class InlineApprover:
    """Asks on the interactive session's own terminal (standard input, read by the event loop:
    no thread). Typed-ahead input is discarded first, so only an answer to this question counts."""

    def __init__(self, view: View, fd: int | None = None) -> None:
        self.view = view
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._lock = asyncio.Lock()
        self._answer: asyncio.Future[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def asking(self) -> bool:
        return self._answer is not None and not self._answer.done()

    def refuse_pending(self) -> None:
        """Ctrl-C while a question is open: it is answered no (safe to call from a signal handler)."""
        fut, loop = self._answer, self._loop
        if fut is not None and loop is not None:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(b""))

    async def approve(self, request: ApprovalRequest) -> bool | None:
        async with self._lock:
            label = self.view.pause()
            try:
                return await self._ask(request)
            finally:
                self.view.resume(label)

    async def _ask(self, request: ApprovalRequest) -> bool:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            import termios

            termios.tcflush(self.fd, termios.TCIFLUSH)
        self.view._flush_text()
        if self.view.mid_line:
            self.view.out.write("\n")
            self.view.mid_line = False
        fut: asyncio.Future[bytes] = loop.create_future()
        self._answer, self._loop = fut, loop  # before the question: a Ctrl-C at it is a refusal
        self.view.err.write(approval_question(request))
        self.view.err.flush()

        def readable() -> None:
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                data = b""
            if not fut.done():
                fut.set_result(data)

        try:
            loop.add_reader(self.fd, readable)
        except (OSError, ValueError, NotImplementedError):
            self._answer = None
            self.view.err.write("(no terminal to answer on: refused)\n")
            return False
        try:
            answer = await fut
        finally:
            loop.remove_reader(self.fd)
            self._answer = None
        if not answer.endswith(b"\n"):
            self.view.err.write("\n")
        self.view.err.flush()
        return answer.strip().lower() in (b"y", b"yes")
