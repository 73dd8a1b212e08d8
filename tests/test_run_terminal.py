"""``zuno run`` on a real terminal (a pty) against the loopback fake provider, and the same
commands in a pipe: the spinner, streamed Markdown (rendered on a tty, byte-exact in a pipe), one
line per tool call with its outcome, and approvals asked inline in the interactive session."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from terminal_screen import screen
from zuno.commands.run_view import SPINNER_FRAMES

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply

MARKDOWN = "# Title\nSome **bold** and `a*b*`\n```\nx = *y*\n```\n- item\n"
DELTAS = ["# Ti", "tle\nSome **bo", "ld** and `a*", "b*`\n``", "`\nx = *y*\n```\n- item\n"]


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def configure(root: Path, fake: FakeProvider, extra: dict[str, Any] | None = None) -> None:
    cfg: dict[str, Any] = {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": "openai-chat",
                "options": {"baseURL": fake.base_url, "apiKey": "{env:FAKE_KEY}"},
                "models": {"m1": {"context": 65536, "output": 2048}},
            }
        },
        "permission": {"rules": [{"tool": "shell", "action": "allow"}]},
    }
    cfg.update(extra or {})
    (root / "zuno.json").write_text(json.dumps(cfg))


def env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    e = zuno_env({"FAKE_KEY": "sk-test", "ZUNO_CONFIG_DIR": str(root.parent / "cfg")})
    e.pop("NO_COLOR", None)
    e.update(extra or {})
    return e


class Pty:
    """zuno with stdin, stdout and stderr on one pseudo-terminal."""

    def __init__(self, root: Path, *args: str, extra_env: dict[str, str] | None = None) -> None:
        self.master, slave = pty.openpty()
        self.child = subprocess.Popen(
            [sys.executable, "-m", "zuno", "run", *args, "--root", str(root)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env(root, extra_env),
            start_new_session=True,
        )
        os.close(slave)
        self.seen = b""

    def until(self, marker: bytes, within: float = 30) -> None:
        deadline = time.monotonic() + within
        while marker not in self.seen and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.seen += chunk
        assert marker in self.seen, self.text

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def finish(self, within: float = 30) -> int:
        deadline = time.monotonic() + within
        while self.child.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096)
                except OSError:
                    break
        try:
            return self.child.wait(max(0.1, deadline - time.monotonic()))
        finally:
            if self.child.poll() is None:
                self.child.kill()
            os.close(self.master)

    @property
    def text(self) -> str:
        return self.seen.decode(errors="replace").replace("\r\n", "\n")


def piped(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", "run", *args, "--root", str(root)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env=env(root),
        timeout=60,
    )


def test_the_spinner_turns_on_a_terminal_while_waiting_and_is_cleared_before_text(
    workspace: Path, fake: FakeProvider
) -> None:
    configure(workspace, fake)
    fake.script(
        Reply(calls=[Call("shell", '{"command": "sleep 0.4"}')], delay_s=0.3),
        Reply(text=["Hel", "lo\n"], delay_s=0.3),
    )
    term = Pty(workspace, "say hello")
    assert term.finish() == 0, term.text
    text = term.text
    assert "thinking…" in text and "running shell…" in text
    assert any(f in text for f in SPINNER_FRAMES)
    # the spinner's line is cleared right before the first text, and not drawn after it
    before, _, after = text.partition("Hello")
    assert before.endswith("\r\x1b[K") and "thinking…" not in after and "✓ shell sleep 0.4" in before


def test_no_spinner_and_no_escape_in_a_pipe(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake)
    fake.script(Reply(calls=[Call("shell", '{"command": "sleep 0.2"}')], delay_s=0.2), Reply(text="Hello\n"))
    p = piped(workspace, "say hello")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"Hello\n"
    assert b"\x1b" not in p.stderr and b"thinking" not in p.stderr
    assert p.stderr.decode().splitlines() == ["✓ shell sleep 0.2"]


def test_markdown_is_rendered_on_a_terminal(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake)
    fake.script(Reply(text=DELTAS))
    term = Pty(workspace, "show markdown")
    assert term.finish() == 0, term.text
    rows = screen(term.text)  # the last version of each line, after the erases
    assert "\x1b[1m\x1b[4mTitle\x1b[24m\x1b[22m" in rows
    assert "Some \x1b[1mbold\x1b[22m and \x1b[36ma*b*\x1b[39m" in rows
    assert "\x1b[2mx = *y*\x1b[0m" in rows and "• item" in rows
    assert not any("**bold**" in r or "# Ti" in r for r in rows)
    assert "\r\x1b[2K" in term.text  # a partial line was shown, then replaced


def test_a_partial_line_is_on_the_terminal_before_its_newline_is_sent(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake)
    fake.script(Reply(text=["Some **par", "tial** and ", "more\n"], delay_s=1.0))
    term = Pty(workspace, "stream it")
    term.until(b"Some **par", within=30)
    req = fake.requests[0]
    sent = len(req.text_written_at)
    seen_at = time.perf_counter()
    assert b"more" not in term.seen and sent < 3, "the first delta showed only after the newline was sent"
    term.until(b"tial** and ")
    assert term.finish() == 0, term.text
    assert len(req.text_written_at) == 3 and req.text_written_at[2] > seen_at
    rows = screen(term.text)
    assert "Some \x1b[1mpartial\x1b[22m and more" in rows
    assert not any("**" in r for r in rows)


def test_markdown_is_raw_in_a_pipe_and_with_no_color(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake)
    fake.script(Reply(text=DELTAS))
    p = piped(workspace, "show markdown")
    assert p.returncode == 0, p.stderr
    assert p.stdout == MARKDOWN.encode()  # byte-exact
    fake.script(Reply(text=DELTAS))
    term = Pty(workspace, "show markdown", extra_env={"NO_COLOR": "1"})
    assert term.finish() == 0, term.text
    assert MARKDOWN in term.text.replace("\r\x1b[K", "")


def test_one_line_per_tool_call_with_its_outcome(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "README.md").write_text("hello\n")
    configure(
        workspace,
        fake,
        {"permission": {"rules": [{"tool": "shell", "action": "allow"}, {"tool": "write", "action": "deny"}]}},
    )
    fake.script(
        Reply(
            calls=[
                Call("read", '{"path": "README.md"}'),
                Call("shell", '{"command": "exit 3"}'),
                Call("write", '{"path": "x.txt", "content": "no"}'),
            ]
        ),
        Reply(text="done\n"),
    )
    p = piped(workspace, "go")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.decode().splitlines()
    assert sorted(lines) == sorted(
        ["✓ read README.md", "✗ shell exit 3 — exit 3 (error)", "⊘ write x.txt (blocked: denied)"]
    )
    assert p.stdout == b"done\n"


def _approval_session(workspace: Path, fake: FakeProvider, path: str) -> Pty:
    configure(workspace, fake, {"permission": {"strict": True}})
    content = json.dumps({"path": path, "content": "approved\n"})
    fake.script(Reply(calls=[Call("write", content)]), Reply(text="finished\n"))
    term = Pty(workspace)
    term.until(b"zuno> ")
    term.write(b"write the file\n")
    term.until(b"[y/N] ")
    assert (
        f"? approve write {path} (SideEffecting) — strict mode: a SideEffecting call needs a fresh approval"
        in term.text
    )
    return term


def _leave(term: Pty) -> int:
    term.until(b"finished")
    term.until(b"zuno> ")
    term.write(b"/exit\n")
    return term.finish()


def test_an_inline_approval_accepted_with_y(workspace: Path, fake: FakeProvider) -> None:
    term = _approval_session(workspace, fake, "yes.txt")
    term.write(b"y\n")
    term.until("✓ write yes.txt".encode())
    assert _leave(term) == 0
    assert (workspace / "yes.txt").read_text() == "approved\n"


def test_an_inline_approval_refused_with_enter(workspace: Path, fake: FakeProvider) -> None:
    term = _approval_session(workspace, fake, "no.txt")
    term.write(b"\n")
    term.until("⊘ write no.txt (blocked: denied)".encode())
    assert _leave(term) == 0
    assert not (workspace / "no.txt").exists()
    assert "declined" in json.dumps(fake.requests[1].body["messages"])


def test_ctrl_c_at_an_inline_approval_is_a_refusal_and_the_session_goes_on(workspace: Path, fake: FakeProvider) -> None:
    term = _approval_session(workspace, fake, "int.txt")
    os.kill(term.child.pid, signal.SIGINT)
    term.until("⊘ write int.txt (blocked: denied)".encode())
    assert _leave(term) == 0
    assert not (workspace / "int.txt").exists()


def test_approve_still_approves_everything_in_the_interactive_session(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake, {"permission": {"strict": True}})
    fake.script(Reply(calls=[Call("write", '{"path": "auto.txt", "content": "a\\n"}')]), Reply(text="finished\n"))
    term = Pty(workspace, "--approve")
    term.until(b"zuno> ")
    term.write(b"write it\n")
    term.until("✓ write auto.txt".encode())
    assert _leave(term) == 0 and "[y/N]" not in term.text


def test_end_of_input_at_an_inline_approval_is_a_refusal(workspace: Path, fake: FakeProvider) -> None:
    term = _approval_session(workspace, fake, "eof.txt")
    term.write(b"\x04")  # Ctrl-D: the read ends with nothing
    term.until("⊘ write eof.txt (blocked: denied)".encode())
    assert _leave(term) == 0
    assert not (workspace / "eof.txt").exists()


def test_a_one_shot_run_on_a_terminal_asks_inline_too(workspace: Path, fake: FakeProvider) -> None:
    configure(workspace, fake, {"permission": {"strict": True}})
    fake.script(Reply(calls=[Call("write", '{"path": "one.txt", "content": "1\\n"}')]), Reply(text="finished\n"))
    term = Pty(workspace, "write it")
    term.until(b"[y/N] ")
    term.write(b"yes\n")
    assert term.finish() == 0, term.text
    assert "✓ write one.txt" in term.text and (workspace / "one.txt").read_text() == "1\n"


# An import hook for the child: the module `import <sdk>` runs waits until the gate file exists.
# It waits in exec_module, where a slow import spends its time (a finder's find_spec runs under
# the interpreter's global import lock, and waiting there would stop every thread's imports).
SDK_GATE = '''
import importlib.abc, importlib.machinery, os, sys, time

class _GatedLoader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        with open(os.environ["ZUNO_TEST_GATE"] + ".waiting", "w"):
            pass
        while not os.path.exists(os.environ["ZUNO_TEST_GATE"]):
            time.sleep(0.02)
        self.inner.exec_module(module)

class _Gate(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != os.environ["ZUNO_TEST_GATED_SDK"]:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _GatedLoader(spec.loader)
        return spec

sys.meta_path.insert(0, _Gate())
'''


@pytest.mark.parametrize(("api", "sdk"), [("anthropic", "anthropic"), ("openai-chat", "openai")])
def test_the_prompt_shows_while_the_sdk_is_still_loading(
    workspace: Path, fake: FakeProvider, tmp_path: Path, api: str, sdk: str
) -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    configure(workspace, fake, {"provider": {"fake": {"api": api, "options": {"baseURL": base, "apiKey": "k"}}}})
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SDK_GATE)
    gate = tmp_path / "gate"
    fake.script(Reply(text="loaded and answering\n"))
    term = Pty(
        workspace,
        extra_env={
            "PYTHONPATH": f"{hooks}{os.pathsep}{env(workspace)['PYTHONPATH']}",
            "ZUNO_TEST_GATED_SDK": sdk,
            "ZUNO_TEST_GATE": str(gate),
        },
    )
    try:
        # The prompt is there although the SDK's import cannot end (the gate is shut)...
        term.until(b"zuno> ")
        # ...and that import does begin, in the background, while the prompt waits for a line.
        deadline = time.monotonic() + 30
        while not Path(f"{gate}.waiting").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert Path(f"{gate}.waiting").exists()
        assert not gate.exists()
        term.write(b"answer me\n")  # typed while the SDK loads: the turn waits for it
        time.sleep(0.3)
        assert fake.requests == []
        gate.write_text("")
        term.until(b"loaded and answering")
        term.until(b"zuno> ")
        term.write(b"/exit\n")
        assert term.finish() == 0, term.text
    finally:
        gate.write_text("")
        if term.child.poll() is None:
            term.child.kill()
    assert len(fake.requests) == 1


def test_an_sdk_that_will_not_load_stops_the_turn_naming_it(
    workspace: Path, fake: FakeProvider, tmp_path: Path
) -> None:
    configure(workspace, fake, {"provider": {"fake": {"api": "anthropic", "options": {"baseURL": fake.root_url,
                                                                                       "apiKey": "k"}}}})
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Broken:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'anthropic':\n"
        "            raise ImportError('this build has no anthropic SDK')\n"
        "sys.meta_path.insert(0, _Broken())\n"
    )
    e = env(workspace)
    e["PYTHONPATH"] = f"{hooks}{os.pathsep}{e['PYTHONPATH']}"
    p = subprocess.run(
        [sys.executable, "-m", "zuno", "run", "--json", "q", "--root", str(workspace)],
        capture_output=True, stdin=subprocess.DEVNULL, env=e, timeout=60, text=True,
    )
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "provider_error"
    assert "its SDK could not be loaded (ImportError: this build has no anthropic SDK)" in out["detail"]
    assert "Traceback" not in p.stderr and fake.requests == []
