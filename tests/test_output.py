"""Output limits: withheld, never truncated; every byte saved and read back through bg artifact
windows; accept_large_output inlines; retrieval never passes through the limits."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import zuno
from zuno import limits
from zuno.output import count_lines, scan_bytes, scan_file
from zuno.windows import _utf8_cut, read_window

EXT = str(Path(__file__).with_name("ext_tools.py"))


def rt(root: Path, **cfg: Any) -> zuno.Runtime:
    return zuno.Runtime(root=root, config_overrides={"extensions": [EXT], **cfg})


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _pages(out: Any) -> tuple[str, dict[str, Any]]:
    return out.text.split("\n", 1)[1] if "\n" in out.text else "", out.metadata


async def test_output_over_max_bytes_is_withheld_and_reassembles_byte_for_byte(workspace: Path) -> None:
    line = "héllo wörld ✓ 𝄞"  # multi-byte characters so windows must not split them
    unit = (line + "\n").encode()
    stream = unit * (limits.DEFAULT_MAX_BYTES // len(unit) + 2)
    size = limits.DEFAULT_MAX_BYTES + 1  # one byte over the default...
    while _utf8_cut(stream[:size]) != size:  # ...moved to the next character boundary
        size += 1
    async with rt(workspace) as r, r.session() as s:
        (res,) = (await s.step([call("emit", size=size, line=line)])).results
        assert res.outcome == "ok"
        w = res.metadata["withheldOutput"]
        assert w["bytes"] == size and w["limits"][0]["limit"] == "tool_output.max_bytes"
        assert res.metadata["outputPaths"] == [w["outputPath"]]
        assert w["read"] == {"name": "bg", "arguments": {"action": "artifact", "outputPath": w["outputPath"]}}
        for fact in (str(size), "tool_output.max_bytes = 51200", w["outputPath"], '"action": "artifact"'):
            assert fact in res.text
        assert len(res.text) < 1000  # the model got a notice, not the output
        saved = (workspace / w["outputPath"]).read_bytes()
        expected_bytes = stream[:size]
        assert saved == expected_bytes and hashlib.sha256(saved).hexdigest() == w["sha256"]

        # Read it back in windows, forward, with the returned cursor.
        got = b""
        cursor = None
        windows = 0
        while True:
            args: dict[str, Any] = {"action": "artifact", "outputPath": w["outputPath"], "limit": 7000}
            if cursor is not None:
                args["cursor"] = cursor
            (page,) = (await s.step([call("bg", **args)])).results
            assert page.outcome == "ok" and page.metadata["bytes"] <= 7000
            body, meta = _pages(page)
            assert meta["windowFrom"] == len(got) and meta["hasEarlier"] == (len(got) > 0)
            got += body.encode()
            windows += 1
            if not meta["hasMore"]:
                break
            cursor = meta["cursor"]
        assert got == expected_bytes and windows >= 8


async def test_output_over_max_lines_is_withheld(workspace: Path) -> None:
    async with rt(workspace) as r, r.session() as s:
        at_limit, over = (
            await s.step([call("emit", size=2000 * 2, line="y"), call("emit", size=2001 * 2, line="y")])
        ).results
        assert "withheldOutput" not in at_limit.metadata and at_limit.text.count("\n") == 2000
        assert over.metadata["withheldOutput"]["lines"] == 2001
        assert over.metadata["withheldOutput"]["limits"][0]["limit"] == "tool_output.max_lines"


async def test_configured_limits_apply_and_accept_large_output_inlines(workspace: Path) -> None:
    async with rt(workspace, tool_output={"max_bytes": 100, "max_lines": 5}) as r, r.session() as s:
        withheld, inline = (
            await s.step([call("emit", size=101), call("emit", size=101, accept_large_output=True)])
        ).results
        assert "withheldOutput" in withheld.metadata and "tool_output.max_bytes = 100" in withheld.text
        assert "withheldOutput" not in inline.metadata and len(inline.text) == 101


async def test_exact_bytes_are_saved_even_when_not_utf8(workspace: Path) -> None:
    raw = bytes(range(256)) * 300
    async with rt(workspace) as r, r.session() as s:
        (res,) = (await s.step([call("emit_bytes", data_hex=raw.hex())])).results
        path = workspace / res.metadata["withheldOutput"]["outputPath"]
        assert path.read_bytes() == raw


async def test_a_retrieval_window_never_passes_through_the_limits(workspace: Path) -> None:
    async with rt(workspace, tool_output={"max_bytes": 64, "max_lines": 2}) as r, r.session() as s:
        (res,) = (await s.step([call("emit", size=5000)])).results
        path = res.metadata["withheldOutput"]["outputPath"]
        (page,) = (await s.step([call("bg", action="artifact", outputPath=path, limit=999_999)])).results
        # Clamped to the fixed 51200 ceiling, not to tool_output.max_bytes, and not withheld again.
        assert "withheldOutput" not in page.metadata
        assert page.metadata["limit"] == limits.WINDOW_MAX_LIMIT and page.metadata["bytes"] == 5000
        (default,) = (await s.step([call("bg", action="artifact", outputPath=path)])).results
        assert default.metadata["limit"] == limits.WINDOW_DEFAULT_LIMIT and default.metadata["windowFrom"] == 0


async def test_bg_artifact_refuses_what_is_not_an_artifact(workspace: Path) -> None:
    (workspace / "secret.txt").write_text("x")
    async with rt(workspace) as r, r.session() as s:
        missing, not_artifact, outside = (
            await s.step(
                [
                    call("bg", action="artifact"),
                    call("bg", action="artifact", outputPath="secret.txt"),
                    call("bg", action="artifact", outputPath="/etc/passwd"),
                ]
            )
        ).results
        assert (missing.outcome, missing.block_kind) == ("blocked", "invalid_arguments")
        assert "outputPath" in missing.text
        assert (not_artifact.outcome, not_artifact.block_kind) == ("blocked", "invalid_arguments")
        assert (outside.outcome, outside.block_kind) == ("blocked", "denied")


async def test_chord_profile_names_read_as_the_way_back(workspace: Path) -> None:
    async with rt(workspace, profile="chord") as r, r.session() as s:
        (res,) = (await s.step([call("emit", size=60_000)])).results
        assert res.metadata["withheldOutput"]["read"]["name"] == "read"


def test_window_helpers(tmp_path: Path) -> None:
    assert count_lines(b"") == 0 and count_lines(b"a") == 1 and count_lines(b"a\n") == 1 and count_lines(b"a\nb") == 2
    assert _utf8_cut("ab✓".encode()[:-1]) == 2 and _utf8_cut("ab✓".encode()) == 5
    f = tmp_path / "f"
    f.write_bytes("0123456789✓".encode())
    w = read_window(f, None, 4, from_end=True)
    assert w.data == "9✓".encode() and w.window_from == 9 and w.has_earlier and not w.has_more
    w2 = read_window(f, 8, 3)
    assert w2.data == b"89" and w2.cursor == 10 and w2.has_more
    with pytest.raises(FileNotFoundError):
        read_window(tmp_path / "nope", 0, 1)
    assert json.dumps(w.facts())


@pytest.mark.parametrize(
    "data",
    [b"", b"x", b"a\n", b"a\nb", b"\n\n", bytes(range(256)) * 9000, (b"line\n" * 300_000) + b"tail"],
)
def test_scan_file_measures_and_hashes_in_one_pass(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "out.log"
    p.write_bytes(data)
    scan = scan_file(p)
    assert (scan.size, scan.lines, scan.sha256) == (len(data), count_lines(data), hashlib.sha256(data).hexdigest())
    assert scan_bytes(data) == scan  # an artifact saved from memory is not read back to be measured
