"""The glob listing and grep's paths, decided over the joined paths, say exactly what the per-path
rules say."""

from __future__ import annotations

import random

import pytest

from zuno.tools.search.base import Plan
from zuno.tools.search.collect import quote_path, quote_paths
from zuno.tools.search.glob_collect import glob_lines

ODD = ["", " ", "\t", "\n", '"', "\x7f", "\x1c", "\u00a0", "\u2003", "\x85", "./", "a", "é", "\\", ":", "-1-"]


def _paths(rnd: random.Random) -> list[str]:
    out = []
    for _ in range(rnd.randint(0, 6)):
        out.append("".join(rnd.choice([*ODD, "dir/", "file.py", "x"]) for _ in range(rnd.randint(1, 4))))
    return out


@pytest.mark.parametrize("seed", range(300))
def test_glob_lines_equal_quote_path_per_path(seed: int) -> None:
    paths = _paths(random.Random(seed))
    assert glob_lines(paths) == "\n".join(quote_path(p, grep=False) for p in paths)


@pytest.mark.parametrize("seed", range(300))
def test_grep_paths_quoted_at_once_equal_quote_path_per_path(seed: int) -> None:
    rnd = random.Random(seed)
    paths = _paths(rnd) + rnd.choice([[], ["| x"], ["a/| b"], ["a-12-b"], ["a-b-1"], ["x\u2028y"], ["\u0661-\u0662-"]])
    rnd.shuffle(paths)
    assert quote_paths(paths) == [quote_path(p, grep=True) for p in paths]


def test_plain_paths_are_listed_as_they_are() -> None:
    paths = ["a.py", "dir/b.py", "c d.txt"]  # a space inside a name needs no quotes in a glob line
    assert glob_lines(paths) == "a.py\ndir/b.py\nc d.txt"


@pytest.mark.parametrize(
    "paths",
    [
        [" a", "b"],
        ["a", " b", "c"],
        ["a", "b ", "c"],
        ["a", "b "],
        ["a b", " c"],
        ["a", "b", " "],
        ["a", "", "b"],
    ],
)
def test_a_path_starting_or_ending_with_a_space_anywhere_in_the_list_is_quoted(paths: list[str]) -> None:
    assert glob_lines(paths) == "\n".join(quote_path(p, grep=False) for p in paths)


@pytest.mark.parametrize(("prefix", "strip_dot"), [("", True), ("sub/", True), ("sub/", False), ("", False)])
@pytest.mark.parametrize("seed", range(60))
def test_display_all_equals_display_of_each(prefix: str, strip_dot: bool, seed: int) -> None:
    rnd = random.Random(seed)
    rels = [rnd.choice(["./", "././", "", "a/./"]) + rnd.choice(["x", "./y", "z/w", " ", "\n"]) for _ in range(5)]
    plan = Plan(".", ["."], prefix, strip_dot, {"."}, ["."])
    assert plan.display_all(rels) == [plan.display(r) for r in rels]
