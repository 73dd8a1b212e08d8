"""The reading of a command's syntax tree, beyond the policy table: constructs found where tree-sitter
hangs them (after a here-document's start, inside substitutions, in eval'd scripts), the wrappers
and indirections a git commit / git add hides behind, and commands too large or deep to walk by
recursion. Each row was a miss once."""

from __future__ import annotations

import time

import pytest

from zuno.tools.shell.analysis import analyze


def constructs(command: str, policy: str = "pipefail") -> list[str]:
    return [lim.construct for lim in analyze(command, policy=policy, interpreter="bash").limitations]


def gits(command: str) -> list[tuple[str, tuple[str, ...] | None, str | None]]:
    return [(g.sub, g.args, g.directory) for g in analyze(command, policy="pipefail", interpreter="bash").git]


@pytest.mark.parametrize(
    ("command", "policy", "construct"),
    [
        ("cat <<EOF && cargo test || true\nbody\nEOF", "pipefail", "or-fallback"),
        ("cat <<EOF | bash -c x\nbody\nEOF", "pipefail", "nested-shell"),
        ("cargo test || exit 256", "pipefail", "or-fallback"),  # exit 256 exits 0
        ("eval 'cargo test || true'", "pipefail", "or-fallback"),  # eval runs in this very shell
        ("eval 'set +e'; false; true", "all", "set+e"),
        ('[[ -z "$(false)" ]]', "pipefail", "substitution"),
        ('case "$(false)" in *) ;; esac', "pipefail", "substitution"),
        ("(( $(false) + 1 ))", "pipefail", "substitution"),
        ("for x in $(false); do :; done", "all", "substitution"),
        ("cat < <(false)", "pipefail", "substitution"),
        ("echo hi > >(false)", "pipefail", "substitution"),
        ('cargo test > "$(false)/x"', "pipefail", "substitution"),
        ("cat <<EOF\n$(false)\nEOF", "pipefail", "substitution"),  # an unquoted body's $(…) runs
        ("x=$(cargo test) y=$(true)", "pipefail", "substitution"),  # only the last status survives
        ("x=$(cargo test || true)", "pipefail", "or-fallback"),  # an assignment keeps the inner status
        ("{ false && true; }; echo done", "all", "and-chain"),
        ("case x in x) false && true;; esac; echo done", "all", "and-chain"),
        ("for i in 1; do false && true; done; echo done", "all", "and-chain"),
        ("time ! false", "pipefail", "negation"),
        ("coproc cargo test", "pipefail", "background"),
        ("trap -- 'exit 0' EXIT; false", "pipefail", "trap"),
        ("builtin trap 'exit 0' EXIT", "pipefail", "trap"),
        ("bash <<'EOF'\nfalse | true\nEOF", "pipefail", "nested-shell"),  # a script on standard input
        ("echo 'false|true' | bash", "pipefail", "nested-shell"),
        ("bash <<< 'false|true'", "pipefail", "nested-shell"),
        ("command -p bash -c 'false|true'", "pipefail", "nested-shell"),
        ("sudo -E bash -c 'x'", "pipefail", "nested-shell"),
        ("SH='bash -e'; $SH -c 'x'", "pipefail", "nested-shell"),
        ("set +o pipe_fail", "pipefail", "set+e"),  # zsh spells options freely
        ("set +o PIPEFAIL", "pipefail", "set+e"),
        ("set -o nopipefail", "pipefail", "set+e"),
    ],
)
def test_construct_is_found(command: str, policy: str, construct: str) -> None:
    assert construct in constructs(command, policy)


@pytest.mark.parametrize(
    ("command", "policy", "construct"),
    [
        ("cargo test || exit", "pipefail", "or-fallback"),  # exits with the failing status
        ("cargo test || exit $?", "pipefail", "or-fallback"),
        ("trap 'exit ${?}' EXIT", "pipefail", "trap"),
        ("cat <<'EOF'\n$(false)\nEOF", "pipefail", "substitution"),  # a quoted body is text
        ("x=$(cargo test)", "pipefail", "substitution"),
        ("false && true", "all", "and-chain"),  # the last statement decides
        ("set -o pipefail", "pipefail", "set+e"),
        ("bash build.sh", "pipefail", "nested-shell"),  # a script file, not -c or stdin
        ("bash --version", "pipefail", "nested-shell"),
    ],
)
def test_construct_is_not_claimed(command: str, policy: str, construct: str) -> None:
    assert construct not in constructs(command, policy)


@pytest.mark.parametrize(
    "command",
    [
        "cat > note.txt <<'EOF' && git add -f .zuno\nhello\nEOF",
        "command -p git add .",
        "time -p git add x",
        "xargs -r git add",
        "xargs -a files git add",
        "xargs -d '\\n' git add",
        "sudo -E git add x",
        "sudo -s git add .",
        "flock /tmp/lock git add x",
        "taskset 0x3 git add .",
        "runuser -u u -- git add .",
        "env -S 'git add .'",
        "x=$(git add -f .zuno 2>&1)",
        'echo "$(git add .)"',
        "echo `git add .`",
        "cat <(git add .)",
        "echo > >(git add .)",
        "f() { local out=$(git add x); }",
        "[[ -n $(git add x) ]]",
        "cat <<EOF\n$(git add .)\nEOF",
        "bash <<'EOF'\ngit add -f .zuno\nEOF",
        "bash <<< 'git add .'",
        "git stage -f .zuno",
        "GIT='git -C .'; $GIT add -f .zuno",
        "G='git add'; $G .",
        'f() { git "$@"; }; f add -f .zuno',
        "SUB=add; git $SUB .",
        "coproc git add -f .zuno",
        "find . -name .zuno -exec git add -f {} +",
        "find . -exec git add {} \\;",
        "su -c 'git add .'",
        "parallel git add ::: a b",
        "watch 'git add .'",
    ],
)
def test_git_add_is_found(command: str) -> None:
    assert "add" in [sub for sub, _, _ in gits(command)]


def test_arguments_from_elsewhere_are_unknown() -> None:
    assert gits("xargs git add") == [("add", None, "")]  # the paths come from stdin
    assert gits("find . -exec git add {} +")[0][1] is None


@pytest.mark.parametrize(
    "command", ["echo git add", "pnpm add x", "git status", "echo 'git add .'", "cat <<'EOF'\ngit add .\nEOF"]
)
def test_no_git_write_is_invented(command: str) -> None:
    assert gits(command) == []


@pytest.mark.parametrize(
    "command",
    ["[ -d nodir ] && cd nodir; git add x", "false && cd sub; git add .", "cd sub || true; git add ."],
)
def test_a_cd_that_may_not_have_happened_leaves_the_directory_unknown(command: str) -> None:
    assert gits(command)[0][2] is None


def test_directories_that_are_known() -> None:
    assert gits("cd sub && git add .")[0][2] == "sub"
    assert gits("env -C sub git add .")[0][2] == "sub"
    assert gits("case x in x) cd sub;; esac; git add .")[0][2] is None


@pytest.mark.parametrize(
    "command",
    ["true && " * 500 + "true", "a || " * 2000 + "b", "{ " * 500 + "true; " + "} ; " * 500],
)
def test_long_and_deep_commands_are_read_without_exhausting_the_stack(command: str) -> None:
    t = time.perf_counter()
    got = analyze(command, policy="pipefail", interpreter="bash")
    assert time.perf_counter() - t < 5  # a generous ceiling: it takes milliseconds
    if command.startswith("a ||"):
        assert "or-fallback" in [lim.construct for lim in got.limitations]


def test_too_deep_to_walk_is_unparsed_and_inspected_conservatively() -> None:
    command = "{ " * 3000 + "git add x; " + "} ; " * 3000
    got = analyze(command, policy="pipefail", interpreter="bash")
    assert not got.parsed and "nested too deeply" in got.limitations[0].text
    assert [(g.sub, g.args, g.directory) for g in got.git] == [("add", None, None), ("commit", None, None)]
