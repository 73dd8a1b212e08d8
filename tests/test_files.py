"""read and write end to end: paging, listings, binary refusal, suggestions, read receipts, and
typed conflicts that leave the file untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from conftest import batch


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_read_pages_lines_and_lists_directories(workspace: Path, run_zuno: Any) -> None:
    (workspace / "f.txt").write_text("".join(f"line {i}\r\n" for i in range(1, 11)))
    (workspace / "d").mkdir()
    (workspace / "d" / "b.txt").write_text("")
    (workspace / "d" / "a").mkdir()
    (workspace / "one.txt").write_text("only\n")
    out = batch(
        run_zuno,
        [
            call("read", path="f.txt", offset=3, limit=2),
            call("read", path="d"),
            call("read", path="f.txt", offset=11),
            call("read", path="d/b.txt"),
            call("read", path="one.txt", offset=2),
        ],
    )
    page, listing, past, empty, past_one = out["results"]
    assert page["text"].splitlines()[:2] == ["3\tline 3", "4\tline 4"]
    assert "continue with offset=5" in page["text"]
    assert listing["text"].splitlines()[1:] == ["a/", "b.txt"]
    assert past["outcome"] == "error" and "past the end" in past["text"] and "(10 lines)" in past["text"]
    assert empty["outcome"] == "ok" and "empty" in empty["text"]
    assert past_one["outcome"] == "error" and "one.txt (1 line)." in past_one["text"], past_one


def test_read_pages_by_bytes_instead_of_truncating(workspace: Path, run_zuno: Any) -> None:
    (workspace / "big.txt").write_text("".join(f"{i:05d} " + "z" * 100 + "\n" for i in range(1500)))
    (page,) = batch(run_zuno, [call("read", path="big.txt")])["results"]
    assert page["outcome"] == "ok" and "withheldOutput" not in page["metadata"]
    last = page["metadata"]["to"]
    assert 1 < last < 1500 and f"continue with offset={last + 1}" in page["text"]
    assert len(page["text"].encode()) <= 51200


def test_read_refuses_binary_and_suggests_near_names(workspace: Path, run_zuno: Any) -> None:
    (workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (workspace / "config.yaml").write_text("a: 1\n")
    binary, missing, outside = batch(
        run_zuno, [call("read", path="blob.bin"), call("read", path="config.yml"), call("read", path="../x")]
    )["results"]
    assert binary["outcome"] == "error" and "binary file" in binary["text"]
    assert missing["outcome"] == "error" and "no such file" in missing["text"] and "config.yaml" in missing["text"]
    assert (outside["outcome"], outside["block_kind"]) == ("blocked", "denied")


def test_write_creates_and_replacing_needs_a_current_read(workspace: Path, run_zuno: Any) -> None:
    target = workspace / "notes.md"
    target.write_text("original\n")
    out = batch(
        run_zuno,
        [call("write", path="new/dir/a.txt", content="hello\n"), call("write", path="notes.md", content="clobbered\n")],
        "--new-session",
        "ses_w",
    )
    created, no_read = out["results"]
    assert created["outcome"] == "ok" and created["metadata"]["writtenPaths"] == ["new/dir/a.txt"]
    assert (workspace / "new/dir/a.txt").read_text() == "hello\n"
    assert no_read["outcome"] == "error" and no_read["metadata"]["conflict"]["kind"] == "ReadRequired"
    c = no_read["metadata"]["conflict"]
    assert c["resource"] == "notes.md" and c["requiredAction"].startswith("Read the named resource")
    assert c["operationDigest"] and c["currentDigest"]
    assert target.read_text() == "original\n"

    # Read, then someone else changes the file: StaleRead, nothing written.
    batch(run_zuno, [call("read", path="notes.md")], "--session", "ses_w")
    target.write_text("changed by a human\n")
    (stale,) = batch(run_zuno, [call("write", path="notes.md", content="x\n")], "--session", "ses_w")["results"]
    assert stale["metadata"]["conflict"]["kind"] == "StaleRead"
    assert target.read_text() == "changed by a human\n"

    # Read the current content: the replacement goes through and refreshes the receipt.
    batch(run_zuno, [call("read", path="notes.md")], "--session", "ses_w")
    os.chmod(target, 0o640)
    first, second = batch(
        run_zuno,
        [call("write", path="notes.md", content="v1\n"), call("write", path="notes.md", content="v2\n")],
        "--session",
        "ses_w",
    )["results"]
    assert first["outcome"] == "ok" and second["outcome"] == "ok"  # the write refreshed the receipt
    assert target.read_text() == "v2\n" and (target.stat().st_mode & 0o777) == 0o640

    # A receipt belongs to its session.
    other_session = batch(run_zuno, [call("write", path="notes.md", content="v3\n")], "--new-session", "ses_other")
    (other,) = other_session["results"]
    assert other["metadata"]["conflict"]["kind"] == "ReadRequired"


def test_write_keeps_exact_bytes_and_refuses_the_state_folder(workspace: Path, run_zuno: Any) -> None:
    content = "a\r\nb\n\ttab ✓\n"
    res = batch(
        run_zuno, [call("write", path="x.txt", content=content), call("write", path=".zuno/zuno.db", content="")]
    )
    _, state = res["results"]
    assert (workspace / "x.txt").read_bytes() == content.encode()
    assert (state["outcome"], state["block_kind"]) == ("blocked", "denied")


def test_every_read_records_a_receipt(workspace: Path, run_zuno: Any) -> None:
    (workspace / "r.txt").write_text("abc\n")
    out = batch(run_zuno, [call("read", path="r.txt"), call("read", path="r.txt", limit=1)], "--new-session", "ses_r")
    assert all(r["outcome"] == "ok" for r in out["results"])
    import sqlite3

    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    (sha, gen) = db.execute("SELECT sha256, generation FROM read_receipts WHERE session_id = 'ses_r'").fetchone()
    assert gen == 2 and sha == out["results"][0]["metadata"]["sha256"]
    assert json.dumps(out)


def test_symlinks_are_resolved_before_the_workspace_check(workspace: Path, run_zuno: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (workspace / "inside.txt").write_text("fine\n")
    (workspace / "escape").symlink_to(outside)
    (workspace / "alias.txt").symlink_to(workspace / "inside.txt")
    (workspace / "sub").mkdir()
    res = batch(
        run_zuno,
        [
            call("read", path="escape/secret.txt"),
            call("read", path="alias.txt"),
            call("read", path="sub/../escape/secret.txt"),
            call("write", path="escape/new.txt", content="x"),
        ],
    )["results"]
    assert [(r["outcome"], r["block_kind"]) for r in res] == [
        ("blocked", "denied"),
        ("ok", None),
        ("blocked", "denied"),
        ("blocked", "denied"),
    ]
    assert "fine" in res[1]["text"] and not (outside / "new.txt").exists()


def test_a_receipt_is_durable_with_the_result_that_showed_the_bytes(workspace: Path, run_zuno: Any) -> None:
    import sqlite3

    (workspace / "r.txt").write_text("abc\n")
    batch(run_zuno, [call("read", path="r.txt")], "--new-session", "ses_d")
    db = sqlite3.connect(workspace / ".zuno" / "zuno.db")
    assert db.execute("SELECT COUNT(*) FROM read_receipts WHERE session_id = 'ses_d'").fetchone()[0] == 1
    # Another process continues the session: the receipt carried over, so the write goes through.
    (w,) = batch(run_zuno, [call("write", path="r.txt", content="new\n")], "--session", "ses_d")["results"]
    assert w["outcome"] == "ok"
