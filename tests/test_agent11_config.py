"""``zuno run``'s config from outside (eleventh round): which layer wins, and a bad value named by
the key it was read from with the range that fixes it (exit 2, nothing sent)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import zuno_env
from fake_provider import FakeProvider, Reply


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as f:
        yield f


def _provider(fake: FakeProvider, **options: Any) -> dict[str, Any]:
    return {"api": "openai-chat", "options": {"baseURL": fake.base_url, "apiKey": "k", **options},
            "models": {m: {"context": 65536, "output": 2048} for m in ("user", "project", "file", "content", "flag")}}


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zuno", "run", "hi", *args, "--root", str(root)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=zuno_env({"NO_COLOR": "1", **(env or {})}),
        timeout=60,
    )


def test_each_config_layer_overrides_the_one_before(workspace: Path, tmp_path: Path, fake: FakeProvider) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "zuno.json").write_text(json.dumps({"model": "fake/user", "provider": {"fake": _provider(fake)}}))
    env = {"ZUNO_CONFIG_DIR": str(user)}
    seen: list[str] = []

    def model_of(*args: str, **more: str) -> str:
        fake.script(Reply(text="ok"))
        p = _run(workspace, *args, env={**env, **more})
        assert p.returncode == 0, p.stderr
        seen.append(fake.requests[-1].body["model"])
        return seen[-1]

    assert model_of() == "user"
    (workspace / "zuno.json").write_text(json.dumps({"model": "fake/project"}))
    assert model_of() == "project"
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"model": "fake/file"}))
    assert model_of(ZUNO_CONFIG=str(named)) == "file"
    content = json.dumps({"model": "fake/content"})
    assert model_of(ZUNO_CONFIG=str(named), ZUNO_CONFIG_CONTENT=content) == "content"
    assert model_of("--model", "fake/flag", ZUNO_CONFIG=str(named), ZUNO_CONFIG_CONTENT=content) == "flag"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"maxRetries": -1}, "provider.fake.options.maxRetries = -1 is out of range: allowed at least 0"),
        ({"timeout": 0}, "provider.fake.options.timeout = 0 is out of range: allowed at least 1"),
    ],
)
def test_a_value_under_a_provider_below_its_bound_names_the_bound(
    workspace: Path, fake: FakeProvider, options: dict[str, Any], message: str
) -> None:
    """Before: "allowed Input should be greater than or equal to 0", pydantic's sentence, for a
    key under a map (provider.<id>, models.<name>), where the range could not be looked up."""
    config = {"model": "fake/flag", "provider": {"fake": _provider(fake, **options)}}
    (workspace / "zuno.json").write_text(json.dumps(config))
    p = _run(workspace)
    assert p.returncode == 2 and fake.requests == []
    assert message in p.stderr and "Input should" not in p.stderr, p.stderr


def test_a_model_context_of_zero_names_the_bound(workspace: Path, fake: FakeProvider) -> None:
    provider = _provider(fake)
    provider["models"]["flag"]["context"] = 0
    (workspace / "zuno.json").write_text(json.dumps({"model": "fake/flag", "provider": {"fake": provider}}))
    p = _run(workspace)
    assert p.returncode == 2 and fake.requests == []
    assert "provider.fake.models.flag.context = 0 is out of range: allowed at least 1" in p.stderr, p.stderr


@pytest.mark.parametrize(("model", "problem"), [("nope/x", "no provider 'nope'"), ("x", "expected \"<provider id>")])
def test_a_bad_compaction_model_is_named_by_its_config_key(
    workspace: Path, fake: FakeProvider, model: str, problem: str
) -> None:
    """Before: "zuno: --model = 'nope/x': …" for agent.compaction.model, a flag the user never
    passed."""
    config = {"model": "fake/flag", "provider": {"fake": _provider(fake)}, "agent": {"compaction": {"model": model}}}
    (workspace / "zuno.json").write_text(json.dumps(config))
    p = _run(workspace)
    assert p.returncode == 2 and fake.requests == []
    assert f"config key agent.compaction.model = {model!r}: {problem}" in p.stderr, p.stderr
    assert "--model" not in p.stderr.split("\n")[0].split(":", 2)[1]
