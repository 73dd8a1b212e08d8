"""CLI start-up (sixteenth round): the commands that only look at the store build no tool surface.

`zuno sessions`, `events`, `receipt` and `memory` open the store through
``zuno.workspace_store.WorkspaceStore`` (the config checked as the surface checks it, no tool
family imported); `zuno --version` loads no asyncio, ssl, sqlite3 or pydantic. Guarded by the
modules a real CLI process has loaded when it ends (its ``sys.modules``), never by a time.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import zuno
from test_cli_startup import hits, probe

# The tool surface: the runtime, admission and dispatch, and the tool families' modules.
TOOL_SURFACE = (
    "zuno.runtime",
    "zuno.admitting",
    "zuno.admission",
    "zuno.dispatch",
    "zuno.call_runner",
    "zuno.tools.web.tools",
    "zuno.tools.patch.applier",
    "zuno.tools.search",
)
# What only the store's listing does not need either (a session's tools, the event loop, TLS).
NOT_FOR_A_LISTING = (*TOOL_SURFACE, "zuno.tools.shell.tool", "zuno.tool", "asyncio", "ssl")


@pytest.fixture(scope="module")
def with_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose store has session s1 (one read), made in this process."""
    root = tmp_path_factory.mktemp("cli16") / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hi\n")

    async def make() -> None:
        async with zuno.Runtime(root=root) as rt, rt.session("s1") as s:
            await s.step([{"name": "read", "arguments": {"path": "a.txt"}}])

    asyncio.run(make())
    return root


@pytest.mark.parametrize(
    ("args", "shows"),
    [
        (("sessions",), "s1"),
        (("events", "--session", "s1"), "session-opened"),
    ],
)
def test_listing_the_store_builds_no_tool_surface(
    tmp_path: Path, with_session: Path, args: tuple[str, ...], shows: str
) -> None:
    status, out, modules, _err = probe(tmp_path, with_session, *args)
    assert status == 0 and shows in out  # the command really read the session
    assert "zuno.workspace_store" in modules
    assert hits(modules, NOT_FOR_A_LISTING) == []


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("memory",), 0),
        (("receipt", "rcp_none"), 2),
        (("sessions", "prune", "--keep", "5", "--dry-run"), 0),
        (("show", "s1"), 0),  # opens the store for writing: the families' migrations, not the families
        (("goal", "resume", "--session", "s1"), 1),  # (no Goal to resume)
    ],
)
def test_store_commands_build_no_tool_surface(
    tmp_path: Path, with_session: Path, args: tuple[str, ...], status: int
) -> None:
    got, _out, modules, _err = probe(tmp_path, with_session, *args)
    assert got == status
    assert hits(modules, TOOL_SURFACE) == []


def test_the_family_migrations_are_the_registrys() -> None:
    """What a store command migrates without the tool families is what the registry collects."""
    from zuno.family_migrations import family_migrations
    from zuno.surface import default_registry

    assert family_migrations() == default_registry().migrations


def test_a_bad_config_is_refused_by_a_listing_as_by_the_surface(tmp_path: Path, with_session: Path) -> None:
    """No surface built, yet the config is checked as the surface checks it: exit 2, the same line."""
    ws = tmp_path / "bad"
    ws.mkdir()
    (ws / "zuno.json").write_text(json.dumps({"tools": {"shel": True}}))
    status, _out, modules, err = probe(tmp_path, ws, "sessions")
    assert status == 2
    assert err.startswith("zuno: config key tools.shel: not a tool of profile 'zuno'. Known: ")
    assert hits(modules, TOOL_SURFACE) == []


def test_version_loads_no_event_loop_tls_sqlite_or_pydantic(tmp_path: Path, workspace: Path) -> None:
    status, out, modules, _err = probe(tmp_path, workspace, "--version")
    assert status in (0, None) and out.startswith("zuno ")
    assert hits(modules, ("asyncio", "ssl", "sqlite3", "pydantic", "zuno.cli_session")) == []
