"""What a shell command inherits: the host environment minus the whole ZUNO_* namespace (compared
case-insensitively, no allowlist), then the host's hooks (config and API) that may put values back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.tools.shell import EnvHookInfo, add_env_hook
from zuno.tools.shell.env import build_environment, withheld

from conftest import RunZuno

WITHHELD = {
    "ZUNO_PID": "value-of-zuno-pid-4242",
    "ZUNO_CLIENT": "value-of-zuno-client",
    "ZUNO_WORKSPACE_ID": "value-of-workspace-id",
    "zuno_server_password": "value-hunter2",
    "ZUNO_Pid": "value-not-the-pid",
    "Zuno_Auth_Content": "value-secret-doc",
    "ZUNO_MODELS_DEFAULT": "value-models",
    "ZUNO_SANDBOX_MODE": "value-sandbox",
}
KEPT = {"ZUNO": "1", "AGENT": "zuno", "MY_API_TOKEN": "tok", "GH_TOKEN": "gh", "ZUNOISH": "z", "XZUNO_A": "x"}


def _env_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def test_cli_command_environment_withholds_the_namespace(run_zuno: RunZuno, workspace: Path) -> None:
    config = {"shell": {"env": {"ZUNO_PUT_BACK": "deliberate"}}}
    extra = {**WITHHELD, **KEPT, "ZUNO_CONFIG_CONTENT": json.dumps(config)}
    proc = run_zuno("call", "shell", json.dumps({"command": "env"}), "--json", env=extra)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    seen = _env_lines(rec["text"])
    for name in WITHHELD:
        assert name not in seen, name
    for value in WITHHELD.values():
        assert value not in rec["text"]
    assert "ZUNO_CONFIG_CONTENT" not in seen and "ZUNO_CONFIG_DIR" not in seen
    for name, value in KEPT.items():
        assert seen.get(name) == value, name
    # the host's config hook put one value back, deliberately
    assert seen["ZUNO_PUT_BACK"] == "deliberate"


def test_withheld_is_case_insensitive_and_only_grows() -> None:
    assert withheld("ZUNO_X") and withheld("zuno_x") and withheld("Zuno_X") and withheld("ZUNO_")
    assert not withheld("ZUNO") and not withheld("AGENT") and not withheld("XZUNO_A") and not withheld("ZUNOISH")


def test_hooks_run_after_the_removal() -> None:
    seen: dict[str, Any] = {}

    def hook(env: dict[str, str], info: EnvHookInfo) -> dict[str, str | None]:
        seen["names"] = set(env)
        seen["info"] = info
        env["IN_PLACE"] = "1"
        return {"ZUNO_TRACE_ID": "t-1", "DROP_ME": None}

    info = EnvHookInfo("env", "/w", "bash", "ses", "call")
    env = build_environment(
        {"FROM_CONFIG": "c"},
        [hook],
        info,
        environ={"ZUNO_SECRET": "s", "zuno_lower": "l", "DROP_ME": "d", "PATH": "/bin"},
    )
    assert not any(withheld(n) for n in seen["names"])  # the hook never saw the namespace
    assert "FROM_CONFIG" in seen["names"]  # the config's values come first
    assert seen["info"] is info
    assert env == {"PATH": "/bin", "FROM_CONFIG": "c", "IN_PLACE": "1", "ZUNO_TRACE_ID": "t-1"}


async def test_api_hook_reaches_the_command(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZUNO_SERVER_PASSWORD", "pw")
    monkeypatch.setenv("zuno_mixed_Case", "mc")
    monkeypatch.setenv("DROP_ME", "d")
    calls: list[EnvHookInfo] = []

    def hook(env: dict[str, str], info: EnvHookInfo) -> dict[str, str | None]:
        calls.append(info)
        return {"ZUNO_TRACE_ID": "trace-7", "DROP_ME": None}

    async with zuno.Runtime(root=workspace) as rt, rt.session() as s:
        add_env_hook(s, hook)
        res = await s.step([{"name": "shell", "arguments": {"command": "env"}}])
    rec = res.results[0]
    seen = _env_lines(rec.text)
    assert seen["ZUNO_TRACE_ID"] == "trace-7"
    assert "ZUNO_SERVER_PASSWORD" not in seen and "zuno_mixed_Case" not in seen and "DROP_ME" not in seen
    assert calls and calls[0].command == "env" and calls[0].interpreter == "bash"
