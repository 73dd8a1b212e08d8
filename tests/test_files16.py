"""Leftovers of the file tools' outside testing (sixteenth round), on real files: what the atomic
rewrite carries over besides user.* attributes (POSIX ACLs and an SELinux label yes, file
capabilities no), line endings of replaced lines in a mixed file, and how read shows a lone CR."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from stepclient import StepClient

Z = StepClient


# --- ACLs, capabilities, labels through the rewrite ---------------------------------------------

ACL_ACCESS = "system.posix_acl_access"
ACL_DEFAULT = "system.posix_acl_default"
_UNDEFINED = 0xFFFFFFFF
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """A POSIX ACL as the kernel stores it in the xattr (linux/posix_acl_xattr.h): version 2,
    then (tag, perm, id) entries, little-endian, sorted by tag then id."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in sorted(entries))


# user::rw- user:1234:rw- group::r-- mask::rw- other::--- (what `setfacl -m u:1234:rw` gives a 0640 file)
NAMED_USER_ACL = _acl((_USER_OBJ, 6, _UNDEFINED), (_USER, 6, 1234), (_GROUP_OBJ, 4, _UNDEFINED),
                      (_MASK, 6, _UNDEFINED), (_OTHER, 0, _UNDEFINED))


def _set_acl(f: Path, key: str, blob: bytes, setfacl_spec: str) -> None:
    """Through the real setfacl where it is installed, else the same ACL as the raw xattr."""
    tool = shutil.which("setfacl")
    try:
        if tool is not None:
            flag = ["-d"] if key == ACL_DEFAULT else []
            subprocess.run([tool, *flag, "-m", setfacl_spec, str(f)], check=True, capture_output=True)
        else:
            os.setxattr(f, key, blob)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"this file system refuses POSIX ACLs ({e})")


async def test_edit_write_and_apply_patch_keep_the_posix_acl(chord: Z, patcher: Z) -> None:
    """The rename dropped the file's access ACL: a colleague granted rw with setfacl lost it after
    one edit. Now the ACL (and with it the mode's mask bits) is carried over by every rewrite."""
    f = chord.root / "shared.txt"
    f.write_text("one\n")
    f.chmod(0o640)
    _set_acl(f, ACL_ACCESS, NAMED_USER_ACL, "u:1234:rw")
    acl = os.getxattr(f, ACL_ACCESS)
    mode = f.stat().st_mode & 0o7777
    await chord.read("shared.txt")
    await chord.ok("edit", path="shared.txt", old_string="one", new_string="two")
    assert f.read_text() == "two\n"
    assert os.getxattr(f, ACL_ACCESS) == acl
    assert f.stat().st_mode & 0o7777 == mode
    await chord.ok("write", path="shared.txt", content="three\n")
    assert os.getxattr(f, ACL_ACCESS) == acl
    await patcher.read("shared.txt")
    patch = "*** Begin Patch\n*** Update File: shared.txt\n@@\n-three\n+four\n*** End Patch"
    await patcher.ok("apply_patch", patch=patch)
    assert f.read_text() == "four\n"
    assert os.getxattr(f, ACL_ACCESS) == acl
    assert f.stat().st_mode & 0o7777 == mode


async def test_a_rewrite_does_not_pick_up_the_directorys_default_acl(chord: Z) -> None:
    """A file made before its directory got a default ACL has no ACL of its own; rewriting it in
    place would not give it one, so neither does the rewrite through a new temporary file."""
    d = chord.root / "d"
    d.mkdir()
    f = d / "old.txt"
    f.write_text("one\n")
    f.chmod(0o600)
    default = _acl((_USER_OBJ, 7, _UNDEFINED), (_USER, 7, 4321), (_GROUP_OBJ, 5, _UNDEFINED),
                   (_MASK, 7, _UNDEFINED), (_OTHER, 5, _UNDEFINED))
    _set_acl(d, ACL_DEFAULT, default, "u:4321:rwx")
    assert ACL_ACCESS not in os.listxattr(f)
    await chord.read("d/old.txt")
    await chord.ok("edit", path="d/old.txt", old_string="one", new_string="two")
    assert f.read_text() == "two\n"
    assert ACL_ACCESS not in os.listxattr(f)
    assert f.stat().st_mode & 0o7777 == 0o600


def _setcap(f: Path) -> None:
    tool = shutil.which("setcap")
    try:
        if tool is not None:
            subprocess.run([tool, "cap_net_raw+ep", str(f)], check=True, capture_output=True)
        else:  # vfs_cap_data revision 2: magic|effective, permitted (CAP_NET_RAW = bit 13), inheritable
            os.setxattr(f, "security.capability", struct.pack("<5I", 0x02000001, 1 << 13, 0, 0, 0))
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"file capabilities cannot be set here ({e})")


async def test_a_rewrite_drops_file_capabilities_and_other_security_attributes(chord: Z) -> None:
    """security.capability is a privilege: a rewritten executable must not keep cap_net_raw (a
    write in place drops it too). The SELinux label is kept; other security.*/trusted.* are not."""
    f = chord.root / "tool.sh"
    f.write_text("#!/bin/sh\necho one\n")
    f.chmod(0o755)
    _setcap(f)
    try:
        os.setxattr(f, "security.selinux", b"system_u:object_r:bin_t:s0\0")
    except OSError:
        pass  # a kernel with SELinux enforcing may refuse an unknown label; the capability part holds
    os.setxattr(f, "user.tag", b"kept")
    before = set(os.listxattr(f))
    assert "security.capability" in before
    await chord.read("tool.sh")
    await chord.ok("edit", path="tool.sh", old_string="echo one", new_string="echo two")
    after = set(os.listxattr(f))
    assert "security.capability" not in after
    assert "user.tag" in after
    if "security.selinux" in before:
        assert os.getxattr(f, "security.selinux") == b"system_u:object_r:bin_t:s0\0"
    assert f.stat().st_mode & 0o7777 == 0o755


# --- a replaced line keeps its own terminator, in edit and apply_patch alike ---------------------

MIXED = b"a\nb\nc\nd\r\ne\nf\n"  # mostly LF; d ends in CRLF

CASES = [
    # (file, old lines, new lines, the old/new text end with a line break in edit, expected bytes)
    (MIXED, ["d"], ["D"], False, b"a\nb\nc\nD\r\ne\nf\n"),
    (MIXED, ["d"], ["D"], True, b"a\nb\nc\nD\r\ne\nf\n"),
    (MIXED, ["c", "d", "e"], ["C", "D", "E"], False, b"a\nb\nC\nD\r\nE\nf\n"),
    (MIXED, ["b", "c", "d"], ["B", "C", "D"], True, b"a\nB\nC\nD\r\ne\nf\n"),
    (MIXED, ["d"], ["D1", "D2"], False, b"a\nb\nc\nD1\nD2\r\ne\nf\n"),  # the added line: LF
    (MIXED, ["c", "d"], ["X"], False, b"a\nb\nX\r\ne\nf\n"),  # the last line's own terminator
    (b"a\r\nb\nc\r\nd\r\n", ["b"], ["B"], False, b"a\r\nB\nc\r\nd\r\n"),  # mostly CRLF, b in LF
    (b"a\r\nb\nc\r\nd\r\n", ["a", "b"], ["A", "B", "N"], False, b"A\r\nB\r\nN\nc\r\nd\r\n"),  # last to last
]


@pytest.mark.parametrize(("content", "old", "new", "whole", "expected"), CASES)
async def test_edit_and_apply_patch_give_a_mixed_file_the_same_bytes(
    chord: Z, patcher: Z, content: bytes, old: list[str], new: list[str], whole: bool, expected: bytes
) -> None:
    """apply_patch gave a replaced line the file's dominant style (d\\r\\n in a mostly-LF file
    became D\\n) and edit did the same for a line break inside old_string, while edit kept it for a
    break outside. Now both keep a replaced line's own terminator and give added lines the
    dominant style; the same change gives the same bytes through either tool."""
    (chord.root / "e.txt").write_bytes(content)
    (chord.root / "p.txt").write_bytes(content)
    tail = "\n" if whole else ""
    await chord.read("e.txt")
    await chord.ok("edit", path="e.txt", old_string="\n".join(old) + tail, new_string="\n".join(new) + tail)
    await patcher.read("p.txt")
    body = "".join(f"-{line}\n" for line in old) + "".join(f"+{line}\n" for line in new)
    await patcher.ok("apply_patch", patch=f"*** Begin Patch\n*** Update File: p.txt\n@@\n{body}*** End Patch")
    assert (chord.root / "e.txt").read_bytes() == expected
    assert (chord.root / "p.txt").read_bytes() == expected


# --- read shows a lone CR as U+240D; edit and apply_patch take it back -----------------------------

CR = "\u240d"  # SYMBOL FOR CARRIAGE RETURN


async def test_read_shows_a_lone_cr_as_a_sign_and_edit_takes_the_copied_text(chord: Z) -> None:
    """read sent a lone CR raw: a terminal or log showing the row returned to its start and
    overwrote it ("a\\rb" showed as "b"). Now read shows it as U+240D, says so in a footer line,
    and an old_string/new_string copied from the rows (with the sign) edits the CRs."""
    f = chord.root / "mac.txt"
    f.write_bytes(b"a\rb\rc\nnext\n")
    shown = await chord.read("mac.txt")
    assert "\r" not in shown
    assert f"1\ta{CR}b{CR}c\n2\tnext" in shown
    assert f"line 1 holds a lone carriage return (CR, text inside the line, not a line break), shown as {CR}" in shown
    await chord.ok("edit", path="mac.txt", old_string=f"b{CR}c", new_string=f"B{CR}C{CR}")
    assert f.read_bytes() == b"a\rB\rC\r\nnext\n"
    await chord.read("mac.txt")
    await chord.ok("edit", path="mac.txt", old_string="a\rB", new_string="A")  # the raw CR still matches
    assert f.read_bytes() == b"A\rC\r\nnext\n"


async def test_apply_patch_takes_the_sign_back_as_the_cr(patcher: Z) -> None:
    f = patcher.root / "p.txt"
    f.write_bytes(b"top\na\rb\rc\nend\n")
    shown = await patcher.read("p.txt")
    assert f"2\ta{CR}b{CR}c" in shown
    patch = f"*** Begin Patch\n*** Update File: p.txt\n@@ top\n-a{CR}b{CR}c\n+A{CR}B\n end\n*** End Patch"
    await patcher.ok("apply_patch", patch=patch)
    assert f.read_bytes() == b"top\nA\rB\nend\n"


async def test_a_cr_before_a_crlf_and_a_cr_ending_the_file_are_shown_and_edited(chord: Z) -> None:
    """b"x\\r\\r\\n" is the line "x\\r" (shown "x" + sign). A last line without a line break that
    ends in a lone CR lost that CR in read (stripped as if it were a CRLF's), so an old_string
    copied from read matched a different text; now it is shown and matched."""
    f = chord.root / "crcr.txt"
    f.write_bytes(b"x\r\r\ny\na\rb\r")
    shown = await chord.read("crcr.txt")
    assert f"1\tx{CR}\n2\ty\n3\ta{CR}b{CR}" in shown, repr(shown)
    assert "2 lines (first: 1) hold a lone carriage return" in shown
    await chord.ok("edit", path="crcr.txt", old_string=f"x{CR}\ny", new_string=f"X{CR}\nY")
    assert f.read_bytes() == b"X\r\r\nY\na\rb\r"
    await chord.read("crcr.txt")
    await chord.ok("edit", path="crcr.txt", old_string=f"b{CR}", new_string="B")
    assert f.read_bytes() == b"X\r\r\nY\na\rB"


async def test_a_file_that_holds_the_sign_itself_gets_its_cr_raw_and_the_sign_literal(chord: Z) -> None:
    """Where the file holds U+240D itself the sign cannot stand for a CR: read sends the CR raw and
    says why, and edit matches the sign as the character it is."""
    f = chord.root / "both.txt"
    f.write_bytes(f"sign {CR} here\ncr\rhere\n".encode())
    shown = await chord.read("both.txt")
    assert "2\tcr\rhere" in shown
    assert "line 2 holds a lone carriage return (CR), sent as the raw character" in shown
    await chord.ok("edit", path="both.txt", old_string=f"sign {CR}", new_string=f"SIGN {CR}")
    assert f.read_bytes() == f"SIGN {CR} here\ncr\rhere\n".encode()


async def test_the_sign_far_past_the_window_is_still_found_when_a_shown_row_holds_a_lone_cr(
    chord: Z,
) -> None:
    """read searches the rest of a file for U+240D only when a row it shows holds a lone CR (a large
    file's scan no longer searches every chunk for it); the sign 3 MiB on, past several of read's
    1 MiB chunks and split across two of them, still makes the CR go raw."""
    filler = b"x" * 1023 + b"\n"
    seam = 3 * 1024 * 1024 - 1  # the sign's three bytes straddle the end of the third chunk
    head = b"cr\rhere\n" + filler * ((seam - 8) // len(filler))
    head += b"y" * (seam - len(head))
    f = chord.root / "far.txt"
    f.write_bytes(head + CR.encode() + b"\n")
    shown = (await chord.call("read", path="far.txt", limit=1))["text"]
    assert "1\tcr\rhere" in shown and "sent as the raw character" in shown, shown[:300]
    f.write_bytes(head + b"no sign\n")  # the same file without it: the sign stands for the CR
    await chord.read("far.txt")
    shown = (await chord.call("read", path="far.txt", limit=1))["text"]
    assert f"1\tcr{CR}here" in shown, shown[:300]


async def test_a_move_keeps_the_sources_owner_acl_and_tags(patcher: Z) -> None:
    """apply_patch's '*** Move to:' wrote the destination as a new file: it kept the source's mode
    but lost its owner, ACL and user.* tags (as mv would not). Now it takes them from the source
    it checked."""
    f = patcher.root / "a.txt"
    f.write_text("one\n")
    f.chmod(0o640)
    _set_acl(f, ACL_ACCESS, NAMED_USER_ACL, "u:1234:rw")
    os.setxattr(f, "user.tag", b"kept")
    os.chown(f, 1234, 1234)
    acl, mode = os.getxattr(f, ACL_ACCESS), f.stat().st_mode & 0o7777  # the group bits: the ACL's mask
    await patcher.read("a.txt")
    patch = "*** Begin Patch\n*** Update File: a.txt\n*** Move to: sub/b.txt\n@@\n-one\n+two\n*** End Patch"
    await patcher.ok("apply_patch", patch=patch)
    b = patcher.root / "sub" / "b.txt"
    assert not f.exists() and b.read_text() == "two\n"
    assert os.getxattr(b, ACL_ACCESS) == acl
    assert os.getxattr(b, "user.tag") == b"kept"
    st = b.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1234, 1234, mode)
