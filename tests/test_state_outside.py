"""The durable-state half tried from outside, the way users and real models use it: `zuno run` over
the loopback model server (real wire formats), `zuno call` with the inputs models really send,
`zuno goal resume`, the interactive `/goal resume`. Each test is a defect found by outside testing
(ninth round) and fails without its fix."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import zuno_env
from fake_provider import Call, FakeProvider, Reply

SECRET = "sk-state-outside-7d1e"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def configure(root: Path, fake: FakeProvider, api: str = "openai-chat") -> None:
    base = fake.root_url if api == "anthropic" else fake.base_url
    cfg: dict[str, Any] = {
        "model": "fake/m1",
        "provider": {
            "fake": {
                "api": api,
                "options": {"baseURL": base, "apiKey": "{env:FAKE_KEY}"},
                "models": {"m1": {"context": 65536, "output": 2048}},
            }
        },
    }
    (root / "zuno.json").write_text(json.dumps(cfg))


def zuno_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", *args, "--root", str(root)],
        input="",
        capture_output=True,
        text=True,
        env=zuno_env({"FAKE_KEY": SECRET, "NO_COLOR": "1"}),
        timeout=90,
    )


def run_json(root: Path, *args: str) -> dict[str, Any]:
    p = zuno_cli(root, "run", "--json", *args)
    assert "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


def shown(root: Path, kind: str, session: str) -> dict[str, Any]:
    """What `zuno plan|goal|todo --json` prints for the session."""
    p = zuno_cli(root, kind, "--session", session, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def tool_results(req: Any) -> list[dict[str, Any]]:
    return [m for m in req.body["messages"] if m.get("role") == "tool"]


# -- a provider that numbers the calls of every answer afresh ------------------------------------


@pytest.mark.parametrize("api", ["openai-chat", "anthropic"])
def test_state_mutations_in_later_answers_apply_when_the_provider_reuses_call_ids(
    workspace: Path, fake: FakeProvider, api: str
) -> None:
    """Many compatible servers number the calls of each answer afresh (call_1 every time). The
    state tools take the call id as the delivery id, so the second todo_update was refused
    ChangedDelivery (an id the model cannot change), and an identical one in a later turn was
    taken for a repeated delivery: it reported ok and applied nothing."""
    configure(workspace, fake, api)
    add = {"action": "add", "items": [{"title": "a"}]}
    fake.script(
        Reply(calls=[Call("todo_update", json.dumps(add), id="call_1")]),
        Reply(calls=[Call("todo_update", json.dumps({"action": "add", "expected_revision": 1,
                                                       "items": [{"title": "b"}]}), id="call_1")]),
        Reply(calls=[Call("todo_update", json.dumps({"action": "patch", "expected_revision": 2,
                                                       "items": [{"id": "t1", "status": "completed"}]}),
                          id="call_1")]),
        Reply(text="done"),
    )
    out = run_json(workspace, "make todos")
    assert out["stop_reason"] == "final"
    todos = shown(workspace, "todo", out["session"])
    assert todos["revision"] == 3
    assert [(t["title"], t["status"]) for t in todos["todos"]] == [("a", "completed"), ("b", "pending")]
    # The results the model saw are successes, each paired with its own (now distinct) call id.
    last = fake.requests[-1]
    if api == "openai-chat":
        results = tool_results(last)
        assert len({r["tool_call_id"] for r in results}) == 3
        assert not any("refused" in r["content"] for r in results)
    else:
        ids = [b["tool_use_id"] for m in last.body["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
        assert len(ids) == len(set(ids)) == 3


def test_an_identical_call_with_a_reused_id_in_a_later_turn_is_not_a_silent_replay(
    workspace: Path, fake: FakeProvider
) -> None:
    configure(workspace, fake)
    create = json.dumps({"action": "create", "objective": "o", "steps": [{"title": "a"}]})
    fake.script(Reply(calls=[Call("plan_update", create, id="call_1")]), Reply(text="made"))
    first = run_json(workspace, "plan it")
    fake.script(
        Reply(calls=[Call("plan_update", json.dumps({"action": "append", "expected_revision": 1,
                                                       "steps": [{"title": "b"}]}), id="call_1")]),
        Reply(text="appended"),
    )
    run_json(workspace, "--continue", "add a step")
    plan = shown(workspace, "plan", first["session"])
    assert plan["revision"] == 2 and [s["title"] for s in plan["plan"]["steps"]] == ["a", "b"]
