"""CLI start-up (seventeenth round): the look-only commands import only the modules they use.

``zuno.tools.shell`` and ``zuno.tools.state`` re-export their names lazily, so a module of the
family (the shell's receipts, the memory, the read API) loads without every tool of the family;
``zuno.tool`` imports asyncio where it runs a sync function in a thread. Guarded, as in
tests/test_cli16_startup.py, by the modules a real CLI process has loaded when it ends.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import zuno
from test_cli_startup import hits, probe

from conftest import zuno_env

# An event loop (and TLS, which asyncio loads) and the shell tool (the process machinery).
NO_LOOP = ("asyncio", "ssl", "zuno.tools.shell.tool", "zuno.process")
# The state family's tools that none of these commands reads.
OTHER_STATE_TOOLS = (
    "zuno.tools.state.task_context",
    "zuno.tools.state.history",
    "zuno.tools.state.notes",
    "zuno.tools.state.progress",
    "zuno.tools.state.projection",
)


@pytest.fixture(scope="module")
def with_receipt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A workspace whose session s1 ran one shell command (so it has a verification receipt) and
    set a Plan, made in this process; and that receipt's id."""
    root = tmp_path_factory.mktemp("cli17") / "ws"
    root.mkdir()

    async def make() -> str:
        async with zuno.Runtime(root=root) as rt, rt.session("s1") as s:
            step = await s.step([{"name": "shell", "arguments": {"command": "true"}}])
            plan = {"action": "create", "objective": "ship", "steps": [{"title": "build"}]}
            await s.step([{"name": "plan_update", "arguments": plan}])
            return str(step.results[0].metadata["receiptId"])

    return root, asyncio.run(make())


def test_receipt_loads_no_tool(tmp_path: Path, with_receipt: tuple[Path, str]) -> None:
    root, receipt_id = with_receipt
    status, out, modules, err = probe(tmp_path, root, "receipt", receipt_id)
    assert status in (0, None), err
    assert receipt_id in out  # the command really read the receipt
    assert "zuno.tools.shell.receipts" in modules
    assert hits(modules, (*NO_LOOP, "zuno.tool", "zuno.tools.state")) == []
    status, _out, modules, _err = probe(tmp_path, root, "receipt", "rcp_none")
    assert status == 2
    assert hits(modules, (*NO_LOOP, "zuno.tool", "zuno.tools.state")) == []


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("memory",), 0),
        (("memory", "--json"), 0),
        (("memory", "accept", "mp_none"), 1),  # (no such proposal: refused, read-only)
    ],
)
def test_memory_loads_no_loop_nor_the_other_tools(
    tmp_path: Path, with_receipt: tuple[Path, str], args: tuple[str, ...], status: int
) -> None:
    got, _out, modules, err = probe(tmp_path, with_receipt[0], *args)
    assert got == status, err
    assert "zuno.tools.state.memory" in modules
    banned = (*NO_LOOP, *OTHER_STATE_TOOLS, *(f"zuno.tools.state.{m}" for m in ("goal", "goal_input", "todo")))
    assert hits(modules, banned) == []


@pytest.mark.parametrize("kind", ["plan", "todo", "goal"])
def test_printing_the_state_loads_the_read_api_only(tmp_path: Path, with_receipt: tuple[Path, str], kind: str) -> None:
    status, out, modules, err = probe(tmp_path, with_receipt[0], kind, "--session", "s1")
    assert status in (0, None), err
    assert out.startswith("session s1")
    if kind == "plan":
        assert "[pending] build" in out
    assert "zuno.tools.state.api" in modules
    # No config is read (the store is opened read-only by path): not even its models.
    assert hits(modules, (*NO_LOOP, *OTHER_STATE_TOOLS, "zuno.tools.state.memory", "zuno.config")) == []


def test_sessions_prune_loads_no_loop_nor_outputs(tmp_path: Path, with_receipt: tuple[Path, str]) -> None:
    status, _out, modules, err = probe(tmp_path, with_receipt[0], "sessions", "prune", "--keep", "5", "--dry-run")
    assert status in (0, None), err
    assert "zuno.session_pruning" in modules
    assert hits(modules, (*NO_LOOP, "zuno.output", "zuno.tool", "zuno.tools")) == []


def test_goal_resume_loads_no_loop(tmp_path: Path, with_receipt: tuple[Path, str]) -> None:
    status, _out, modules, _err = probe(tmp_path, with_receipt[0], "goal", "resume", "--session", "s1")
    assert status == 1  # (no Goal to resume)
    assert hits(modules, (*NO_LOOP, "zuno.tools.state.task_context", "zuno.tools.state.memory")) == []


# Every name the two packages bound before they re-exported lazily, and where it is defined.
_STATE_NAMES = {
    "zuno.tools.state.api": ["plan_instruction", "read_goal", "read_plan", "read_state", "read_todo"],
    "zuno.tools.state.goal": ["GoalGetTool", "GoalUpdateTool"],
    "zuno.tools.state.goal_input": ["GoalRequestInputTool"],
    "zuno.tools.state.history": ["HistoryTool", "record_compaction"],
    "zuno.tools.state.memory": ["MemoryReadTool", "MemoryUpdateTool", "accept_proposal", "reject_proposal"],
    "zuno.tools.state.notes": ["NotesTool"],
    "zuno.tools.state.plan": ["PlanGetTool", "PlanUpdateTool"],
    "zuno.tools.state.progress": ["observe_goal"],
    "zuno.tools.state.projection": ["refresh_goal", "refresh_plan", "refresh_todo"],
    "zuno.tools.state.sources": ["lookup_message", "record_message", "source_digest"],
    "zuno.tools.state.task_context": ["TaskContextTool"],
    "zuno.tools.state.todo": ["TodoGetTool", "TodoUpdateTool", "TodoWriteTool"],
}
_SHELL_NAMES = {
    "zuno.tools.shell.env": ["EnvHook", "EnvHookInfo", "add_env_hook"],
    "zuno.tools.shell.receipts": ["get_receipt", "receipts_for_session", "render_receipt"],
    "zuno.tools.shell.tool": ["ShellArgs", "ShellTool"],
}


def test_the_packages_reexport_every_name_lazily() -> None:
    """Importing either package loads none of its tools; every name it bound before is still
    there (the defining module's object), ``from … import submodule`` still imports the
    submodule, an unknown name is an AttributeError, and MIGRATIONS are the modules'."""
    code = f"""
import importlib, sys
import zuno.tools.shell, zuno.tools.state
loaded = [m for m in sys.modules if m.startswith(("zuno.tools.shell.", "zuno.tools.state.")) or m == "asyncio"]
assert loaded == [], loaded
for names in ({_STATE_NAMES!r}, {_SHELL_NAMES!r}):
    for where, listed in names.items():
        package = sys.modules[where.rsplit(".", 1)[0]]
        for name in listed:
            assert getattr(package, name) is getattr(importlib.import_module(where), name), name
            assert name in dir(package), name
from zuno.tools.state import goal_input, read_state
from zuno.tools.shell import tool as shell_tool
from zuno.tools.shell import receipt
assert goal_input.__name__ == "zuno.tools.state.goal_input" and shell_tool.__name__ == "zuno.tools.shell.tool"
for package in (zuno.tools.shell, zuno.tools.state):
    for name in package.__all__:
        getattr(package, name)
    try:
        package.no_such_name
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("no AttributeError")
from zuno.tools.state import docstore, goal_input, memory, notes, sources
from zuno.tools.shell import receipts
parts = [*docstore.MIGRATIONS, *sources.MIGRATIONS, *notes.MIGRATIONS, *memory.MIGRATIONS, *goal_input.MIGRATIONS]
assert zuno.tools.state.MIGRATIONS == parts
assert zuno.tools.shell.MIGRATIONS == receipts.MIGRATIONS
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=zuno_env(), timeout=120)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr


# The state family's registered slots: off the zuno profile's default surface.
STATE_SLOTS = tuple(f"zuno.tools.state.{m}" for m in ("task_context", "history", "notes", "memory"))


def test_a_state_slot_is_imported_only_when_offered(tmp_path: Path, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hi\n")
    status, _out, modules, err = probe(tmp_path, workspace, "call", "read", '{"path": "a.txt"}')
    assert status == 0, err
    assert "zuno.tools.state.goal" in modules and "zuno.tools.state.projection" in modules  # on the surface
    assert hits(modules, STATE_SLOTS) == []
    status, out, modules, err = probe(tmp_path, workspace, "tools")
    assert status in (0, None), err
    assert 'task_context   (unavailable: a registered slot, not on the default surface: "tools": ' in out
    assert hits(modules, STATE_SLOTS) == []
    (workspace / "zuno.json").write_text(json.dumps({"tools": {"task_context": True}}))
    status, out, modules, err = probe(tmp_path, workspace, "tools", "--json")
    assert status in (0, None), err
    offered = {t["name"]: t for t in json.loads(out)["tools"]}
    assert offered["task_context"]["classifiedBy"] == "action"
    assert hits(modules, STATE_SLOTS) == ["zuno.tools.state.task_context"]


def test_the_registry_builds_each_tool_its_name_says() -> None:
    """Every factory (a class, or the state family's deferred import) builds the tool of its
    name; the refreshers and the Goal's observer are registered with the family, as before."""
    from zuno.surface import DeferredTool, default_registry
    from zuno.tools.jobs_context import jobs_section
    from zuno.tools.state import progress, projection

    reg = default_registry()
    deferred = [n for (_p, n), f in reg.factories.items() if isinstance(f, DeferredTool)]
    assert "task_context" in deferred and "plan_get" in deferred
    for (profile, name), factory in reg.factories.items():
        assert factory().name == name, (profile, name)
    assert reg.refreshers == [
        ("jobs", jobs_section),
        ("goal", projection.refresh_goal),
        ("plan", projection.refresh_plan),
        ("todo", projection.refresh_todo),
    ]
    assert reg.goal_observers == [progress.observe_goal]


def test_the_unavailable_tools_are_listed_in_one_order(tmp_path: Path, workspace: Path) -> None:
    """The same config lists them in the same order whatever the hash seed (it followed a set's)."""
    (workspace / "zuno.json").write_text(json.dumps({"agent": {"tools": ["read", "plan_get"]}}))
    seen = []
    for seed in ("1", "2", "3"):
        proc = subprocess.run(
            [sys.executable, "-m", "zuno", "tools", "--json"],
            capture_output=True,
            text=True,
            cwd=workspace,
            env=zuno_env({"PYTHONHASHSEED": seed}),
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        seen.append(list(json.loads(proc.stdout)["unavailable"]))
    assert seen[0] == seen[1] == seen[2]
    # The gated slots switched off first (as before), then the rest in the profile's order.
    assert seen[0][:7] == ["history", "notes", "memory_read", "memory_update", "glob", "grep", "write"]
