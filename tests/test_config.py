"""Config: sources and their order, and a clear error for every bad value (exit 2, nothing run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zuno import limits
from zuno.config import Config, ConfigError, load_config


def test_defaults_are_the_specs() -> None:
    c = Config()
    assert (
        c.concurrency.tool_calls,
        c.concurrency.delegations,
        c.concurrency.mcp_connections,
        c.concurrency.lsp_requests,
    ) == (8, 8, 8, 4)
    assert (c.tool_output.max_bytes, c.tool_output.max_lines) == (51200, 2000)
    assert c.permission.strict is False and c.profile == "zuno"


@pytest.mark.parametrize("field", ["tool_calls", "delegations", "mcp_connections", "lsp_requests"])
@pytest.mark.parametrize("value", [limits.CONCURRENCY_MIN - 1, limits.CONCURRENCY_MAX + 1])
def test_each_concurrency_field_outside_1_to_64_is_an_error(tmp_path: Path, field: str, value: int) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, overrides={"concurrency": {field: value}}, environ={})
    msg = str(e.value)
    assert f"concurrency.{field} = {value}" in msg and "allowed 1..=64" in msg


@pytest.mark.parametrize("field", ["tool_calls", "delegations", "mcp_connections", "lsp_requests"])
@pytest.mark.parametrize("value", [limits.CONCURRENCY_MIN, limits.CONCURRENCY_MAX])
def test_each_concurrency_bound_itself_is_accepted(tmp_path: Path, field: str, value: int) -> None:
    c = load_config(tmp_path, overrides={"concurrency": {field: value}}, environ={})
    assert getattr(c.concurrency, field) == value


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"tool_output": {"max_bytes": 0}}, "tool_output.max_bytes = 0 is out of range"),
        ({"tool_output": {"max_lines": -1}}, "tool_output.max_lines = -1 is out of range"),
        ({"concurrency": {"tool_calls": "eight"}}, 'concurrency.tool_calls = "eight": must be an integer'),
        ({"profile": "claude"}, 'config key profile = "claude": must be one of'),
        ({"permission": {"rules": [{"tool": "x", "action": "maybe"}]}}, 'permission.rules.0.action = "maybe"'),
        ({"tools": {"webfetch": "no"}}, "tools.webfetch"),
        ({"concurency": {}}, "config key concurency is not a known key"),
    ],
)
def test_bad_values_name_the_key_and_the_fix(tmp_path: Path, overrides: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, overrides=overrides, environ={})
    assert expected in str(e.value)


def test_sources_merge_in_order_and_errors_name_their_file(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "zuno.json").write_text(json.dumps({"concurrency": {"tool_calls": 2, "delegations": 3}}))
    root = tmp_path / "root"
    root.mkdir()
    (root / "zuno.json").write_text(json.dumps({"concurrency": {"tool_calls": 4}}))
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"tool_output": {"max_lines": 10}}))
    env = {
        "ZUNO_CONFIG_DIR": str(user),
        "ZUNO_CONFIG": str(named),
        "ZUNO_CONFIG_CONTENT": json.dumps({"tool_output": {"max_bytes": 99}}),
    }
    c = load_config(root, environ=env)
    assert (c.concurrency.tool_calls, c.concurrency.delegations) == (4, 3)
    assert (c.tool_output.max_lines, c.tool_output.max_bytes) == (10, 99)
    (root / "zuno.json").write_text(json.dumps({"concurrency": {"tool_calls": 65}}))
    with pytest.raises(ConfigError) as e:
        load_config(root, environ=env)
    assert str(root / "zuno.json") in str(e.value)
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(root, environ={**env, "ZUNO_CONFIG_CONTENT": "{nope"})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(root, environ={"ZUNO_CONFIG": str(tmp_path / "missing.json")})


def test_cli_exits_2_on_a_bad_config_and_runs_nothing(workspace: Path, run_zuno: Any) -> None:
    (workspace / "zuno.json").write_text(json.dumps({"concurrency": {"tool_calls": 0}}))
    calls = json.dumps([{"name": "write", "arguments": {"path": "x.txt", "content": "x"}}])
    proc = run_zuno("batch", "-", input=calls)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "concurrency.tool_calls = 0 is out of range: allowed 1..=64" in proc.stderr
    assert not (workspace / "x.txt").exists()
