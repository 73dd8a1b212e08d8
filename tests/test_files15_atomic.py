"""Outside testing of the file tools' atomic write (fifteenth round): a temporary file renamed
over the name. What the replacement keeps of the replaced file, on real files: its mode and its
user.* extended attributes are kept. A file with hard links is rewritten in place since the
seventeenth round (tests/test_files17_links.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import zuno
from stepclient import StepClient


class Z(StepClient):
    """One call per step."""


@pytest.fixture
async def z(workspace: Path) -> AsyncIterator[Z]:
    async with zuno.Runtime(root=workspace, profile="chord") as rt, rt.session() as s:
        yield Z(s, workspace)


def _tag(f: Path) -> bool:
    try:
        os.setxattr(f, "user.zuno-test", b"kept")
    except OSError:
        return False
    return True


async def test_edit_and_write_keep_the_mode_and_user_xattrs(z: Z) -> None:
    """The rename dropped every extended attribute of the edited file (a user.* tag, an origin
    mark) silently. Now edit and write carry user.* attributes over, and the mode as before."""
    f = z.root / "f.txt"
    f.write_text("one\n")
    f.chmod(0o640)
    if not _tag(f):
        pytest.skip("this file system takes no user.* extended attributes")
    assert (await z.call("read", path="f.txt"))["outcome"] == "ok"
    r = await z.call("edit", path="f.txt", old_string="one", new_string="two")
    assert r["outcome"] == "ok", r["text"]
    assert f.read_text() == "two\n"
    assert os.getxattr(f, "user.zuno-test") == b"kept"
    assert f.stat().st_mode & 0o777 == 0o640
    r = await z.call("write", path="f.txt", content="three\n")
    assert r["outcome"] == "ok", r["text"]
    assert os.getxattr(f, "user.zuno-test") == b"kept"
    assert f.stat().st_mode & 0o777 == 0o640
