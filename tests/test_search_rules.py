"""Permission rules over what glob and grep find, tested as an attacker would try them.

A rule like ``{"tool": "read", "pattern": "secret/**", "action": "deny"}`` means the names and the
lines of the files below ``secret/`` never reach the model: not through a search of a directory above
it, a link to a directory above it, another spelling of the rule, a hidden file, or the chord grep.
The counts do not include them, and the result says that rules left paths out.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

import zuno

from conftest import RunZuno

SECRET_WORDS = ("TOKEN a", "TOKEN b", "TOKEN h", "key.txt", "k2", ".hidden")
LEFT_OUT = "[left out by permission rules, and not counted: paths denied by "


def _layout(root: Path) -> None:
    (root / "secret" / "deep").mkdir(parents=True)
    (root / "secret" / "key.txt").write_text("TOKEN a\n")
    (root / "secret" / "deep" / "k2").write_text("TOKEN b\n")
    (root / "secret" / ".hidden").write_text("TOKEN h\n")
    (root / "src" / "secret").mkdir(parents=True)
    (root / "src" / "secret" / "n.txt").write_text("TOKEN n\n")
    (root / "pub").mkdir()
    (root / "pub" / "ok.txt").write_text("TOKEN ok\n")
    os.symlink(".", root / "loop")  # a directory above secret/, reached through a link
    os.symlink("secret", root / "alias")  # secret/ itself, through a link
    os.symlink("../secret/key.txt", root / "pub" / "link.txt")  # a file of secret/, through a link


async def _step(
    root: Path, rules: list[dict[str, Any]], calls: list[dict[str, Any]], *, profile: str = "zuno", **kw: Any
) -> list[Any]:
    config: dict[str, Any] = {"permission": {"rules": rules}} if rules else {}
    config.update(kw.pop("config", {}))
    async with zuno.Runtime(root=root, profile=profile, config_overrides=config, **kw) as rt:
        async with rt.session() as s:
            res = await s.step(calls)
    return res.results


def _grep(pattern: str = "TOKEN", **args: Any) -> dict[str, Any]:
    return {"name": "grep", "arguments": {"pattern": pattern, **args}}


def _glob(pattern: str = "**", **args: Any) -> dict[str, Any]:
    return {"name": "glob", "arguments": {"pattern": pattern, **args}}


def _rows(r: Any) -> list[str]:
    """The result's lines less the status lines ("[...]")."""
    return [ln for ln in r.text.splitlines() if not ln.startswith("[")]


def _assert_nothing_secret(r: Any) -> None:
    assert r.outcome == "ok", r.text
    for word in SECRET_WORDS:
        assert word not in r.text, (word, r.text)
        assert word not in json.dumps(r.metadata), (word, r.metadata)


DENY_READ = [{"tool": "read", "pattern": "secret/**", "action": "deny"}]


async def test_a_read_deny_keeps_the_names_and_lines_below_it_out_of_every_search(workspace: Path) -> None:
    _layout(workspace)
    calls = [
        _grep(),
        _grep(path="."),
        _grep(path="loop"),
        _grep(path="./"),
        _grep(path=str(workspace)),
        _grep(include="*"),
        _grep(include="secret/*"),
        _grep("TOKEN|hunter", include="**/*"),
        _glob(),
        _glob("*"),
        _glob(path="loop"),
        _glob("secret/**"),
        _glob("**/.hidden"),
        _glob("/secret/*"),
    ]
    results = await _step(workspace, DENY_READ, calls)
    for r in results:
        _assert_nothing_secret(r)
    # What the rule does not cover is still found, and the counts are of it alone.
    assert _rows(results[0]) == ["pub/ok.txt:1:TOKEN ok", "src/secret/n.txt:1:TOKEN n"]
    assert results[0].metadata["matches"] == results[0].metadata["totalMatches"] == 2
    assert _rows(results[8]) == ["pub/ok.txt", "src/secret/n.txt"]
    assert results[8].metadata["count"] == results[8].metadata["total"] == 2
    assert _rows(results[11]) == ["No files found"]
    # Each says rules left paths out, naming the rule and no path.
    for r in results:
        assert LEFT_OUT + json.dumps(DENY_READ[0]) + "]" in r.text, r.text
        assert r.metadata["leftOutByRules"] == DENY_READ
        assert r.metadata["truncated"] is False


async def test_searching_the_denied_directory_itself_is_refused_however_it_is_spelt(workspace: Path) -> None:
    _layout(workspace)
    spellings = ["secret", "./secret", "secret/", "secret/.", "alias", "loop/secret", f"{workspace}/secret", "pub/.."]
    calls = [_grep(path=p) for p in spellings[:-1]] + [_glob(path=p) for p in spellings[:-1]]
    calls += [_grep(path="secret/deep"), _grep(path="pub/link.txt"), _glob(path="secret/deep")]
    results = await _step(workspace, DENY_READ, calls)
    assert [(r.outcome, r.block_kind) for r in results] == [("blocked", "denied")] * len(calls)
    for r in results:
        assert "TOKEN" not in r.text
        assert "secret/**" in r.text  # names the rule
    # "pub/.." is the root: searched, secret/ left out.
    (ok,) = await _step(workspace, DENY_READ, [_grep(path="pub/..")])
    _assert_nothing_secret(ok)


@pytest.mark.parametrize(
    "pattern",
    ["secret/**", "secret/*", "secret/***", "{root}/secret/**", "secret/[dk.]*", "secret/?*", "*secret/*"],
)
async def test_every_spelling_of_the_rule_leaves_the_directory_out(workspace: Path, pattern: str) -> None:
    _layout(workspace)
    rules = [{"tool": "read", "pattern": pattern.format(root=workspace), "action": "deny"}]
    results = await _step(workspace, rules, [_grep(), _glob(), _grep(paths=[".", "pub"], context_lines=2)])
    for r in results[:2]:
        _assert_nothing_secret(r)
        assert LEFT_OUT in r.text
    # "*secret/*" (fnmatch's * crosses '/') also covers src/secret/; the others do not.
    covered_too = pattern == "*secret/*"
    assert ("src/secret/n.txt" in results[1].text) is not covered_too
    assert results[1].metadata["total"] == (1 if covered_too else 2)


async def test_a_rule_at_any_depth_leaves_out_every_directory_of_that_name(workspace: Path) -> None:
    _layout(workspace)
    rules = [{"tool": "read", "pattern": "**/secret/**", "action": "deny"}]
    results = await _step(workspace, rules, [_grep(), _glob(), _glob(path="src"), _grep(path="src/secret")])
    for r in results[:3]:
        _assert_nothing_secret(r)
        assert "TOKEN n" not in r.text and "n.txt" not in r.text
        assert LEFT_OUT in r.text
    assert _rows(results[1]) == ["pub/ok.txt"]
    assert results[3].outcome == "blocked" and results[3].block_kind == "denied"


async def test_hidden_files_and_name_rules_are_left_out(workspace: Path) -> None:
    (workspace / ".secrets").mkdir()
    (workspace / ".secrets" / "k").write_text("TOKEN s\n")
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / ".env").write_text("TOKEN e1\n")
    (workspace / "a" / "b" / ".env").write_text("TOKEN e2\n")
    (workspace / "a" / "id.pem").write_text("TOKEN p\n")
    (workspace / "a" / "x.env").mkdir()  # a directory whose name ends like the rule: not a file it covers
    (workspace / "a" / "x.env" / "in.txt").write_text("TOKEN in\n")
    (workspace / "a" / "ok.txt").write_text("TOKEN ok\n")
    rules = [
        {"tool": "read", "pattern": ".secrets/**", "action": "deny"},
        {"tool": "read", "pattern": "**/.env", "action": "deny"},
        {"tool": "*", "pattern": "*.pem", "action": "deny"},
    ]
    calls = [_grep(), _glob(), _glob(".*"), _grep(includes=[".env"]), _grep(paths=["a"], context_lines=1)]
    results = await _step(workspace, rules, calls, profile="chord")
    assert _rows(results[0]) == ["a/ok.txt:1:TOKEN ok", "a/x.env/in.txt:1:TOKEN in"]
    assert _rows(results[1]) == ["a/ok.txt", "a/x.env/in.txt"]
    assert results[1].metadata["total"] == 2
    for r in results:
        assert r.outcome == "ok"
        for word in ("TOKEN s", "TOKEN e", "TOKEN p", ".secrets", ".env:", "id.pem"):
            assert word not in "\n".join(_rows(r)), (word, r.text)
    assert _rows(results[2]) == ["No files found"]
    assert LEFT_OUT in results[3].text


async def test_a_rule_rg_cannot_be_given_is_applied_before_the_counts_and_the_cap(workspace: Path) -> None:
    """A character class is not turned into an rg glob: the paths are filtered by path before the
    collector counts them, so the cap is filled with what may be shown."""
    (workspace / "aaa").mkdir()
    for i in range(30):
        (workspace / "aaa" / f"{i:02d}").write_text("TOKEN x\n" * 3)
    for name in ("b", "c", "d"):
        (workspace / name).write_text("TOKEN y\n")
    rules = [{"tool": "read", "pattern": "aaa/[0-9]*", "action": "deny"}]
    config = {"search": {"glob_max_results": 2, "grep_max_hits": 2}}
    results = await _step(workspace, rules, [_glob(), _grep()], config=config)
    g, r = results
    assert _rows(g) == ["b", "c"]
    assert g.metadata["count"] == 2 and g.metadata["total"] == 3
    assert "showing the first 2 of 3 paths" in g.text
    assert _rows(r) == ["b:1:TOKEN y", "c:1:TOKEN y"]
    assert r.metadata["totalMatches"] == 3
    for res in results:
        assert "aaa" not in res.text.replace('"aaa/[0-9]*"', "")
        assert LEFT_OUT in res.text


async def test_an_ask_rule_leaves_paths_out_until_a_search_of_them_is_approved(workspace: Path) -> None:
    _layout(workspace)
    rules = [{"tool": "read", "pattern": "secret/**", "action": "ask"}, {"tool": "grep", "action": "ask"}]
    # Nobody to ask: a search above secret/ is asked about (the grep rule) and refused; glob runs and
    # leaves secret/ out, saying a rule asks about those paths and how to be asked.
    results = await _step(workspace, rules, [_grep(), _glob(), _glob(path="secret")])
    assert (results[0].outcome, results[0].block_kind) == ("blocked", "denied")
    _assert_nothing_secret(results[1])
    assert "paths asked about by " + json.dumps(rules[0]) in results[1].text
    assert "give such a path as the search path" in results[1].text
    assert (results[2].outcome, results[2].block_kind) == ("blocked", "denied")
    assert "secret/**" in results[2].text
    # Approved: a search of secret/ shows it; a search above it approved for the grep rule does not.
    approved = await _step(
        workspace, rules, [_grep(path="secret"), _glob(path="secret"), _grep(), _glob()], approver=zuno.AutoApprover()
    )
    assert [r.outcome for r in approved] == ["ok"] * 4
    assert "secret/key.txt:1:TOKEN a" in approved[0].text and "secret/.hidden" in approved[1].text
    assert "leftOutByRules" not in approved[0].metadata
    _assert_nothing_secret(approved[2])
    _assert_nothing_secret(approved[3])


async def test_the_chord_grep_applies_the_rules_to_each_of_its_paths(workspace: Path) -> None:
    _layout(workspace)
    rules = [{"tool": "grep", "pattern": "secret/**", "action": "deny"}]
    results = await _step(
        workspace,
        rules,
        [_grep(paths=[".", "pub", "src"], context_lines=3), _grep(paths=["pub", "secret"]), _glob()],
        profile="chord",
    )
    _assert_nothing_secret(results[0])
    assert results[0].metadata["matches"] == 2
    assert (results[1].outcome, results[1].block_kind) == ("blocked", "denied")
    # A grep rule is grep's: glob still lists secret/ (the rule names grep only).
    assert "secret/key.txt" in results[2].text and "leftOutByRules" not in results[2].metadata


def _logging_rg(tmp_path: Path) -> tuple[Path, Path]:
    """An rg wrapper that records its arguments (one JSON list a line) and runs the real rg."""
    import asyncio

    from zuno.tools.search.rg_discovery import RgLocator

    real = asyncio.run(RgLocator().get(None))
    log = tmp_path / "rg-args.jsonl"
    wrapper = tmp_path / "rg"
    wrapper.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"if sys.argv[1:] != ['--version']:\n"
        f"    open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"os.execv({str(real.path)!r}, [{str(real.path)!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, log


def test_rg_is_told_not_to_enter_a_denied_directory(workspace: Path, tmp_path: Path) -> None:
    """The subtree rules become rg exclusion globs (rg never reads below them); a name rule is
    applied by path; without rules the command line is what it always was."""
    import asyncio

    _layout(workspace)
    wrapper, log = _logging_rg(tmp_path)
    rules = [
        {"tool": "read", "pattern": "secret/**", "action": "deny"},
        {"tool": "read", "pattern": "**/deep/**", "action": "deny"},
        {"tool": "read", "pattern": "*.env", "action": "deny"},
    ]
    config = {"search": {"rg_path": str(wrapper)}}
    asyncio.run(_step(workspace, rules, [_grep(), _glob()], config=config))
    with_rules = [json.loads(ln) for ln in log.read_text().splitlines()]
    log.unlink()
    asyncio.run(_step(workspace, [], [_grep(), _glob()], config=config))
    without = [json.loads(ln) for ln in log.read_text().splitlines()]
    def order(runs: list[list[str]]) -> list[list[str]]:  # the step's two searches overlap: glob's first
        return sorted(runs, key=lambda argv: "--files" not in argv)

    assert len(with_rules) == len(without) == 2
    for argv, plain in zip(order(with_rules), order(without), strict=True):
        i = argv.index("!/secret/")
        assert argv[i - 1 : i + 3] == ["--glob", "!/secret/", "--glob", "!deep/"], argv
        assert argv[: i - 1] + argv[i + 3 :] == plain  # nothing else added, nothing moved
        assert not any("env" in a for a in argv)
    assert not any(a.startswith("!/secret") or a == "!deep/" for argv in without for a in argv)


async def test_searches_without_path_rules_are_unchanged(workspace: Path) -> None:
    """No rules, or rules no search is subject to (another tool's, an allow): the same bytes."""
    _layout(workspace)
    (workspace / ".env").write_text("TOKEN e\n")
    calls = [
        _grep(),
        _grep(include="*.txt"),
        _glob(),
        _glob("*.txt", path="secret"),
        _grep(path="secret/key.txt"),
    ]
    base = await _step(workspace, [], calls)
    others = [
        {"tool": "write", "pattern": "secret/**", "action": "deny"},
        {"tool": "read", "pattern": "**", "action": "allow"},
        {"tool": "shell", "action": "ask"},
    ]
    same = await _step(workspace, others, calls)
    assert [(r.outcome, r.text, r.metadata) for r in base] == [(r.outcome, r.text, r.metadata) for r in same]
    assert "TOKEN a" in base[0].text and all(r.outcome == "ok" for r in base)


def test_the_cli_leaves_a_denied_directory_out_of_a_search(workspace: Path, run_zuno: RunZuno) -> None:
    _layout(workspace)
    (workspace / "zuno.json").write_text(json.dumps({"permission": {"rules": DENY_READ}}))
    p = run_zuno("call", "grep", json.dumps({"pattern": "TOKEN"}), "--json")
    rec = json.loads(p.stdout)
    assert rec["outcome"] == "ok"
    assert "TOKEN a" not in p.stdout and "key.txt" not in p.stdout
    assert rec["metadata"]["leftOutByRules"] == DENY_READ


async def test_rules_over_a_granted_directory_apply_to_its_absolute_paths(tmp_path: Path) -> None:
    """Outside the root, paths are shown absolute and rg's globs are not anchored there: the rules
    are applied to the paths rg prints instead."""
    ws, granted = tmp_path / "ws", tmp_path / "granted"
    ws.mkdir()
    (granted / "secret").mkdir(parents=True)
    (granted / "secret" / "key.txt").write_text("TOKEN a\n")
    (granted / "ok.txt").write_text("TOKEN ok\n")
    (granted / "x.env").write_text("TOKEN e\n")
    rules = [
        {"tool": "read", "pattern": f"{granted}/secret/**", "action": "deny"},
        {"tool": "read", "pattern": "*.env", "action": "deny"},
    ]
    config = {"workspace": {"granted_dirs": [str(granted)]}}
    results = await _step(
        ws, rules, [_grep(paths=[str(granted), "."]), _glob(path=str(granted))], profile="chord", config=config
    )
    assert _rows(results[0]) == [f"{granted}/ok.txt:1:TOKEN ok"]
    assert _rows(results[1]) == [f"{granted}/ok.txt"]
    assert results[1].metadata["total"] == 1
    for r in results:
        _assert_nothing_secret(r)
        assert "TOKEN e" not in r.text and "x.env" not in "\n".join(_rows(r))
        assert r.metadata["leftOutByRules"] == rules


@pytest.mark.parametrize("grep", [True, False])
def test_the_filter_by_path_holds_wherever_rgs_output_is_split(tmp_path: Path, grep: bool) -> None:
    """rg's output reaches the filter in pieces cut anywhere: a record split across them, a path
    holding a newline, a named binary file's notice; what passes is exactly the records of the
    paths no rule covers, whatever the cuts."""
    import random
    import re
    from fnmatch import translate

    from zuno.config import PermissionRule
    from zuno.tools.search.rules import RuleFilter, RuleScope, _literal, _Rule
    from zuno.workspace import Workspace

    ws = Workspace(tmp_path)
    rule = PermissionRule(tool="read", pattern="s[e]cret/*", action="deny")
    scope = RuleScope(ws, lambda rel: rel)
    scope.filtered.append(_Rule(rule, re.compile(translate("s[e]cret/*")), (), _literal("s[e]cret/*", str(ws.root))))
    paths = [b"a.txt", b"secret/k", b"new\nline", b"secret/new\nline", b"z\xff", b"secret/\xff", b"zz"]
    if grep:
        records = [p + b"\0" + f"{n}:{'x' * n}\n".encode() for p in paths for n in (1, 2)]
        records.insert(3, b'named.bin: binary file matches (found "\\0" byte around offset 9)\n')
    else:
        records = [p + b"\0" for p in paths]
    data = b"".join(records)
    expected = b"".join(r for r in records if not (r.startswith(b"secret/")))
    rnd = random.Random(7)
    for _ in range(200):
        got: list[bytes] = []
        flt = RuleFilter(scope, got.append, grep=grep)
        cuts = sorted(rnd.sample(range(1, len(data)), rnd.randint(0, 12)))
        for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
            flt.feed(data[a:b])
        flt.finish()
        assert b"".join(got) == expected, cuts


def test_the_last_check_matches_a_shown_path_where_it_resolves(workspace: Path) -> None:
    """rg follows no link, but a directory it has entered can be swapped for a link into secret/
    while it walks (inside the workspace, where rg may read): the shown paths are matched where they
    lead as well, so such a path is not shown."""
    import re
    from fnmatch import translate

    from zuno.config import PermissionRule
    from zuno.tools.search.rules import RuleScope, _Rule
    from zuno.workspace import Workspace

    _layout(workspace)
    os.symlink("secret", workspace / "swapped")  # as a walked directory would be after the swap
    ws = Workspace(workspace)
    rule = PermissionRule(tool="read", pattern="secret/**", action="deny")
    scope = RuleScope(ws, lambda rel: rel)
    scope.pruned.append(_Rule(rule, re.compile(translate("secret/**"))))
    shown = ["pub/ok.txt", "swapped/key.txt", "swapped/deep/k2", "loop/pub/ok.txt", "loop/secret/key.txt"]
    assert scope.keep_paths(shown) == ["pub/ok.txt", "loop/pub/ok.txt"]
    assert scope.note().startswith(LEFT_OUT)


@pytest.mark.parametrize("profile", ["zuno", "chord"])
async def test_a_patternless_read_deny_takes_the_searches_off_the_tools_offered(workspace: Path, profile: str) -> None:
    _layout(workspace)
    everywhere = [{"tool": "read", "action": "deny"}]
    config: dict[str, Any] = {"permission": {"rules": everywhere}}
    async with zuno.Runtime(root=workspace, profile=profile, config_overrides=config) as rt:
        async with rt.session() as s:
            offered = {t.name for t in s.visible_tools()}
            assert not offered & {"read", "grep", "glob"}, offered
            assert "write" in offered
            res = await s.step([_grep(), _glob()])  # called anyway: refused, naming the rule
    for r in res.results:
        assert r.outcome == "blocked", r.text
        assert 'denied by permission rule {"tool": "read", "action": "deny"}' in r.text, r.text
    patterned: dict[str, Any] = {"permission": {"rules": DENY_READ}}
    async with zuno.Runtime(root=workspace, profile=profile, config_overrides=patterned) as rt:
        async with rt.session() as s:  # a read deny with a pattern keeps the searches offered
            assert {"grep", "glob"} <= {t.name for t in s.visible_tools()}
