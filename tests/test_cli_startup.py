"""What a `zuno` start-up loads: a command imports what it runs, not everything Zuno has.

Guarded by the modules a real CLI process has loaded when it ends (its `sys.modules`), not by a
time: `zuno --version` / `--help` load neither pydantic, the config models, the runtime, the store
nor any tool family; a command that runs calls loads no agent, no MCP SDK, no provider SDK and no
HTTP client (the web engine loads at the first fetch).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import zuno_env

# Run the real entry point (python -m zuno) and write the loaded modules to a file when it ends.
_PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["zuno", *sys.argv[2:]]
try:
    runpy.run_module("zuno", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
else:
    code = 0
with open(out, "w") as f:
    json.dump({"status": code, "modules": sorted(sys.modules)}, f)
"""

# Heavy to import, and needed by no command that only prints (pydantic alone builds ~100 models).
NOT_FOR_PRINTING = (
    "pydantic",
    "zuno.config",
    "zuno.runtime",
    "zuno.dispatch",
    "zuno.admitting",
    "zuno.call_runner",
    "zuno.store",
    "zuno.surface",
    "zuno.tools",
    "zuno.agent",
    "zuno.serve",
    "zuno.connect",
    "zuno.permissions",
)
# Needed only by `zuno run` / `zuno mcp` / a fetch: never by a command that runs a read.
NOT_FOR_A_READ = (
    "zuno.agent",
    "zuno.serve",
    "mcp",
    "openai",
    "anthropic",
    "httpx",
    "httpx2",
    "httpcore",
    "h11",
    "anyio",
    "socksio",
    "zuno.tools.web.engine",
    "zuno.tools.web.backend",
)


def probe(tmp_path: Path, cwd: Path, *args: str, stdin: str | None = None) -> tuple[object, str, list[str], str]:
    """Run ``zuno ARGS`` through the real entry point: its exit status, stdout, the modules it had
    loaded when it ended, and stderr."""
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=zuno_env(),
        timeout=120,
    )
    assert out.exists(), proc.stderr
    data = json.loads(out.read_text())
    return data["status"], proc.stdout, data["modules"], proc.stderr


def _loaded(tmp_path: Path, cwd: Path, *args: str, stdin: str | None = None) -> tuple[object, list[str]]:
    status, _out, modules, _err = probe(tmp_path, cwd, *args, stdin=stdin)
    return status, modules


def hits(modules: list[str], banned: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are one of ``banned`` or inside one."""
    return [m for m in modules if any(m == b or m.startswith(b + ".") for b in banned)]


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("sessions", "--help"), ("run", "--help")])
def test_printing_commands_load_no_config_runtime_or_tools(tmp_path: Path, workspace: Path, args: tuple[str]) -> None:
    status, modules = _loaded(tmp_path, workspace, *args)
    assert status in (0, None)
    assert "zuno.cli" in modules and "argparse" in modules  # the probe ran the real command
    assert hits(modules, NOT_FOR_PRINTING) == []


def test_a_read_loads_no_agent_mcp_provider_or_http_client(tmp_path: Path, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hi\n")
    status, modules = _loaded(tmp_path, workspace, "call", "read", '{"path": "a.txt"}')
    assert status == 0
    assert "zuno.runtime" in modules and "zuno.tools.web.fetch_tool" in modules  # the whole surface was built
    assert hits(modules, NOT_FOR_A_READ) == []
    step = '[{"name": "read", "arguments": {"path": "a.txt"}}]'
    status, modules = _loaded(tmp_path, workspace, "batch", "-", stdin=step)
    assert status == 0
    assert hits(modules, NOT_FOR_A_READ) == []


def test_run_spells_the_session_modes_of_the_agent() -> None:
    from zuno.agent.items import MODES
    from zuno.commands import run

    assert run.MODES == MODES


def test_the_package_reexports_lazily_and_zuno_tool_stays_the_decorator() -> None:
    code = """
import sys, zuno
assert "zuno.runtime" not in sys.modules and "pydantic" not in sys.modules
import zuno.tool  # the submodule of that name
from zuno import tool
assert callable(tool) and zuno.tool is tool and tool.__module__ == "zuno.tool"
for name in zuno.__all__:
    assert getattr(zuno, name) is getattr(sys.modules[zuno._WHERE[name]], name), name
from zuno import Runtime, load_config, SessionBusy
assert Runtime.__module__ == "zuno.runtime"
try:
    zuno.no_such_name
except AttributeError as e:
    assert "no_such_name" in str(e)
else:
    raise AssertionError("no AttributeError")
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=zuno_env(), timeout=120)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
