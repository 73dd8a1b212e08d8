"""`zuno run` through unhappy paths (seventeenth round): real `zuno` processes against the loopback
fake provider speaking the real wire formats; each test fails before its fix."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import zuno_env
from fake_provider import Call, Fail, FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _config(root: Path, fake: FakeProvider, api: str, **model: int) -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    models = {"m1": model or {"context": 65536, "output": 2048}}
    (root / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": {
        "api": api, "options": {"baseURL": base, "apiKey": "k", "maxRetries": 0}, "models": models}}}))


def _zuno(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zuno", *args, "--root", str(root)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1"}), timeout=60)


def _tool_texts(body: dict[str, Any]) -> list[str]:
    """The tool results' texts of an Anthropic Messages request."""
    out = []
    for m in body["messages"]:
        for block in m["content"] if isinstance(m["content"], list) else ():
            if block.get("type") == "tool_result":
                content = block["content"]
                out.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
    return out


def test_a_tool_result_larger_than_the_context_is_shortened_in_the_request_and_kept_whole(
    workspace: Path, fake: FakeProvider
) -> None:
    """Before: a compaction keeps the latest step's results whole, so a read result of ~13,000 tokens
    went to a model with an 8,192-token context as it was: every request of the session was too long
    for the server, and `zuno resume` sent it again. Now the request holds the result's head and
    tail with a mark saying what was left out and what to ask for instead; the record keeps it
    whole; the user is told."""
    (workspace / "big.txt").write_text("".join(f"line {i} of a rather long file with words\n" for i in range(20000)))
    _config(workspace, fake, "anthropic", context=8192, output=1024)
    fake.script(Reply(calls=[Call("read", json.dumps({"path": "big.txt"}))]), Reply(text="the summary"),
                Reply(text="done"))
    p = _zuno(workspace, "run", "read big.txt", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["stop_reason"] == "final" and out["final_text"] == "done"
    assert "a tool result too large for the context (8192 tokens) was shortened" in p.stderr
    sent = _tool_texts(fake.requests[-1].body)
    assert len(sent) == 1
    # within the context (about 4 characters a token; the tool list and JSON's escapes included)
    assert len(json.dumps(fake.requests[-1].body)) < 8192 * 4
    assert "left out here: the whole result does not fit the model's context (8192 tokens)" in sent[0]
    assert "line 0 of a rather" in sent[0] and "continue with offset=" in sent[0]  # its head and its tail
    shown = json.loads(_zuno(workspace, "show", out["session"], "--json").stdout)
    recorded = [it["data"]["text"] for it in shown["items"] if it["kind"] == "tool_result"]
    assert len(recorded) == 1 and "left out here" not in recorded[0] and len(recorded[0]) > len(sent[0]) * 2


def test_a_tool_result_that_fits_is_sent_whole(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "small.txt").write_text("".join(f"line {i}\n" for i in range(50)))
    _config(workspace, fake, "anthropic", context=8192, output=1024)
    fake.script(Reply(calls=[Call("read", json.dumps({"path": "small.txt"}))]), Reply(text="done"))
    p = _zuno(workspace, "run", "read small.txt", "--json")
    assert p.returncode == 0, p.stderr
    assert "shortened" not in p.stderr
    (sent,) = _tool_texts(fake.requests[-1].body)
    assert "left out" not in sent and "line 49" in sent



def test_an_empty_answer_is_said_not_silent(workspace: Path, fake: FakeProvider) -> None:
    """Before: a model that ended its turn with no text left `zuno run` silent with exit 0, as if
    nothing had run. Now one line on stderr says the answer was empty; `--json` is unchanged."""
    _config(workspace, fake, "openai-chat")
    fake.script(Reply(text=""), Reply(text=""))
    p = _zuno(workspace, "run", "hi")
    assert p.returncode == 0 and p.stdout.strip() == ""
    assert "zuno: the model's answer was empty (it ended its turn with no text)" in p.stderr
    q = _zuno(workspace, "run", "hi", "--json")
    assert q.returncode == 0 and json.loads(q.stdout)["final_text"] == "" and "empty" not in q.stderr


def test_a_refused_key_read_from_the_environment_names_the_variable(workspace: Path, fake: FakeProvider) -> None:
    (workspace / "zuno.json").write_text(json.dumps({"model": "openai/m1", "provider": {"openai": {
        "options": {"baseURL": fake.base_url, "maxRetries": 0}}}}))
    fake.script(Fail(401))
    p = subprocess.run([sys.executable, "-m", "zuno", "run", "hi", "--json", "--root", str(workspace)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       env=zuno_env({"NO_COLOR": "1", "OPENAI_API_KEY": "k-from-env"}), timeout=60)
    assert p.returncode == 1
    assert "check provider.openai.options.apiKey (or OPENAI_API_KEY)." in json.loads(p.stdout)["detail"]
