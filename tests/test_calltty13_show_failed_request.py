"""``zuno show`` names what a failed request was for.

Before, a failed request read "request N failed after K attempts: ...", so a compaction's failed
summary request looked like a failed turn request. Now the line carries the request's purpose
(``turn`` or ``compaction``) and its turn, as ``--json`` already did. The failures are real: the
turn's server (a loopback fake) refuses the request as too long, the summary model's server
answers 500, through ``zuno run`` and then ``zuno show``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import zuno_cli
from fake_provider import Fail, FakeProvider, Reply

LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
    }
}
BIG_PROMPT = "BIG-PROMPT " + "filler words for the context " * 400


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


@pytest.fixture
def summariser() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def config(fake: FakeProvider, summariser: FakeProvider) -> dict[str, Any]:
    """The turn's model claims a large context (nothing compacts before the server refuses); the
    summary model sum/cheap has one retry."""
    return {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": "openai-chat",
                "options": {"baseURL": fake.base_url, "apiKey": "k"},
                "models": {"m1": {"context": 65536, "output": 256}},
            },
            "sum": {
                "api": "openai-chat",
                "options": {"baseURL": summariser.base_url, "apiKey": "k", "maxRetries": 1, "timeout": 400},
                "models": {"cheap": {"context": 65536, "output": 256}},
            },
        },
        "agent": {"tools": ["read"], "compaction": {"at_fraction": 0.5, "keep_fraction": 0.2, "model": "sum/cheap"}},
    }


def test_show_says_a_failed_request_was_the_compactions_summary_and_which_failed_the_turn(
    workspace: Path, fake: FakeProvider, summariser: FakeProvider
) -> None:
    (workspace / "zuno.json").write_text(json.dumps(config(fake, summariser)))
    fake.script(Reply("hi"))
    first = zuno_cli(workspace, "run", "--json", "hello")
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session"]
    fake.script(Fail(400, body=LLAMA_OVERFLOW))
    summariser.script(Fail(500), Fail(500))
    second = zuno_cli(workspace, "run", "--json", "--session", sid, BIG_PROMPT)
    assert second.returncode == 1, second.stderr
    assert json.loads(second.stdout)["stop_reason"] == "provider_error"

    shown = zuno_cli(workspace, "show", sid)
    assert shown.returncode == 0, shown.stderr
    failed = [line for line in shown.stdout.splitlines() if re.match(r"request \d+ .*failed", line)]
    assert len(failed) == 2, shown.stdout
    turn_line, compaction_line = sorted(failed, key=lambda line: "(purpose compaction" in line)
    assert re.match(r"request \d+ \(purpose turn, turn 2\) failed after 1 attempt: ", turn_line)
    assert "exceeds the available context size" in turn_line
    assert re.match(r"request \d+ \(purpose compaction, turn 2\) failed after 2 attempts: ", compaction_line)

    # --json already carried each request's purpose: the same two, as they were.
    as_json = zuno_cli(workspace, "show", sid, "--json")
    assert as_json.returncode == 0, as_json.stderr
    requests = json.loads(as_json.stdout)["requests"]
    failed_purposes = sorted(r["purpose"] for r in requests if r["status"] == "failed")
    assert failed_purposes == ["compaction", "turn"]
