"""Outside testing of the file tools (fifteenth round): lone-CR (old Mac) and mixed CR/LF/CRLF line
endings through read, edit and apply_patch, on real files. The spec: matching is on logical lines
(LF or CRLF breaks) and the original BOM, LF or CRLF style and final-newline state are kept, so a
lone CR is text inside a line and every byte outside a change stays as it was."""

from __future__ import annotations

from stepclient import StepClient

Z = StepClient


async def test_a_lone_cr_file_is_one_line_and_edit_keeps_every_other_byte(chord: Z) -> None:
    f = chord.root / "mac.txt"
    f.write_bytes(b"a\rb\rc")
    assert (await chord.read("mac.txt")).startswith("1\ta\u240db\u240dc")  # a lone CR shown as U+240D (sixteenth round)
    r = await chord.call("edit", path="mac.txt", old_string="b", new_string="B")
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"a\rB\rc"
    r = await chord.call("edit", path="mac.txt", old_string="a\rB", new_string="A\rBB")
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"A\rBB\rc"


async def test_edit_in_a_mixed_file_keeps_each_untouched_terminator(chord: Z) -> None:
    f = chord.root / "mixed.txt"
    f.write_bytes(b"l1\nl2\r\nl3\rl4\nl5\r\n")
    shown = await chord.read("mixed.txt")
    assert "3\tl3\u240dl4\n4\tl5" in shown
    r = await chord.call("edit", path="mixed.txt", old_string="l3\rl4", new_string="L3\rL4")
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"l1\nl2\r\nL3\rL4\nl5\r\n"


async def test_a_line_ending_in_cr_before_its_crlf_reads_and_edits_as_shown(chord: Z) -> None:
    """b"x\\r\\r\\n": the line is "x\\r" (the second CR is the CRLF's). read stripped every trailing
    CR and showed "x", and edit normalised the CRLF in an old_string copied as shown ("x\\r\\ny") to
    "x\\ny": neither the text as read nor the text as given matched. Now read shows "x\\r" and the
    old_string as given matches; the other bytes stay."""
    f = chord.root / "crcr.txt"
    f.write_bytes(b"x\r\r\ny\nz\r\n")
    shown = await chord.read("crcr.txt")
    assert "1\tx\u240d\n2\ty\n" in shown, repr(shown)
    r = await chord.call("edit", path="crcr.txt", old_string="x\r\ny", new_string="X\r\ny")
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"X\r\r\ny\nz\r\n"


async def test_apply_patch_keeps_lone_crs_and_mixed_terminators_outside_the_change(patcher: Z) -> None:
    f = patcher.root / "p.txt"
    f.write_bytes(b"a\rb\rc\nd\r\ne\n")
    await patcher.read("p.txt")
    patch = "*** Begin Patch\n*** Update File: p.txt\n@@\n-e\n+E\n*** End Patch"
    r = await patcher.call("apply_patch", patch=patch)
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"a\rb\rc\nd\r\nE\n"
    patch = "*** Begin Patch\n*** Update File: p.txt\n@@\n-a\rb\rc\n+A\rB\n*** End Patch"
    r = await patcher.call("apply_patch", patch=patch)
    assert r["outcome"] == "ok", r["text"]
    assert f.read_bytes() == b"A\rB\nd\r\nE\n"
