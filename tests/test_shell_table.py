"""The table: commands x exitPolicy x interpreter, with the exit code each really returns and the
authority its receipt claims. Every row runs for real, behind the guard."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno.tools.shell.analysis import analyze

# (command, exitPolicy, interpreter, expected exit code, expected authority, construct named or None)
TABLE: list[tuple[str, str, str, int, str, str | None]] = [
    # the spec's own examples
    ("true", "pipefail", "bash", 0, "authoritative", None),
    ("false | true", "pipefail", "bash", 1, "authoritative", None),
    ("false | true", "all", "bash", 1, "authoritative", None),
    ("false | true", "last", "bash", 0, "derived", "exitPolicy"),
    ("(exit 3) | tail -n 1", "pipefail", "bash", 3, "authoritative", None),
    ("(exit 3) | tail -n 1", "last", "bash", 0, "derived", "exitPolicy"),
    ("false || true", "pipefail", "bash", 0, "derived", "or-fallback"),
    ("false || true", "all", "bash", 0, "derived", "or-fallback"),
    ("echo 'run tests || true'", "pipefail", "bash", 0, "authoritative", None),
    ('echo "false | true; set +e; bash -c x"', "pipefail", "bash", 0, "authoritative", None),
    ("false || exit 4", "pipefail", "bash", 4, "authoritative", None),
    ("false || { echo failed; exit 2; }", "pipefail", "bash", 2, "authoritative", None),
    ("set +e; false; true", "all", "bash", 0, "derived", "set+e"),
    ("set +o pipefail; false | true", "pipefail", "bash", 0, "derived", "set+e"),
    ("bash -c 'false | true'", "pipefail", "bash", 0, "derived", "nested-shell"),
    ("nice -n 5 bash -c 'false | true'", "pipefail", "bash", 0, "derived", "nested-shell"),
    ("shopt -u -o pipefail; false | true", "pipefail", "bash", 0, "derived", "set+e"),
    ("sh -c 'exit 0'", "pipefail", "bash", 0, "derived", "nested-shell"),
    ("env A=1 bash -ec 'true'", "pipefail", "bash", 0, "derived", "nested-shell"),
    ("if false; then echo yes; fi", "pipefail", "bash", 0, "derived", "condition"),
    ("if [ -f /nonexistent ]; then echo yes; fi", "all", "bash", 0, "derived", "condition"),
    ("while false; do :; done", "pipefail", "bash", 0, "derived", "condition"),
    ("for i in 1 2; do test $i = 2; done", "pipefail", "bash", 0, "derived", "loop"),
    ("for i in 1 2; do test $i = 2; done", "all", "bash", 1, "authoritative", None),
    ("false && true; true", "all", "bash", 0, "derived", "and-chain"),
    ("true && false", "all", "bash", 1, "authoritative", None),
    ("false; true", "all", "bash", 1, "authoritative", None),
    ("! false", "pipefail", "bash", 0, "derived", "negation"),
    ("trap 'exit 0' EXIT; false", "pipefail", "bash", 0, "derived", "trap"),
    ("trap 'echo bye' EXIT; false", "pipefail", "bash", 1, "authoritative", None),
    ("trap 'exit $?' EXIT; false", "pipefail", "bash", 1, "authoritative", None),
    ("sleep 0 & wait", "pipefail", "bash", 0, "derived", "background"),
    ("exit 125", "pipefail", "bash", 125, "authoritative", None),  # the command's own 125: ordinary
    ("no-such-command-zz", "pipefail", "bash", 127, "authoritative", None),  # bash's own 127: ordinary
    ("echo $(false || true)", "pipefail", "bash", 0, "derived", "substitution"),
    ('echo "tests: $(false)"', "pipefail", "bash", 0, "derived", "substitution"),
    ('echo "tests: $(false)"', "all", "bash", 0, "derived", "substitution"),
    ("cat <(false)", "pipefail", "bash", 0, "derived", "substitution"),
    ("f() { local out=$(false); }; f", "pipefail", "bash", 0, "derived", "substitution"),
    ("out=$(false)", "pipefail", "bash", 1, "authoritative", None),  # a bare assignment keeps the status
    ("echo '$(false)'", "pipefail", "bash", 0, "authoritative", None),  # quoted text never counts
    # dash and sh: no pipefail, always derived, naming the interpreter
    ("true", "pipefail", "dash", 0, "derived", "interpreter"),
    ("false | true", "pipefail", "dash", 0, "derived", "interpreter"),
    ("false; true", "all", "dash", 1, "derived", "interpreter"),
    ("false | true", "pipefail", "sh", 0, "derived", "interpreter"),
    # zsh and ksh: authoritative under pipefail and all
    ("false | true", "pipefail", "zsh", 1, "authoritative", None),
    ("false | true", "last", "zsh", 0, "derived", "exitPolicy"),
    ("false || true", "pipefail", "zsh", 0, "derived", "or-fallback"),
    ("false; true", "all", "zsh", 1, "authoritative", None),
    ("unsetopt pipefail; false | true", "pipefail", "zsh", 0, "derived", "set+e"),
    ("setopt no_err_exit; false; true", "all", "zsh", 0, "derived", "set+e"),
    ("false | true", "pipefail", "ksh", 1, "authoritative", None),
    ("false | true", "last", "ksh", 0, "derived", "exitPolicy"),
    ("if false; then :; fi", "pipefail", "ksh", 0, "derived", "condition"),
    ("false; true", "all", "ksh", 1, "authoritative", None),
]


async def run_shell(root: Path, arguments: dict[str, Any], config: dict[str, Any] | None = None) -> zuno.CallRecord:
    async with zuno.Runtime(root=root, config_overrides=config or {}) as rt, rt.session() as s:
        res = await s.step([{"name": "shell", "arguments": arguments}])
        return res.results[0]


def test_the_interpreters_the_table_needs_are_installed() -> None:
    # zsh and ksh are installed by scripts/test (apt); a missing one is a failure, not a skip.
    for name in ("bash", "dash", "sh", "zsh", "ksh"):
        assert shutil.which(name), f"{name} is not installed: run scripts/test (it installs zsh and ksh)"


@pytest.mark.parametrize(("command", "policy", "interp", "code", "authority", "construct"), TABLE)
async def test_table(
    workspace: Path, command: str, policy: str, interp: str, code: int, authority: str, construct: str | None
) -> None:
    rec = await run_shell(workspace, {"command": command, "exitPolicy": policy, "interpreter": interp})
    r = rec.metadata["receipt"]
    assert rec.metadata["exitCode"] == code, rec.text
    assert r["exitCode"] == code
    assert r["authority"] == authority, r["limitations"]
    assert r["decision"] == ("passed" if code == 0 else "failed")
    constructs = [lim["construct"] for lim in r["limitations"]]
    if construct is None:
        assert constructs == []
    else:
        assert construct in constructs
        lim = next(lim for lim in r["limitations"] if lim["construct"] == construct)
        assert lim["remedy"] and lim["text"]
        if construct == "interpreter":
            assert interp in lim["text"]  # the receipt names the interpreter
    assert rec.outcome == ("ok" if code == 0 else "error")
    assert f"[verification {r['id']}]" in rec.text
    assert rec.declarations.as_dict() == {"effect": "SideEffecting", "replay": "Never", "concurrency": "Exclusive"}


def test_quoted_text_never_counts() -> None:
    for cmd in (
        "echo 'cargo test || true'",
        'echo "set +e"',
        "printf '%s' 'bash -c x'",
        "echo 'if false; then :; fi; for x in 1; do :; done'",
        "cat <<'EOF'\nfalse || true\nset +e\nEOF",
        "# cargo test || true\ntrue",
    ):
        a = analyze(cmd, policy="pipefail", interpreter="bash")
        assert a.limitations == [], (cmd, a.limitations)


def test_limitations_name_the_place() -> None:
    a = analyze("echo start\ncargo test || true", policy="pipefail", interpreter="bash")
    (lim,) = a.limitations
    assert lim.construct == "or-fallback"
    assert lim.at == "2:1"
    assert lim.snippet == "cargo test || true"


def test_unparseable_command_is_derived() -> None:
    a = analyze("if true; then", policy="pipefail", interpreter="bash")
    assert not a.parsed
    assert "unparsed" in [lim.construct for lim in a.limitations]


def test_pwsh_native_pipe_is_read_lexically() -> None:
    a = analyze("git log | findstr fix", policy="all", interpreter="pwsh")
    assert [lim.construct for lim in a.limitations] == ["pwsh-native-pipe"]
    # a native command piped into a cmdlet keeps its status visible
    a = analyze("git log | Select-Object -First 5", policy="all", interpreter="pwsh")
    assert a.limitations == []
    a = analyze("Write-Output 'a | b'; cargo test || exit 1", policy="all", interpreter="pwsh")
    assert [lim.construct for lim in a.limitations] == ["or-fallback"]


def test_pwsh_policy_only_all_is_authoritative() -> None:
    from zuno.tools.shell.policy import Authority, plan

    assert plan("pwsh", "/x/pwsh", "all", "x").authority is Authority.authoritative
    assert plan("pwsh", "/x/pwsh", "pipefail", "x").authority is Authority.derived
    assert plan("pwsh", "/x/pwsh", "last", "x").authority is Authority.derived


@pytest.mark.skipif(shutil.which("pwsh") is None, reason="PowerShell cannot be installed here (no package for it)")
async def test_pwsh_runs_when_installed(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "exit 3", "exitPolicy": "all", "interpreter": "pwsh"})
    assert rec.metadata["exitCode"] == 3
    assert rec.metadata["receipt"]["authority"] == "authoritative"


async def test_missing_interpreter_is_refused_naming_what_is_installed(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "true", "interpreter": "bash"}, {"shell": {"env": {"PATH": "/none"}}})
    assert rec.outcome == "blocked"
    assert rec.block_kind == "unavailable"
    assert "bash is not installed" in rec.text


async def test_multi_statement_pipefail_says_what_decided(workspace: Path) -> None:
    rec = await run_shell(workspace, {"command": "false; echo done"})
    r = rec.metadata["receipt"]
    assert r["exitCode"] == 0 and r["authority"] == "authoritative"
    assert r["decidedBy"].startswith("the last statement `echo done`")
    assert "decided by last statement `echo done`" in rec.text


def test_deliberate_waiting_is_recognised() -> None:
    def promotable(cmd: str) -> bool:
        return analyze(cmd, policy="pipefail", interpreter="bash").promotable

    assert not promotable("sleep 5; git status")
    assert not promotable("while true; do git -C sub log -1; sleep 2; done")
    assert not promotable("if true; then")  # unparseable
    assert promotable("sleep 10 && make")
    assert promotable("sleep 1; git -C x push")  # long git operations promote like any long command
    assert promotable("cargo test")
