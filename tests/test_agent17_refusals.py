"""Provider refusals through `zuno run` (seventeenth round): HTTP 413 and the refusals of a key,
an address or a model, from real `zuno` processes against the loopback fake provider; each test
fails before its fix."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import zuno_env
from fake_provider import Call, Fail, FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _config(root: Path, fake: FakeProvider, api: str) -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    (root / "zuno.json").write_text(json.dumps({"model": "fake/m1", "provider": {"fake": {
        "api": api, "options": {"baseURL": base, "apiKey": "k", "maxRetries": 0},
        "models": {"m1": {"context": 65536, "output": 2048}}}}}))


def _zuno(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zuno", *args, "--root", str(root)], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1"}), timeout=60)


APIS = ["openai-chat", "openai-responses", "anthropic"]


@pytest.mark.parametrize("api", APIS)
def test_a_413_request_too_large_is_compacted_and_sent_again(workspace: Path, fake: FakeProvider, api: str) -> None:
    """Before: HTTP 413 was a plain `bad_request` ("HTTP 413: …"), the turn stopped, and every later
    request of the session (as large, or larger) met the same refusal. Now it is `too_large`: the
    history is compacted and the request sent again, once."""
    _config(workspace, fake, api)
    fake.script(Reply(calls=[Call("glob", json.dumps({"pattern": "*"}))]), Fail(413), Reply(text="the summary"),
                Reply(text="done"))
    p = _zuno(workspace, "run", "look", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["final_text"] == "done"
    assert "the summary" in json.dumps(fake.requests[-1].body)  # the request sent again was compacted


@pytest.mark.parametrize("api", APIS)
def test_a_413_that_compaction_cannot_help_names_the_fix(workspace: Path, fake: FakeProvider, api: str) -> None:
    _config(workspace, fake, api)
    fake.script(Fail(413))
    p = _zuno(workspace, "run", "look", "--json")
    assert p.returncode == 1 and len(fake.requests) == 1
    detail = json.loads(p.stdout)["detail"]
    assert "too_large — HTTP 413" in detail and "larger than the server (or a proxy before it) accepts" in detail
    assert "fewer or smaller images" in detail and "\n" not in detail


@pytest.mark.parametrize(("status", "fix"), [
    (401, "The server refused the key: check provider.fake.options.apiKey."),
    (403, "check provider.fake.options.apiKey and that it may use model 'm1'"),
    (404, "Check provider.fake.options.baseURL"),
])
def test_a_refusal_names_the_config_key_to_check(workspace: Path, fake: FakeProvider, status: int, fix: str) -> None:
    """Before: "auth — HTTP 401: …" / "not_found — HTTP 404: …" and nothing about what to change."""
    _config(workspace, fake, "openai-chat")
    fake.script(Fail(status))
    p = _zuno(workspace, "run", "hi", "--json")
    assert p.returncode == 1
    assert fix in json.loads(p.stdout)["detail"]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("zuno: ")]
    assert fix in line

