"""The apply_patch grammar: what parses, what is tolerated, and what is refused naming the line."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zuno.tools.patch.grammar import PatchSyntaxError, parse


def test_all_operations_parse_in_order() -> None:
    ops = parse(
        "*** Begin Patch\n"
        "*** Add File: path/add.py\n+abc\n+def\n"
        "*** Delete File: path/delete.py\n"
        "*** Update File: path/update.py\n*** Move to: path/update2.py\n"
        "@@ def f():\n-    pass\n+    return 123\n"
        "*** End Patch"
    )
    assert [(o.kind, o.path) for o in ops] == [
        ("add", "path/add.py"),
        ("delete", "path/delete.py"),
        ("update", "path/update.py"),
    ]
    assert ops[0].add_lines == ["abc", "def"]
    assert ops[2].move_to == "path/update2.py"
    (chunk,) = ops[2].chunks
    assert chunk.title == "def f():"
    assert chunk.old == ["    pass"] and chunk.new == ["    return 123"]


def test_several_chunks_are_numbered_across_the_patch() -> None:
    ops = parse(
        "*** Begin Patch\n*** Update File: a\n@@\n-1\n+one\n@@ x\n-2\n+two\n"
        "*** Update File: b\n@@\n-3\n+three\n*** End Patch\n"
    )
    assert [c.number for o in ops for c in o.chunks] == [1, 2, 3]
    assert [c.line for o in ops for c in o.chunks] == [3, 6, 10]


def test_first_chunk_without_header_and_padded_markers_and_crlf() -> None:
    text = "  *** Begin Patch \r\n  *** Update File: foo.txt\r\n import foo\r\n+bar\r\n *** End Patch \r\n"
    (op,) = parse(text)
    assert op.path == "foo.txt"
    assert op.chunks[0].old == ["import foo"] and op.chunks[0].new == ["import foo", "bar"]


def test_heredoc_wrapper_is_tolerated() -> None:
    for opener in ("<<'EOF'", '<<"EOF"', "<<EOF", "apply_patch <<'PATCH'"):
        close = "PATCH" if "PATCH" in opener else "EOF"
        (op,) = parse(f"{opener}\n*** Begin Patch\n*** Delete File: x\n*** End Patch\n{close}\n")
        assert op.kind == "delete"


def test_unified_diff_ranges_are_ignored_but_their_title_kept() -> None:
    (op,) = parse("*** Begin Patch\n*** Update File: a\n@@ -3,7 +3,8 @@ def g():\n-x\n+y\n*** End Patch")
    assert op.chunks[0].title == "def g():"


def test_end_of_file_marker_and_blank_separators() -> None:
    (op,) = parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n\n@@\n last\n+tail\n*** End of File\n*** End Patch")
    assert [c.end_of_file for c in op.chunks] == [False, True]
    assert op.chunks[0].ops == [("del", "x"), ("add", "y")]  # the blank separator is not context


def test_empty_line_inside_a_chunk_is_empty_context() -> None:
    (op,) = parse("*** Begin Patch\n*** Update File: a\n@@\n a\n\n-b\n+c\n*** End Patch")
    assert op.chunks[0].old == ["a", "", "b"]


def test_pure_move_and_empty_add() -> None:
    ops = parse("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** Add File: empty\n*** End Patch")
    assert ops[0].move_to == "b" and ops[0].chunks == []
    assert ops[1].add_lines == []


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("", 1, "Begin Patch"),
        ("bad", 1, "expected '*** Begin Patch'"),
        ("*** Begin Patch\nbad", 2, "expected '*** End Patch'"),
        ("*** Begin Patch\n*** End Patch", 2, "no file operation"),  # the empty patch
        ("*** Begin Patch\n*** Update File: test.py\n*** End Patch", 2, "has no chunk"),  # empty update hunk
        ("*** Begin Patch\n*** Frobnicate File: x\n*** End Patch", 2, "'*** Add File: <path>'"),
        ("*** Begin Patch\n*** Update File: a\n@@\n-x\nnot a diff line\n*** End Patch", 5, "starting with ' '"),
        ("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch", 3, "a chunk has no lines"),
        ("*** Begin Patch\n*** Update File: a\n@@\n same\n*** End Patch", 3, "changes nothing"),
        ("*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch", 4, "has no lines"),
        ("*** Begin Patch\n*** Add File: \n+x\n*** End Patch", 2, "needs a path"),
        ("*** Begin Patch\n*** Move to: b\n*** End Patch", 2, "must follow"),
        ("*** Begin Patch\n*** Update File: a\nx\n*** End Patch", 3, "expected '@@'"),
        ("*** Begin Patch\n*** Add File: a\n+x\nforgot the plus\n*** End Patch", 4, "got 'forgot the plus'"),
    ],
)
def test_grammar_errors_name_the_line_and_what_was_expected(text: str, line: int, expected: str) -> None:
    with pytest.raises(PatchSyntaxError) as e:
        parse(text)
    assert e.value.line == line, str(e.value)
    assert expected in str(e.value)


def test_error_lines_count_from_the_text_as_given() -> None:
    with pytest.raises(PatchSyntaxError) as e:
        parse("\n\n*** Begin Patch\n*** Update File: a\n@@\n-x\n?\n*** End Patch\n")
    assert e.value.line == 7


# -- property-based: arbitrary text never raises anything but PatchSyntaxError ----------------

_PIECES = st.sampled_from(
    [
        "*** Begin Patch",
        "*** End Patch",
        "*** Add File: a.txt",
        "*** Delete File: b.txt",
        "*** Update File: c.txt",
        "*** Move to: d/e.txt",
        "*** End of File",
        "@@",
        "@@ def f():",
        "@@ -1,2 +1,3 @@",
        " ctx",
        "-old",
        "+new",
        "",
        "   ",
        "<<'EOF'",
        "EOF",
        "\r",
        "***",
        "@",
    ]
)


def _check(text: str) -> None:
    try:
        ops = parse(text)
    except PatchSyntaxError as e:
        assert e.line >= 1
        return
    assert ops, "a parse that succeeds yields at least one operation"
    for op in ops:
        assert op.path
        if op.kind == "update":
            assert op.chunks or op.move_to
            for c in op.chunks:
                assert c.ops and any(k != "ctx" for k, _ in c.ops)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    _check(text)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=12)), max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_arbitrary_patch_shaped_text_never_raises(pieces: list[str], sep: str) -> None:
    _check(sep.join(pieces))


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=25))
def test_wrapped_patch_shaped_text_never_raises(pieces: list[str]) -> None:
    _check("\n".join(["*** Begin Patch", *pieces, "*** End Patch"]))
