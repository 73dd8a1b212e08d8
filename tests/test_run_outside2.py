"""``zuno run`` at a terminal, tried from outside (tenth round): what a model's bytes can do to the
terminal and the record (escape sequences in an approval question, a surrogate pair split across
two stream deltas), long lines, narrow terminals, ``TERM=dumb``, and the line editor's history.
Each test is a defect found by that round."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.agent.events import TextEvent, ToolCallEvent, ToolResultEvent
from zuno.commands.run_view import View, approval_question, tool_line
from zuno.commands.terminal_markdown import MarkdownStream
from zuno.declarations import Declarations
from zuno.permissions import ApprovalRequest

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply

# What a model can put in a command to rewrite the line the question is on: erase it, go to its
# start, and write a harmless-looking question over it (and the same with a C1 CSI, U+009B).
SPOOF = "touch pwned \x1b[2K\x1b[1G? approve shell ls"
SPOOF_C1 = "touch pwned \u009b2K\u009b1G? approve shell ls"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _request(subject: str) -> ApprovalRequest:
    return ApprovalRequest(
        session_id="s",
        call_id="c",
        tool="shell",
        subject=subject,
        arguments={"command": subject},
        declarations=Declarations(),
        reason="strict mode: a SideEffecting call needs a fresh approval",
    )


# -- a model's control characters are shown, never obeyed, on the lines zuno writes itself ------


@pytest.mark.parametrize("command", [SPOOF, SPOOF_C1])
def test_an_escape_sequence_in_a_call_cannot_rewrite_the_approval_question(command: str) -> None:
    q = approval_question(_request(command))
    assert "\x1b" not in q and "\u009b" not in q
    assert q.startswith("? approve shell touch pwned ␛[2K␛[1G? approve shell ls (SideEffecting)")


def test_an_escape_sequence_in_a_call_is_shown_on_its_tool_line() -> None:
    line = tool_line("shell", SPOOF, ToolResultEvent("c", "shell", "blocked", "", block_kind="denied"))
    assert "\x1b" not in line and line == "⊘ shell touch pwned ␛[2K␛[1G? approve shell ls (blocked: denied)"
    # the model's tool name, in the spinner and on the line, too
    err = io.StringIO()
    view = View(json_mode=False, stdout=io.StringIO(), stderr=err)
    view.on_event(ToolCallEvent("c1", "x\x1b]0;title\x07", "{}"))
    view.on_event(ToolResultEvent("c1", "x\x1b]0;title\x07", "blocked", "", block_kind="unavailable"))
    assert "\x1b" not in err.getvalue() and "x␛]0;title␇" in err.getvalue()


def test_the_terminal_approver_shows_the_escape_sequences_it_is_asked_about(workspace: Path) -> None:
    """``zuno call`` on a terminal asks on /dev/tty: the question shows the arguments' escapes."""
    import fcntl
    import pty
    import select
    import termios

    (workspace / "zuno.json").write_text(json.dumps({"permission": {"strict": True}}))
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "zuno", "call", "write", json.dumps({"path": "a\x1b[2K.txt", "content": "x"}),
         "--root", str(workspace)],
        stdin=slave, stdout=slave, stderr=slave, env=zuno_env(), start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"[y/N] " not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                seen += os.read(master, 4096)
        assert b"[y/N] " in seen, seen
        os.write(master, b"n\n")
        assert child.wait(30) == 1
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    question = seen.decode()[seen.decode().index("zuno: approve") :]
    assert "a␛[2K.txt" in question and "\x1b" not in question
    assert not (workspace / "a\x1b[2K.txt").exists()


# -- a surrogate pair split across two deltas, a lone surrogate -----------------------------------


def _agent_run(workspace: Path, fake: FakeProvider, api: str, prompt: str) -> Any:
    base = fake.root_url if api == "anthropic" else fake.base_url
    overrides = {"model": "fake/m1", "provider": {"fake": {
        "api": api, "options": {"baseURL": base, "apiKey": "k"}, "models": {"m1": {"context": 65536, "output": 2048}}}}}

    async def main() -> Any:
        async with zuno.Runtime(root=workspace, config_overrides=overrides) as rt:
            async with rt.agent() as agent:
                result = await agent.run(prompt)
                return result, [m for m in agent.transcript.messages() if m.role == "assistant"]

    return asyncio.run(main())


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic"])
def test_a_surrogate_pair_split_across_two_deltas_is_one_character(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    # A server that cuts its text in UTF-16 code units sends each half of 😀 as its own \u escape:
    # the turn was lost to an internal error (the store cannot hold a lone surrogate).
    (workspace / "a😀.txt").write_text("found\n")
    fake.script(
        Reply(calls=[Call("read", ['{"path": "a\ud83d', '\ude00.txt"}'])]),
        Reply(text=["smile \ud83d", "\ude00 ok\n"]),
    )
    result, answers = _agent_run(workspace, fake, api, "hi")
    assert result.stop_reason == "final", result.detail
    assert result.final_text == "smile 😀 ok\n"
    assert answers[-1].text == "smile 😀 ok\n" and answers[0].tool_calls[0].arguments == '{"path": "a😀.txt"}'
    assert "found" in json.dumps(fake.requests[1].body)  # the read ran on the joined path


def test_a_lone_surrogate_in_an_answer_or_an_argument_is_kept_as_far_as_it_can_be(
    workspace: Path, fake: FakeProvider
) -> None:
    fake.script(Reply(calls=[Call("read", '{"path": "b\ud800.txt"}')]), Reply(text="bad \udc00 end\n"))
    result, _ = _agent_run(workspace, fake, "openai-chat", "hi")
    assert result.stop_reason == "final", result.detail
    assert result.final_text == "bad \ufffd end\n"
    # the argument is still refused by the dispatcher, naming it, as a call with a \ud800 escape is
    sent_back = json.dumps(fake.requests[1].body["messages"][-1])
    assert "invalid_arguments" in sent_back and "lone surrogate" in sent_back


def test_the_view_joins_a_pair_split_across_deltas() -> None:
    out = io.StringIO()
    view = View(json_mode=False, stdout=out, stderr=io.StringIO())
    for piece in ("smile \ud83d", "\ude00 ok\n", "cut \ud83d"):
        view.on_event(TextEvent(piece))
    view.end()
    assert out.getvalue() == "smile 😀 ok\ncut \ufffd\n"
    out.getvalue().encode("utf-8")  # printable as UTF-8


# -- long lines ------------------------------------------------------------------------------------


def _stream_seconds(deltas: int) -> float:
    md = MarkdownStream(color=True, columns=lambda: 80)
    started = time.perf_counter()
    for _ in range(deltas):
        md.feed("abcdefghi ")
    md.feed("\n")
    return time.perf_counter() - started


def test_a_long_line_streams_in_time_linear_in_its_length() -> None:
    """Each delta of a line re-rendered the whole partial line (its controls, its new part): a
    line of 32,000 deltas (320 KB, minified code or data) held the event loop for many seconds."""
    _stream_seconds(500)  # warm
    # Best of 5 each (a run preempted by a busy machine is not the code's time); 8x the text:
    # linear is ~8x, quadratic ~64x, so 32x separates them with room for the machine's noise.
    small = min(_stream_seconds(4_000) for _ in range(5))
    large = min(_stream_seconds(32_000) for _ in range(5))
    assert large < small * 8 * 4, (small, large)


def _render_seconds(line: str) -> float:
    md = MarkdownStream(color=True, columns=lambda: 80)
    started = time.perf_counter()
    md.feed(line + "\n")
    return time.perf_counter() - started


@pytest.mark.parametrize("opener", [" *a", " **a", " __a"])
def test_a_long_line_of_emphasis_openers_without_closers_renders_in_linear_time(opener: str) -> None:
    """Each opener with no closer (`` *a`` : the next ``*`` follows a space) scanned to the end of
    the line: 8,000 of them (24 KB) took seconds."""
    small = min(_render_seconds(opener * 1_000) for _ in range(5))
    large = min(_render_seconds(opener * 8_000) for _ in range(5))
    assert large < small * 8 * 4, (small, large)  # 8x the text: linear ~8x, quadratic ~64x (as above)
    assert MarkdownStream(color=True).feed("*a *b* **c**\n") == "*a \x1b[3mb\x1b[23m \x1b[1mc\x1b[22m\n"


# -- narrow terminals, TERM=dumb, NO_COLOR ----------------------------------------------------------


class _Terminal:
    """A real pseudo-terminal of a given width: ``writer`` is its program side (a text stream),
    ``read()`` what reached the screen."""

    def __init__(self, columns: int = 80) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        self.writer = open(slave, "w", encoding="utf-8", closefd=True)

    def read(self) -> str:
        import select

        out = b""
        while select.select([self.master], [], [], 0.1)[0]:
            out += os.read(self.master, 65536)
        return out.decode()

    def close(self) -> None:
        self.writer.close()
        os.close(self.master)


async def _show(view: View, *events: Any, wait_s: float = 0.0) -> None:
    from zuno.agent.events import RequestEvent

    view.on_event(RequestEvent(1, "turn", "sent"))
    await asyncio.sleep(wait_s)
    for ev in events:
        view.on_event(ev)
        await asyncio.sleep(wait_s)
    await view.aend()


def test_the_spinner_fits_a_narrow_terminal() -> None:
    """A label wider than the terminal wrapped, and erase-line clears only the row the cursor is
    on: each frame left a row behind, the terminal filled with spinner lines."""
    from zuno.commands.run_view import CLEAR_LINE
    from zuno.commands.terminal_width import rows_used

    term = _Terminal(columns=20)
    try:
        view = View(json_mode=False, stdout=io.StringIO(), stderr=term.writer)
        calls = [ToolCallEvent(f"c{i}", name, "{}") for i, name in enumerate(["read", "glob", "shell", "write"])]
        asyncio.run(_show(view, *calls, wait_s=0.1))
        frames = [f for f in term.read().replace("\r\n", "\n").split(CLEAR_LINE) if f]
    finally:
        term.close()
    assert any("running" in f for f in frames)
    assert all(rows_used(f, 20) == 1 for f in frames), frames


def test_term_dumb_gets_no_spinner_and_no_rewritten_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("NO_COLOR", raising=False)
    term = _Terminal()
    try:
        view = View(json_mode=False, stdout=term.writer, stderr=term.writer)
        asyncio.run(_show(view, TextEvent("# Title\nsome **bold"), TextEvent("**\n"), wait_s=0.2))
        screen = term.read()
    finally:
        term.close()
    assert screen == "# Title\r\nsome **bold**\r\n"  # no escape at all: no spinner, no erase, no style


@pytest.mark.parametrize("no_color", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_a_models_escape_sequences_are_shown_on_a_terminal_without_colour(
    monkeypatch: pytest.MonkeyPatch, no_color: dict[str, str]
) -> None:
    """With NO_COLOR the text went to the terminal byte for byte: the model's escape sequences
    (clear the screen, set the title, write the clipboard with OSC 52) were obeyed."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    for k, v in no_color.items():
        monkeypatch.setenv(k, v)
    term = _Terminal()
    try:
        view = View(json_mode=False, stdout=term.writer, stderr=io.StringIO())
        for piece in ("a\x1b[2J b\x1b]52;c;cm0gLXJm\x07 c\r", "\nd\u009b1A\n"):
            view.on_event(TextEvent(piece))
        view.end()
        screen = term.read()
    finally:
        term.close()
    assert screen == "a␛[2J b␛]52;c;cm0gLXJm␇ c\r\nd␛[1A\r\n"
    # in a pipe it is still the model's text, byte for byte
    out = io.StringIO()
    view = View(json_mode=False, stdout=out, stderr=io.StringIO())
    view.on_event(TextEvent("a\x1b[2J\r\n"))
    view.end()
    assert out.getvalue() == "a\x1b[2J\r\n"


# -- the line editor's history -----------------------------------------------------------------------


def test_the_history_is_bounded_private_and_keeps_another_sessions_lines(workspace: Path, fake: FakeProvider) -> None:
    """The history grew without bound (no length set), took blank lines, and was written whole at
    exit: the lines another session saved meanwhile were lost."""
    from test_run_terminal import Pty, configure
    from zuno.limits import RUN_HISTORY_LINES

    configure(workspace, fake)
    history = workspace.parent / "cfg" / "history"
    history.parent.mkdir()
    history.write_text("".join(f"old {i}\n" for i in range(RUN_HISTORY_LINES + 200)))
    history.chmod(0o644)
    fake.script(Reply(text="answer\n"))
    term = Pty(workspace)
    term.until(b"zuno> ")
    term.write(b"hello\n")
    term.until(b"answer")
    with history.open("a") as f:
        f.write("from another session\n")
    term.write(b"   \n/exit\n")
    assert term.finish() == 0, term.text
    lines = history.read_text().splitlines()
    assert len(lines) == RUN_HISTORY_LINES
    assert lines[-3:] == ["from another session", "hello", "/exit"]
    fresh = workspace.parent / "cfg2"
    fake.script(Reply(text="answer\n"))
    term = Pty(workspace, extra_env={"ZUNO_CONFIG_DIR": str(fresh)})
    term.until(b"zuno> ")
    term.write(b"a secret prompt\n")
    term.until(b"answer")
    term.write(b"/exit\n")
    assert term.finish() == 0, term.text
    assert (fresh / "history").stat().st_mode & 0o777 == 0o600
    assert (fresh / "history").read_text() == "a secret prompt\n/exit\n"


# -- stdout closed by its reader ----------------------------------------------------------------------


def test_a_failing_event_listener_interrupts_the_turn_and_is_raised_not_blamed_on_the_provider(
    workspace: Path, fake: FakeProvider
) -> None:
    """A listener's exception inside the stream was taken for the provider's: the turn stopped as
    "provider_error: provider fake (openai-chat) failed: BrokenPipeError", recorded as a failed
    request, and a tool call after the text would have gone on running."""
    (workspace / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": {
        "api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"}}}}))
    fake.script(Reply(text=["one\n", "two\n", "three\n"], calls=[Call("write", '{"path": "w.txt", "content": "x"}')],
                      delay_s=0.05))

    def listener(ev: Any) -> None:
        if isinstance(ev, TextEvent):
            raise BrokenPipeError(32, "Broken pipe")

    async def main() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent() as agent:
                with pytest.raises(BrokenPipeError):
                    await agent.run("hi", on_event=listener)
                return agent.transcript.requests()

    requests = asyncio.run(main())
    assert [r.status for r in requests] == ["interrupted"] and len(fake.requests) == 1
    assert not (workspace / "w.txt").exists()


def test_zuno_run_into_a_pipe_its_reader_closed_stops_quietly(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": {
        "api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"}}}}))
    fake.script(Reply(text=[f"line {i}\n" for i in range(3000)], delay_s=0.001))
    child = subprocess.Popen(
        [sys.executable, "-m", "zuno", "run", "hi", "--root", str(workspace)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=zuno_env(),
    )
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline() == b"line 0\n"  # as `zuno run … | head -1` reads it
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(60) == 1, err
    assert err == "", err  # no "provider … failed: BrokenPipeError", no internal error
    show = subprocess.run([sys.executable, "-m", "zuno", "show", "-c", "--root", str(workspace)],
                          capture_output=True, text=True, env=zuno_env(), timeout=60)
    assert "stop interrupted" in show.stdout and "failed" not in show.stdout, show.stdout


def test_sigterm_at_the_interactive_prompt_ends_the_session_with_143(workspace: Path, fake: FakeProvider) -> None:
    """SIGTERM while the line editor waited was only noted: the prompt went on waiting, and the
    session ended (exit 0) only when someone typed Ctrl-D."""
    import signal

    from test_run_terminal import Pty, configure

    configure(workspace, fake)
    term = Pty(workspace)
    term.until(b"zuno> ")
    os.kill(term.child.pid, signal.SIGTERM)
    assert term.finish(within=60) == 143, term.text


def test_an_answer_interrupted_between_the_halves_of_a_pair_is_recorded(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": {
        "api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k"}}}}))
    fake.script(Reply(text=["cut \ud83d", "\ude00 never\n"], delay_s=0.3))

    async def main() -> Any:
        async with zuno.Runtime(root=workspace) as rt:
            async with rt.agent() as agent:
                result = await agent.run("hi", on_event=lambda ev: isinstance(ev, TextEvent) and agent.interrupt())
                return result, [m.text for m in agent.transcript.messages() if m.role == "assistant"]

    result, answers = asyncio.run(main())
    assert result.stop_reason == "interrupted", result.detail
    assert answers and answers[0].startswith("cut \ufffd\n[interrupted")
