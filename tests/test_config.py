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


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"modle": "a/b"}, "config key modle is not a known key (from arguments). Did you mean model? Otherwise"),
        ({"tool_output": {"max_byte": 5}}, "Did you mean tool_output.max_bytes?"),
        ({"agent": {"limits": {"step_per_turn": 3}}}, "Did you mean agent.limits.steps_per_turn?"),
        # inside a map of models (provider.<id>), and a field known by its alias
        ({"provider": {"x": {"api": "openai-chat", "option": {}}}}, "Did you mean provider.x.options?"),
        ({"provider": {"x": {"api": "anthropic", "options": {"baseUrl": "http://h"}}}}, "provider.x.options.baseURL?"),
        ({"zzzzz": 1}, "config key zzzzz is not a known key (from arguments). Remove it or check its spelling."),
        # another harness's permission shape: the rule it means
        ({"permission": {"shell": "ask"}}, '"permission": {"rules": [{"tool": "shell", "action": "ask"}]}'),
    ],
)
def test_an_unknown_key_names_the_key_it_is_close_to(tmp_path: Path, overrides: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, overrides=overrides, environ={})
    assert expected in str(e.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('// mine\n{"profile": "zuno"}', "(Expecting value at line 1 column 1): a comment; a config is plain JSON"),
        ('{"profile": "zuno" /* x */}', ": a comment; a config is plain JSON, remove the comments."),
        ('{"profile": "zuno",}', ": a trailing comma; remove the comma before it."),
        ('{"tools": {"webfetch": true,},}', ": a trailing comma"),
        ("", ": it is empty; write a JSON object ({} for no settings)."),
        ("  \n", ": it is empty"),
        ('{"profile": }', "(Expecting value at line 1 column 13)."),  # no likely cause: the parser's words only
    ],
)
def test_a_config_json_cannot_read_says_what_it_most_likely_holds(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "zuno.json").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, environ={})
    assert expected in str(e.value)
