"""The pre-flight of git commit / git add: one budget for every read, a hung read refuses the call
(and its group is stopped first), and Zuno's own .zuno/ state is never delivered."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits
from zuno.tools.shell.preflight import _commit_scope, reserve_s

HANGING_GIT = """#!/bin/sh
# A git whose reads never answer: it records itself and a child, then waits forever.
echo $$ >> "$FAKE_GIT_PIDS"
sleep 300 &
echo $! >> "$FAKE_GIT_PIDS"
case "$*" in
  *rev-parse*) if [ -n "$FAKE_GIT_TOP" ]; then echo "$FAKE_GIT_TOP"; exit 0; fi ;;
esac
wait
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :].split()[0] != b"Z"


def _fake_git(tmp: Path) -> Path:
    bindir = tmp / "fakebin"
    bindir.mkdir()
    git = bindir / "git"
    git.write_text(HANGING_GIT)
    git.chmod(0o755)
    return bindir


async def run_shell(
    root: Path, arguments: dict[str, Any], config: dict[str, Any] | None = None, *, cancel_after: float | None = None
) -> zuno.CallRecord:
    async with zuno.Runtime(root=root, config_overrides=config or {}) as rt, rt.session() as s:
        step = asyncio.create_task(s.step([{"name": "shell", "arguments": arguments}]))
        if cancel_after is not None:
            await asyncio.sleep(cancel_after)
            s.cancel()
        res = await step
        return res.results[0]


def _env_config(tmp: Path, bindir: Path, **extra: str) -> dict[str, Any]:
    return {
        "shell": {
            "preflight_budget_ms": 1500,
            "env": {
                "PATH": f"{bindir}:{os.environ['PATH']}",
                "FAKE_GIT_PIDS": str(tmp / "pids"),
                **extra,
            },
        }
    }


async def test_hung_read_refuses_within_the_budget(workspace: Path, tmp_path: Path) -> None:
    bindir = _fake_git(tmp_path)
    # A hang guard only: the git never answers, so waiting for it would never end.
    rec = await asyncio.wait_for(
        run_shell(workspace, {"command": "touch ran && git commit -m wip"}, _env_config(tmp_path, bindir)), 60
    )
    assert rec.outcome == "blocked" and rec.block_kind == "unavailable"
    assert (
        "`git rev-parse --show-toplevel` did not answer within the 1.5s this command's pre-flight repository reads "
        "share, so the repository state it depends on is unknown; it was not run"
    ) in rec.text
    assert not (workspace / "ran").exists()  # the command was not run
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 2
    assert not any(_alive(p) for p in pids), "the abandoned git and its child must be stopped before the refusal"


async def test_reads_share_one_budget(workspace: Path, tmp_path: Path) -> None:
    # rev-parse answers at once; git status hangs: the message names the read that hung.
    bindir = _fake_git(tmp_path)
    (workspace / ".zuno").mkdir(exist_ok=True)
    cfg = _env_config(tmp_path, bindir, FAKE_GIT_TOP=str(workspace))
    rec = await run_shell(workspace, {"command": "git add -A"}, cfg)
    assert rec.outcome == "blocked"
    assert rec.text.startswith(
        "[blocked: unavailable] `git status --porcelain` did not answer within the 1.5s this command's pre-flight"
    )
    reads = rec.metadata["preflight"]["reads"]
    assert [r["read"] for r in reads] == ["git rev-parse --show-toplevel", "git status --porcelain"]
    assert reads[0]["answered"] is True and reads[1]["answered"] is False
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    assert not any(_alive(p) for p in pids)


async def test_cancel_during_preflight_refuses_the_same_way(workspace: Path, tmp_path: Path) -> None:
    bindir = _fake_git(tmp_path)
    cfg = _env_config(tmp_path, bindir)
    cfg["shell"]["preflight_budget_ms"] = 60_000
    # A hang guard only: the preflight's budget is 60 s, so only the cancel ends it sooner.
    rec = await asyncio.wait_for(run_shell(workspace, {"command": "git commit -m x"}, cfg, cancel_after=1.0), 30)
    assert rec.outcome == "blocked" and rec.block_kind == "unavailable"
    assert "cancelled" in rec.text and "it was not run" in rec.text
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    assert pids and not any(_alive(p) for p in pids)


def test_reserve_keeps_the_phase_inside_the_budget() -> None:
    assert reserve_s(limits.PREFLIGHT_BUDGET_S) == limits.PREFLIGHT_RESERVE_S
    assert reserve_s(1.0) == pytest.approx(0.1)
    assert limits.PREFLIGHT_MAX_READS == 4


def test_commit_scope() -> None:
    assert _commit_scope(("-m", "a .zuno message")) == (False, [])
    assert _commit_scope(("-am", "x")) == (True, [])
    assert _commit_scope(("-mfix", "--", ".zuno")) == (False, [".zuno"])
    assert _commit_scope(("src/a.py",)) == (False, ["src/a.py"])
    assert _commit_scope(None) == (True, [])


# -- real git: the refusal to deliver generated state --------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    ).stdout


@pytest.fixture
def repo(workspace: Path) -> Path:
    _git(workspace, "init", "-q")
    (workspace / "a.txt").write_text("a\n")
    return workspace


async def test_ordinary_add_and_commit_run(repo: Path) -> None:
    rec = await run_shell(repo, {"command": "git add -A && git commit -qm first"}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "ok", rec.text
    assert rec.metadata["preflight"]["reads"][0]["read"] == "git rev-parse --show-toplevel"
    assert len(rec.metadata["preflight"]["reads"]) <= 4
    files = _git(repo, "ls-files").split()
    assert files == ["a.txt"]  # .zuno/ stayed out (its own .gitignore)


async def test_forced_add_of_zuno_state_is_refused(repo: Path) -> None:
    rec = await run_shell(repo, {"command": "git add -f .zuno"}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "blocked" and rec.block_kind == "denied"
    assert "Zuno's own generated state" in rec.text and "about to be staged" in rec.text
    assert _git(repo, "diff", "--cached", "--name-only") == ""


async def test_commit_with_zuno_state_staged_is_refused(repo: Path) -> None:
    async with zuno.Runtime(root=repo) as rt:
        assert rt.store  # opening the store creates .zuno/
    _git(repo, "add", "-f", ".zuno/.gitignore")
    rec = await run_shell(repo, {"command": "git commit -qm oops"}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "blocked" and rec.block_kind == "denied"
    assert ".zuno/.gitignore (staged)" in rec.text
    assert "git restore --staged" in rec.text
    assert rt is not None
    with pytest.raises(subprocess.CalledProcessError):
        _git(repo, "rev-parse", "HEAD")  # nothing was committed


async def test_commit_all_with_tracked_zuno_state_modified_is_refused(repo: Path) -> None:
    async with zuno.Runtime(root=repo) as rt:
        assert rt.store  # opening the store creates .zuno/
    _git(repo, "add", "-f", ".zuno/.gitignore")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-qm", "base")
    (repo / ".zuno" / ".gitignore").write_text("*\n# changed\n")
    rec = await run_shell(repo, {"command": "git commit -qam more"}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "blocked" and "committed by this command" in rec.text
    # without -a the modification is not delivered: the commit runs (and finds nothing staged)
    rec = await run_shell(repo, {"command": "git commit -qm more"}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "error" and rec.metadata["exitCode"] == 1


async def test_more_reads_than_the_four_refuse(repo: Path) -> None:
    (repo / "sub").mkdir()
    (repo / "sub" / "b.txt").write_text("b\n")
    cmd = "git add a.txt && cd sub && git add b.txt"  # 2 rev-parse + status + 2 dry-runs = 5 reads
    rec = await run_shell(repo, {"command": cmd}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "blocked" and rec.block_kind == "unavailable"
    assert f"more than the {limits.PREFLIGHT_MAX_READS} repository reads" in rec.text
    assert len(rec.metadata["preflight"]["reads"]) == limits.PREFLIGHT_MAX_READS
    assert _git(repo, "diff", "--cached", "--name-only") == ""  # nothing ran


# -- a git commit / git add the reading has to look for --------------------------------------------


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("GIT=git; $GIT commit -m x", [("commit", ("-m", "x"))]),
        ('GIT=/usr/bin/git; "$GIT" add .', [("add", (".",))]),
        ("$VCS add -A", [("add", ("-A",))]),  # unnameable, run as add: it may be git
        ("bash -c 'git add -A && git commit -m x'", [("add", ("-A",)), ("commit", ("-m", "x"))]),
        ("sh -lc 'git add .'", [("add", (".",))]),
        ("bash -o pipefail -O extglob -c 'git add .'", [("add", (".",))]),
        ("SH=bash; $SH -c 'git commit -m x'", [("commit", ("-m", "x"))]),
        ("eval 'git commit -qm msg'", [("commit", ("-qm", "msg"))]),
        ("bash -c 'bash -c \"git add x\"'", [("add", ("x",))]),
        ("pnpm add lodash", []),
        ("echo 'git add .'", []),
        ("bash script.sh commit", []),
        ('eval "$CMD"', []),
        ("GIT=$(which git); $GIT add -A", [("add", ("-A",))]),
    ],
)
def test_the_reading_finds_git_behind_variables_and_nested_scripts(
    command: str, found: list[tuple[str, tuple[str, ...]]]
) -> None:
    from zuno.tools.shell.analysis import analyze

    got = analyze(command, policy="pipefail", interpreter="bash").git
    assert [(g.sub, g.args) for g in got] == found


def test_a_nested_script_after_cd_runs_in_that_directory() -> None:
    from zuno.tools.shell.analysis import analyze

    (call,) = analyze("cd sub && sh -c 'cd deeper && git add .'", policy="pipefail", interpreter="bash").git
    assert call.directory == "sub/deeper"
    (call,) = analyze("cd $D && bash -c 'git add .'", policy="pipefail", interpreter="bash").git
    assert call.directory is None  # unknown: the pre-flight reads in the workdir and git decides


@pytest.mark.parametrize(
    "command",
    [
        "GIT=git; $GIT add -f .zuno",
        "bash -c 'git add -f .zuno'",
        "eval 'git add -f .zuno'",
        "cd nonexistent; git add -f .zuno",  # the cd fails; git runs where it was
        "cat > note.txt <<'EOF' && git add -f .zuno\nhello\nEOF",
        "x=$(git add -f .zuno 2>&1)",
        "git stage -f .zuno",
        "command -p git add -f .zuno",
    ],
)
async def test_git_through_a_variable_or_nested_script_is_inspected_too(repo: Path, command: str) -> None:
    rec = await run_shell(repo, {"command": command}, {"shell": {"env": GIT_ENV}})
    assert rec.outcome == "blocked" and rec.block_kind == "denied", rec.text
    assert "about to be staged" in rec.text
    assert _git(repo, "diff", "--cached", "--name-only") == ""


def test_a_program_named_through_a_variable_is_read_as_that_program() -> None:
    from zuno.tools.shell.analysis import analyze

    got = analyze("SH=bash; $SH -c 'make'", policy="pipefail", interpreter="bash")
    assert "nested-shell" in [lim.construct for lim in got.limitations]
    got = analyze("SH=$(pick); $SH -c 'make'", policy="pipefail", interpreter="bash")
    assert "nested-shell" not in [lim.construct for lim in got.limitations]  # unknown: nothing claimed of it
