"""locate()'s plain-path shortcut says exactly what resolve() + target() say, or steps aside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zuno.errors import Refused
from zuno.workspace import Workspace

PATHS = [
    "a.txt",
    "./a.txt",
    "d/b.txt",
    "d//b.txt",
    "d/./b.txt",
    "d/",
    "d",
    "missing/deeper/x.txt",
    "d/missing.txt",
    "link/b.txt",  # a link to d: the general way resolves it
    "d/inner-link",
    "../outside.txt",
    "d/../a.txt",
    "~/x",
    "/abs/x",
    ".",
    "",
    "x" * 300,  # a name over NAME_MAX
]


def _general(ws: Workspace, raw: str) -> object:
    try:
        resolved = ws.resolve(raw)
        return resolved, ws.target(resolved)
    except Refused as e:
        return ("refused", e.kind, str(e))


def _located(ws: Workspace, raw: str) -> object:
    try:
        return ws.locate(raw)
    except Refused as e:
        return ("refused", e.kind, str(e))


def _tree(root: Path) -> None:
    (root / "d").mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "d" / "b.txt").write_text("b\n")
    os.symlink("d", root / "link")
    os.symlink("b.txt", root / "d" / "inner-link")


@pytest.mark.parametrize("raw", PATHS)
def test_the_shortcut_agrees_with_resolve_and_target(tmp_path: Path, raw: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _tree(root)
    ws = Workspace(root)
    assert _located(ws, raw) == _general(ws, raw)


def test_links_and_dotdot_take_the_general_way(tmp_path: Path) -> None:
    _tree(tmp_path)
    ws = Workspace(tmp_path)
    assert ws._locate_plain("link/b.txt", "path") is None
    assert ws._locate_plain("d/inner-link", "path") is None
    assert ws._locate_plain("d/../a.txt", "path") is None
    path, target = ws._locate_plain("d/b.txt", "path") or (None, None)
    assert path == tmp_path.resolve() / "d" / "b.txt" and target is not None and target.parts == ("d", "b.txt")


def test_a_granted_directory_inside_the_root_keeps_the_deeper_root(tmp_path: Path) -> None:
    _tree(tmp_path)
    ws = Workspace(tmp_path, granted=[tmp_path / "d"])
    assert ws._locate_plain("d/b.txt", "path") is None
    _, target = ws.locate("d/b.txt")
    assert target.root == (tmp_path / "d").resolve() and target.parts == ("b.txt",)


@pytest.mark.parametrize("inside", ["", "a.txt", "d/b.txt"])
def test_display_is_relative_to_the_root(tmp_path: Path, inside: str) -> None:
    ws = Workspace(tmp_path)
    p = ws.root / inside if inside else ws.root
    assert ws.display(p) == str(p.relative_to(ws.root))
    sibling = Path(str(ws.root) + "-sibling") / "x"
    assert ws.display(sibling) == str(sibling)
