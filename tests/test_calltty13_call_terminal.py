"""``zuno call`` on a real terminal (a pty) and into a real pipe.

A tool's text can hold anything a file holds: an escape sequence, a carriage return, a bidi
override. Before, ``zuno call read ...`` wrote it raw to the terminal, which obeyed it (colours,
an overwritten line, a reordered one). Now, on a terminal the human text shows those controls
(as ``zuno show`` does); into a pipe or a file it is the exact text the model sees; ``--json`` is
the same record either way."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from conftest import zuno_env

# An SGR colour, a carriage return that would overwrite the line, a right-to-left override.
HOSTILE = "a\x1b[31mred\x1b[0m\rX\u202eabc\n"
# What read gives the model of it: the lone CR shown as U+240D and the ESCs as U+241B (read's own
# control pictures, with footer lines saying so: sixteenth and seventeenth rounds); the bidi
# control as the file holds it.
READ_LINE = "1\t" + HOSTILE.replace("\r", "\u240d").replace("\x1b", "\u241b").removesuffix("\n")


def on_a_pty(root: Path, *args: str) -> tuple[int, bytes, str]:
    """``zuno`` with stdout on a pseudo-terminal (stdin and stderr not): exit status, what the
    terminal received, stderr."""
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=zuno_env({"NO_COLOR": "1"}),
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            elif child.poll() is not None:
                break
        status = child.wait(timeout=max(0.1, deadline - time.monotonic()))
        assert child.stderr is not None
        return status, seen, child.stderr.read().decode()
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)


def piped(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=zuno_env({"NO_COLOR": "1"}),
        timeout=60,
    )


def test_call_on_a_terminal_shows_a_files_controls_and_never_hands_them_to_the_terminal(workspace: Path) -> None:
    (workspace / "hostile.txt").write_text(HOSTILE)
    status, seen, err = on_a_pty(workspace, "call", "read", '{"path": "hostile.txt"}')
    assert status == 0, err
    # The terminal turns the child's "\n" into "\r\n" (onlcr): that is the only carriage return.
    out = seen.replace(b"\r\n", b"\n")
    assert b"\x1b" not in out and b"\r" not in out and "\u202e".encode() not in out
    first, _, footer = out.partition(b"\n")
    assert first == "1\ta\u241b[31mred\u241b[0m\u240dX<U+202E>abc".encode()
    assert b"lone carriage return" in footer
    assert "zuno: session ses_" in err


def test_call_into_a_pipe_keeps_the_exact_text(workspace: Path) -> None:
    (workspace / "hostile.txt").write_text(HOSTILE)
    p = piped(workspace, "call", "read", '{"path": "hostile.txt"}')
    assert p.returncode == 0, p.stderr
    first, _, footer = p.stdout.partition(b"\n")
    assert first == READ_LINE.encode()  # the model's text, byte for byte: the override raw
    assert b"lone carriage return" in footer


def test_call_json_is_the_same_record_on_a_terminal_and_in_a_pipe(workspace: Path) -> None:
    (workspace / "hostile.txt").write_text(HOSTILE)
    status, seen, err = on_a_pty(workspace, "call", "read", '{"path": "hostile.txt"}', "--json")
    assert status == 0, err
    on_terminal = json.loads(seen.replace(b"\r\n", b"\n"))
    p = piped(workspace, "call", "read", '{"path": "hostile.txt"}', "--json")
    assert p.returncode == 0, p.stderr
    in_pipe = json.loads(p.stdout)
    # The record's text (the model's, with no final newline), escapes and all, in both.
    assert on_terminal["text"] == in_pipe["text"]
    assert in_pipe["text"].startswith(READ_LINE + "\n")
    assert on_terminal["outcome"] == in_pipe["outcome"] == "ok"


def test_a_failed_call_on_a_terminal_shows_its_controls_too(workspace: Path) -> None:
    # An error's text names what the model asked for: a path with an escape sequence in it.
    status, seen, err = on_a_pty(workspace, "call", "read", json.dumps({"path": "no\x1b[2Jsuch.txt"}))
    assert status == 1, err
    out = seen.replace(b"\r\n", b"\n")
    assert b"\x1b" not in out and "\u241b[2J".encode() in out


def test_a_notice_on_a_terminal_shows_its_controls_too(workspace: Path) -> None:
    # A background job's end is a notice naming its command, which may hold an escape sequence.
    command = "echo done; true # \x1b[2J\u202e"
    p = piped(workspace, "call", "shell", json.dumps({"command": command, "run_in_background": True}))
    assert p.returncode == 0, p.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the job's end is recorded (its notice is then queued)
        ev = piped(workspace, "events", "-c", "--json")
        if any(e["kind"] == "job-ended" for e in json.loads(ev.stdout)["events"]):
            break
        time.sleep(0.1)
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "zuno", "call", "-c", "read", '{"path": "."}', "--root", str(workspace)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,  # the notice goes to stderr: a terminal here
        env=zuno_env({"NO_COLOR": "1"}),
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    notice = next(line for line in seen.decode().splitlines() if line.startswith("[notice] Background job"))
    assert "\x1b" not in notice and "\u202e" not in notice
    assert "\u241b[2J<U+202E>" in notice
