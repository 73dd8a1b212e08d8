"""read and grep show the C0 control characters a file holds (ESC, backspace, form feed, BEL, a NUL
past the binary sniff, a lone CR) as their Unicode control pictures, and edit / apply_patch take
the pictures copied from read back as the exact control bytes (seventeenth round). Real files,
through Session.step."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import pytest

from stepclient import StepClient
from zuno import limits
from zuno.tools import control_pictures
from zuno.tools.file_scan import scan_window

from conftest import RunZuno, batch

Z = StepClient
ESC, BS, FF, BEL, NUL = "\u241b", "\u2408", "\u240c", "\u2407", "\u2400"
CR = "\u240d"

HOSTILE = b"title\n\x1b[31mred\x1b[0m and\x08\x08bs\nform\x0cfeed\x07\nend\n"


async def test_read_shows_controls_as_pictures_and_edit_takes_the_copied_text(chord: Z) -> None:
    """read sent ESC, backspace, form feed and BEL raw: a terminal showing the result obeyed the
    escape sequence and the backspaces. Now each is its control picture, a footer line names
    them, and an old_string copied from the rows edits the file with its exact control bytes."""
    f = chord.root / "ansi.txt"
    f.write_bytes(HOSTILE)
    shown = await chord.read("ansi.txt")
    assert not any(c in shown for c in "\x1b\x08\x0c\x07")
    assert f"2\t{ESC}[31mred{ESC}[0m and{BS}{BS}bs\n3\tform{FF}feed{BEL}\n4\tend" in shown
    assert (
        "(2 lines (first: 2) hold control characters, shown as Unicode control pictures: BEL (0x07) as "
        f"{BEL}, BS (0x08) as {BS}, FF (0x0C) as {FF}, ESC (0x1B) as {ESC}; edit and apply_patch take such a "
        "picture in old text for its control)"
    ) in shown
    await chord.ok("edit", path="ansi.txt", old_string=f"{ESC}[31mred{ESC}[0m", new_string=f"{ESC}[32mgreen")
    assert f.read_bytes() == HOSTILE.replace(b"\x1b[31mred\x1b[0m", b"\x1b[32mgreen")
    await chord.read("ansi.txt")
    await chord.ok("edit", path="ansi.txt", old_string=f"form{FF}feed{BEL}\nend", new_string=f"FORM{FF}{BEL}\nEND")
    assert f.read_bytes() == b"title\n\x1b[32mgreen and\x08\x08bs\nFORM\x0c\x07\nEND\n"
    await chord.read("ansi.txt")
    await chord.ok("edit", path="ansi.txt", old_string="and\x08\x08", new_string="AND\x08")  # raw still matches
    assert f.read_bytes() == b"title\n\x1b[32mgreen AND\x08bs\nFORM\x0c\x07\nEND\n"


async def test_apply_patch_takes_the_pictures_back_as_the_controls(patcher: Z) -> None:
    f = patcher.root / "p.txt"
    f.write_bytes(b"top\n\x1b[1mbold\x1b[0m\rover\nend\n")
    shown = await patcher.read("p.txt")
    assert f"2\t{ESC}[1mbold{ESC}[0m{CR}over" in shown
    patch = (
        f"*** Begin Patch\n*** Update File: p.txt\n@@ top\n-{ESC}[1mbold{ESC}[0m{CR}over\n"
        f"+{ESC}[4mline{ESC}[0m{CR}\x08X\n end\n*** End Patch"
    )
    await patcher.ok("apply_patch", patch=patch)
    assert f.read_bytes() == b"top\n\x1b[4mline\x1b[0m\r\x08X\nend\n"


async def test_a_nul_past_the_binary_sniff_is_shown_and_edited_and_one_inside_it_is_still_binary(chord: Z) -> None:
    head = b"x" * (limits.READ_BINARY_SNIFF_BYTES + 10) + b"\n"
    f = chord.root / "late.txt"
    f.write_bytes(head + b"a\x00b\n")
    shown = await chord.read("late.txt")
    assert "\x00" not in shown and f"2\ta{NUL}b" in shown and "NUL (0x00) as" in shown
    await chord.ok("edit", path="late.txt", old_string=f"a{NUL}b", new_string=f"A{NUL}{NUL}B")
    assert f.read_bytes() == head + b"A\x00\x00B\n"
    (chord.root / "bin.dat").write_bytes(b"a\x00b\n")  # binary detection is unchanged
    r = await chord.call("read", path="bin.dat")
    assert r["outcome"] != "ok" and "is a binary file" in r["text"]


async def test_a_file_holding_a_picture_itself_gets_that_control_raw_and_the_others_shown(chord: Z) -> None:
    """Where the file holds U+241B itself it cannot stand for an ESC: read sends the ESC raw and
    says why, and edit matches that picture as the character it is; the backspace, whose picture
    the file does not hold, is still shown and taken back."""
    f = chord.root / "both.txt"
    data = f"sign {ESC} here\nesc\x1b[0m bs\x08\n".encode()
    f.write_bytes(data)
    shown = await chord.read("both.txt")
    assert f"2\tesc\x1b[0m bs{BS}" in shown
    assert (
        f"(line 2 holds control characters, shown as Unicode control pictures: BS (0x08) as {BS}; edit and "
        "apply_patch take such a picture in old text for its control; sent as the raw character: ESC (0x1B), "
        f"as this file also holds {ESC} (U+241B) itself, so that picture cannot stand for it)"
    ) in shown
    await chord.ok("edit", path="both.txt", old_string=f"sign {ESC}", new_string=f"SIGN {ESC}")
    assert f.read_bytes() == data.replace(b"sign", b"SIGN")
    await chord.read("both.txt")
    await chord.ok("edit", path="both.txt", old_string=f"bs{BS}", new_string=f"BS{BS}")
    assert f.read_bytes() == data.replace(b"sign", b"SIGN").replace(b"bs\x08", b"BS\x08")


async def test_a_picture_far_past_the_window_is_found_only_for_a_shown_control(chord: Z) -> None:
    """After the window is read, the rest of the file is searched only for the pictures of the
    controls its rows hold: U+241B 3 MiB on, split across two of read's 1 MiB chunks, still makes
    the ESC go raw; the same file without it shows the ESC as its picture."""
    filler = b"x" * 1023 + b"\n"
    seam = 3 * 1024 * 1024 - 1
    head = b"e\x1bsc\n" + filler * ((seam - 5) // len(filler))
    head += b"y" * (seam - len(head))
    f = chord.root / "far.txt"
    f.write_bytes(head + ESC.encode() + b"\n")
    shown = (await chord.call("read", path="far.txt", limit=1))["text"]
    assert "1\te\x1bsc" in shown and "sent as the raw character: ESC (0x1B)" in shown, shown[:300]
    f.write_bytes(head + BS.encode() + b"\n")  # another picture there: not the ESC's
    await chord.read("far.txt")
    shown = (await chord.call("read", path="far.txt", limit=1))["text"]
    assert f"1\te{ESC}sc" in shown, shown[:300]


async def test_a_file_without_controls_reads_as_before(chord: Z) -> None:
    """Tabs, non-ASCII text, CRLF line breaks and the pictures themselves: rows exactly as the file
    holds them, no footer line added."""
    f = chord.root / "plain.txt"
    f.write_bytes(f"a\tb\r\ncafé {ESC} ok\r\n\tend".encode())
    r = await chord.call("read", path="plain.txt")
    assert r["outcome"] == "ok"
    assert r["text"] == f"1\ta\tb\n2\tcafé {ESC} ok\n3\t\tend"


def test_a_row_of_controls_is_cut_where_its_pictures_fill_the_hold(tmp_path: Path) -> None:
    """Each picture is three bytes: a row of controls is cut where its shown text reaches ``hold``
    bytes (the page would otherwise pass the output limits and be withheld whole)."""
    f = tmp_path / "esc.txt"
    f.write_bytes(b"\x1b" * 90 + b"\n" + b"ok\n")
    fd = os.open(f, os.O_RDONLY)
    try:
        scan = scan_window(fd, 1, 10, 10_000, threading.Event(), hold=100)
    finally:
        os.close(fd)
    row = scan.rows[0]
    assert row.cut and row.kept == 33 and row.text == "\x1b" * 33 and row.length == 90
    assert scan.rows[1].text == "ok" and not scan.rows[1].cut


# --- grep -----------------------------------------------------------------------------------------


def _grep(run_zuno: RunZuno, args: dict, *profile: str) -> dict:
    return batch(run_zuno, [{"name": "grep", "arguments": args}], *profile)["results"][0]


def test_grep_shows_controls_as_pictures(workspace: Path, run_zuno: RunZuno) -> None:
    """grep printed a lone CR, an ESC sequence and a backspace raw in its lines; now as read
    shows them, in the zuno profile's lines and in the chord profile's hit and context lines."""
    (workspace / "a.txt").write_bytes(b"pre\x1b[2J\nhit \x1b[31mred\x08\nhit cr\rover\nhit crlf\r\npost\x0c\n")
    r = _grep(run_zuno, {"pattern": "hit"})
    assert r["text"].splitlines() == [f"a.txt:2:hit {ESC}[31mred{BS}", f"a.txt:3:hit cr{CR}over", "a.txt:4:hit crlf"]
    r = _grep(run_zuno, {"pattern": "red"})  # one file's lines without a CR (read as rg printed them)
    assert r["text"] == f"a.txt:2:hit {ESC}[31mred{BS}"
    r = _grep(run_zuno, {"pattern": "hit", "context_lines": 1}, "--profile", "chord")
    assert r["text"].splitlines() == [
        f"| a.txt-1-pre{ESC}[2J",
        f"a.txt:2:hit {ESC}[31mred{BS}",
        f"a.txt:3:hit cr{CR}over",
        "a.txt:4:hit crlf",
        f"| a.txt-5-post{FF}",
    ]


def test_grep_caps_lines_of_pictures_as_lines_of_controls(workspace: Path, run_zuno: RunZuno) -> None:
    """A picture is one UTF-16 unit as its control is: a hit line of 3000 ESCs is cut at 2000
    pictures; a context line is shortened to 256 bytes of pictures (three bytes each)."""
    (workspace / "w.txt").write_bytes(b"\x1b" * 400 + b"\nhit" + b"\x1b" * 3000 + b"\n")
    r = _grep(run_zuno, {"pattern": "hit", "context_lines": 1}, "--profile", "chord")
    ctx, hit, note = r["text"].splitlines()
    assert "1 matching line(s) longer than 2000 UTF-16 code units were cut there" in note
    assert hit == "w.txt:2:hit" + ESC * (limits.MATCH_LINE_MAX_UTF16 - 3)
    assert ctx == "| w.txt-1-" + ESC * 84 + "..."
    assert len(ctx.removeprefix("| w.txt-1-").encode()) <= limits.CHORD_CONTEXT_LINE_MAX_BYTES


def test_grep_output_of_a_file_without_controls_is_unchanged(workspace: Path, run_zuno: RunZuno) -> None:
    (workspace / "p.txt").write_bytes(f"hit\ta\r\nhit café {ESC}\nno\n".encode())
    r = _grep(run_zuno, {"pattern": "hit"})
    assert r["text"] == f"p.txt:1:hit\ta\np.txt:2:hit café {ESC}"


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64, 1 << 20])
def test_the_streamed_window_costs_and_pictures_equal_the_whole_file_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """scan_window against the obvious reading of the whole file, chunk boundaries anywhere: the
    rows, a page that ends where the next row's shown text (each control a three-byte picture)
    would pass the budget, and the pictures the file holds of the controls its rows hold."""
    monkeypatch.setattr(limits, "FILE_READ_CHUNK", chunk)
    rng = random.Random(chunk)
    for case in range(60):
        alphabet = ["a", "b", "\r", "\x1b", "\x08", "\t", ESC, CR, "\r\n"]
        lines = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 7))) for _ in range(rng.randrange(1, 20))]
        data = "\n".join(lines).encode() + (b"\n" if rng.random() < 0.5 else b"")
        p = tmp_path / f"c{case}"
        p.write_bytes(data)
        whole = data.split(b"\n")
        if data.endswith(b"\n"):
            whole.pop()
        texts = [w.decode().removesuffix("\r") for w in whole[:-1]]
        texts += [w.decode() if not data.endswith(b"\n") else w.decode().removesuffix("\r") for w in whole[-1:]]
        start, want, budget = rng.randrange(1, len(texts) + 1), rng.randrange(1, 8), rng.randrange(10, 80)
        width = len(str(start + want - 1))
        expected, used = [], 0
        for text in texts[start - 1 : start - 1 + want]:
            cost = width + 2 + len(text.encode()) + 2 * len(control_pictures.CONTROLS.findall(text))
            if expected and used + cost > budget:
                break
            expected.append(text)
            used += cost
        fd = os.open(p, os.O_RDONLY)
        try:
            scan = scan_window(fd, start, want, budget, threading.Event())
        finally:
            os.close(fd)
        assert [r.text for r in scan.rows] == expected, (data, start, want, budget)
        shown = {control_pictures.PICTURE[c] for t in expected for c in control_pictures.CONTROLS.findall(t)}
        held = control_pictures.pictures_in(data.decode())
        assert scan.pictures & shown == held & shown, (data, start, want)
