"""writtenPaths, observed before and after: reported only for a statically named path whose size or
mtime changed; every exclusion the spec lists is left out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import zuno


async def run_shell(root: Path, command: str, config: dict[str, Any] | None = None) -> zuno.CallRecord:
    async with zuno.Runtime(root=root, config_overrides=config or {}) as rt, rt.session() as s:
        res = await s.step([{"name": "shell", "arguments": {"command": command}}])
        return res.results[0]


async def written(root: Path, command: str, config: dict[str, Any] | None = None) -> list[str]:
    rec = await run_shell(root, command, config)
    assert rec.outcome in ("ok", "error"), rec.text
    return rec.metadata["writtenPaths"]


async def test_edited_and_created_files_are_reported(workspace: Path) -> None:
    (workspace / "lib.rs").write_text("foo\n")
    assert await written(workspace, "sed -i 's/foo/barbaz/' lib.rs") == ["lib.rs"]
    assert await written(workspace, "touch new.txt") == ["new.txt"]
    rec = await run_shell(workspace, "cp lib.rs 'with space.rs'")
    assert rec.metadata["writtenPaths"] == ["with space.rs"]
    assert "[writtenPaths: with space.rs]" in rec.text


async def test_static_cd_is_followed(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    assert await written(workspace, "cd sub && touch inner.txt") == ["sub/inner.txt"]
    assert await written(workspace, "mkdir -p d2 && cd d2; touch x.txt") == ["d2/x.txt"]


async def test_a_path_the_shell_expands_is_not_reported(workspace: Path) -> None:
    (workspace / "a.rs").write_text("")
    assert await written(workspace, "OUT=v.txt; touch $OUT") == []  # a variable
    assert (workspace / "v.txt").exists()
    assert await written(workspace, "touch *.rs") == []  # a glob
    assert await written(workspace, "touch $(echo s.txt)") == []  # a substitution
    assert (workspace / "s.txt").exists()
    assert await written(workspace, "touch ~/zuno-written-test-never") == []  # a tilde
    assert await written(workspace, "touch {b1,b2}.txt") == []  # a brace expansion


async def test_here_documents_and_redirections_are_not_reported(workspace: Path) -> None:
    assert await written(workspace, "cat > h.txt <<'EOF'\nhello\nEOF") == []
    assert (workspace / "h.txt").read_text() == "hello\n"
    assert await written(workspace, "echo x > r.txt; echo y >> r.txt") == []
    assert (workspace / "r.txt").exists()


async def test_outside_the_workspace_is_not_reported(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    assert await written(workspace, f"touch {outside}") == []
    assert outside.exists()
    assert await written(workspace, "touch ../outside2.txt") == []
    assert (workspace.parent / "outside2.txt").exists()


async def test_granted_directory_is_reported(workspace: Path, tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    cfg = {"workspace": {"granted_dirs": [str(granted)]}}
    assert await written(workspace, f"touch {granted}/g.txt", cfg) == [str(granted / "g.txt")]


async def test_deletions_are_not_reported(workspace: Path) -> None:
    (workspace / "d.txt").write_text("bye")
    assert await written(workspace, "rm d.txt") == []


async def test_rewrite_keeping_size_and_mtime_is_not_reported(workspace: Path) -> None:
    f = workspace / "same.txt"
    f.write_text("ab")
    os.utime(f, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    ref = workspace / "ref"
    ref.write_text("")
    os.utime(ref, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    assert await written(workspace, "printf cd > same.txt && touch -r ref same.txt") == []
    assert f.read_text() == "cd"  # it did change; the observation cannot tell


async def test_backgrounded_commands_are_not_reported(workspace: Path) -> None:
    assert await written(workspace, "touch bg.txt & wait") == []
    assert (workspace / "bg.txt").exists()


async def test_directories_and_zuno_state_are_not_reported(workspace: Path) -> None:
    assert await written(workspace, "mkdir newdir") == []
    assert await written(workspace, "touch .zuno/mine") == []


async def test_a_cancelled_or_failed_call_still_reports_what_it_changed(workspace: Path) -> None:
    rec = await run_shell(workspace, "touch made.txt; exit 4")
    assert rec.metadata["exitCode"] == 4
    assert rec.metadata["writtenPaths"] == ["made.txt"]


async def test_candidates_are_bounded(workspace: Path) -> None:
    from zuno import limits

    names = " ".join(f"f{i}" for i in range(limits.SHELL_WRITTEN_MAX_CANDIDATES + 40))
    got = await written(workspace, f"touch {names}")
    assert len(got) == limits.SHELL_WRITTEN_MAX_CANDIDATES  # a lower bound, never a guess
    assert (workspace / f"f{limits.SHELL_WRITTEN_MAX_CANDIDATES + 39}").exists()
