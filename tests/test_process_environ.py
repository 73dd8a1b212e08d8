"""No process between Zuno and a shell command holds Zuno's private ``ZUNO_*`` namespace.

Tested the way an attacker reads it: the command walks its ancestors through ``/proc/<pid>/stat``
(the ppid field) up to the Zuno process and reads every ``/proc/<pid>/environ`` (the environment a
process was exec'd with, which deleting names from ``os.environ`` later does not change). The same
walk runs in a background job, in a pre-flight git read and in a pre-dispatch hook. Zuno runs as a
fresh CLI process here, so its guard fork-server is started with the variables already set."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from conftest import RunZuno

SECRETS = {
    "ZUNO_SECRET_TOKEN": "s3cr3t-upper",
    "zuno_lower_secret": "s3cr3t-lower",
    "Zuno_Mixed_Case": "s3cr3t-mixed",
    "ZUNO_PID": "s3cr3t-pid-value",
}

WALK = r"""
import json, os, sys

def environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return [e.split(b"=", 1)[0].decode("utf-8", "replace") for e in f.read().split(b"\0") if e]

def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]

def ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rfind(b")") + 2 :].split()[1])

chain, pid, zuno = [], os.getpid(), None
while pid > 1:
    argv = cmdline(pid)
    if argv[1:3] == ["-m", "zuno"]:  # the Zuno process itself: the walk stops here (exclusive)
        zuno = {"pid": pid, "private": [n for n in environ(pid) if n.upper().startswith("ZUNO_")]}
        break
    names = environ(pid)
    chain.append({"pid": pid, "argv": argv[:5], "names": len(names),
                  "private": [n for n in names if n.upper().startswith("ZUNO_")]})
    pid = ppid(pid)
with open(sys.argv[1], "w") as f:
    json.dump({"chain": chain, "zuno": zuno}, f)
"""


def _check(dump: Path, *, min_ancestors: int) -> dict[str, object]:
    data = json.loads(dump.read_text())
    zuno = data["zuno"]
    assert zuno is not None, f"{dump.name}: the walk never reached the Zuno process: {data['chain']}"
    # the attack had something to find: Zuno itself holds every secret
    assert {n.upper() for n in SECRETS} <= {n.upper() for n in zuno["private"]}
    chain = data["chain"]
    assert len(chain) >= min_ancestors, chain
    for proc in chain:
        assert proc["names"] > 0, proc  # the environ was really read
        assert proc["private"] == [], f"{dump.name}: {proc['argv']} (pid {proc['pid']}) holds {proc['private']}"
    return data


def test_no_ancestor_of_a_command_holds_the_private_namespace(run_zuno: RunZuno, workspace: Path) -> None:
    (workspace / "walk.py").write_text(WALK)
    bindir = workspace / "bin"
    bindir.mkdir()
    real_git = next(
        (p for d in os.environ["PATH"].split(os.pathsep) if (p := Path(d) / "git").is_file() and d != str(bindir)),
        None,
    )
    git = bindir / "git"
    # A git on PATH that walks its ancestors first: the pre-flight's repository reads run it too.
    git.write_text(
        f'#!/bin/sh\n"{sys.executable}" "{workspace}/walk.py" "{workspace}/git-$$.json"\n'
        + (f'exec "{real_git}" "$@"\n' if real_git else "exit 0\n")
    )
    git.chmod(git.stat().st_mode | stat.S_IXUSR)
    config = {
        "hooks": {
            "pre_dispatch": [{"command": [sys.executable, str(workspace / "walk.py"), "hook.json"], "tools": ["shell"]}]
        }
    }
    (workspace / "zuno.json").write_text(json.dumps(config))
    py = sys.executable
    wait_bg = "for i in $(seq 200); do [ -s bg.json ] && break; sleep 0.05; done"
    calls = [
        {"name": "shell", "arguments": {"command": f'"{py}" walk.py bg.json', "run_in_background": True}},
        {"name": "shell", "arguments": {"command": f'"{py}" walk.py fg.json; {wait_bg}'}},
        {"name": "shell", "arguments": {"command": f'"{py}" walk.py sub.json & wait; true'}},
        {"name": "shell", "arguments": {"command": "git add -A"}},
    ]
    env = {**SECRETS, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    proc = run_zuno("batch", "-", input=json.dumps(calls), env=env)
    assert proc.returncode in (0, 1), proc.stderr
    for value in SECRETS.values():
        assert value not in proc.stdout

    # foreground: the command, its guard and the guard fork-server at least
    fg = _check(workspace / "fg.json", min_ancestors=3)
    assert any("guard.py" in " ".join(p["argv"]) for p in fg["chain"])  # type: ignore[union-attr]
    _check(workspace / "bg.json", min_ancestors=3)
    _check(workspace / "sub.json", min_ancestors=4)  # one more: the shell that put it in the background
    gits = sorted(workspace.glob("git-*.json"))
    assert len(gits) >= 2, gits  # at least one pre-flight read and the command itself
    for dump in gits:
        _check(dump, min_ancestors=3)
    hook = _check(workspace / "hook.json", min_ancestors=1)
    assert hook["chain"][0]["argv"][1].endswith("walk.py")  # type: ignore[index]


def _private(pid: int) -> list[str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        names = [e.split(b"=", 1)[0].decode() for e in f.read().split(b"\0") if e]
    return [n for n in names if n.upper().startswith("ZUNO_")]


async def test_a_directly_started_guard_holds_only_the_commands_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the fork-server the guard is exec'd with the command's (withheld) environment."""
    import zuno.process as zp
    from zuno.process import CommandSpec, start
    from zuno.process.environment import withheld_environment

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(zp, "USE_GUARD_SERVER", False)
    r = await start(CommandSpec(["sleep", "30"], tmp_path, withheld_environment(), tmp_path / "logs", label="t"))
    try:
        assert r._proc is not None and r.guard_pid
        assert _private(r.guard_pid) == [] and _private(r.pid) == []
    finally:
        await r.stop("kill")


def test_rg_and_hooks_get_the_withheld_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from zuno.process.environment import withheld_environment
    from zuno.tools.search.rg_discovery import rg_env

    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ZUNO", "kept")
    monkeypatch.setenv("AGENT", "kept")
    for env in (rg_env(), withheld_environment()):
        assert not [n for n in env if n.upper().startswith("ZUNO_")]
        assert env["ZUNO"] == env["AGENT"] == "kept"
