"""The zuno command as a contract: exit statuses, the batch shape, call, events, sessions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from zuno.store import Store
from zuno.store.schema import MIGRATIONS

from conftest import batch

RECORD_KEYS = {
    "call_id",
    "name",
    "outcome",
    "block_kind",
    "cancelled",
    "text",
    "metadata",
    "declarations",
    "started_at",
    "ended_at",
}


def test_unusable_input_exits_2_and_runs_nothing(workspace: Path, run_zuno: Any) -> None:
    cases = [
        (("batch", "-"), "{not json", "not valid JSON"),
        (("batch", "-"), '{"name": "read"}', "a batch is a JSON array"),
        (("batch", "missing.json"), None, "does not exist"),
        (("batch", "-", "--profile", "nope"), "[]", "unknown profile 'nope'"),
        (("call", "write", "{bad"), None, "ARGS_JSON: not valid JSON"),
        (("events", "--session", "ses_none"), None, "no session 'ses_none'"),
    ]
    for args, stdin, message in cases:
        proc = run_zuno(*args, input=stdin)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and proc.stdout == ""
    assert not (workspace / ".zuno" / "artifacts").exists()


def test_json_files_and_input_with_a_byte_order_mark_are_read(workspace: Path, run_zuno: Any) -> None:
    # Some editors start UTF-8 files with a BOM; JSON readers may ignore it, and Zuno does.
    bom = "\ufeff"
    (workspace / "a.txt").write_text("hello\n")
    (workspace / "zuno.json").write_text(bom + json.dumps({"search": {"threads": 1}}), encoding="utf-8")
    call = [{"name": "read", "arguments": {"path": "a.txt"}}]
    (workspace / "calls.json").write_text(bom + json.dumps(call), encoding="utf-8")
    proc = run_zuno("batch", "calls.json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["results"][0]
    assert result["outcome"] == "ok" and "hello" in result["text"]
    proc = run_zuno("steps", "-", "-c", input=bom + json.dumps(call) + "\n" + json.dumps(call) + "\n")
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["results"][0]["outcome"] for line in proc.stdout.splitlines()] == ["ok", "ok"]


def test_a_batch_that_ran_exits_1_when_an_outcome_was_not_ok(workspace: Path, run_zuno: Any) -> None:
    calls = [
        {"name": "read", "arguments": {"path": "nothing-here"}, "id": "c1"},
        {"name": "read", "arguments": json.dumps({"path": "."})},
        {"name": "nope", "arguments": {}},
    ]
    proc = run_zuno("batch", "-", input=json.dumps(calls))
    assert proc.returncode == 1, proc.stderr  # it ran; not every outcome was ok
    out = json.loads(proc.stdout)
    assert set(out) == {"session", "step", "notices", "results"} and out["step"] == 1
    assert [set(r) for r in out["results"]] == [RECORD_KEYS] * 3
    assert [r["outcome"] for r in out["results"]] == ["error", "ok", "blocked"]
    assert out["results"][0]["call_id"] == "c1"
    assert all(r["declarations"]["effect"] for r in out["results"])
    assert (workspace / ".zuno" / ".gitignore").read_text().strip().endswith("*")


def test_call_prints_text_or_the_record_and_sessions_continue(workspace: Path, run_zuno: Any) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    text = run_zuno("call", "read", '{"path": "a.txt"}', "--new-session", "ses_c")
    assert text.returncode == 0 and text.stdout == "1\talpha\n"
    rec = json.loads(
        run_zuno("call", "write", '{"path": "a.txt", "content": "beta\\n"}', "--session", "ses_c", "--json").stdout
    )
    assert rec["outcome"] == "ok" and rec["step"] == 2 and rec["session"] == "ses_c"
    assert (workspace / "a.txt").read_text() == "beta\n"
    ev = json.loads(run_zuno("events", "--session", "ses_c", "--json").stdout)["events"]
    kinds = [e["kind"] for e in ev]
    assert kinds.count("call-started") == 2 and kinds.count("call-settled") == 2
    assert kinds.index("call-started") < kinds.index("call-settled")
    assert "step-started" in run_zuno("events", "--session", "ses_c").stdout


def test_the_demo_step_runs_against_a_checkout(tmp_path: Path, run_zuno: Any) -> None:
    repo = Path(__file__).resolve().parents[1]
    root = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(repo), str(root)], check=True)
    # The step from this working tree, against a clean checkout (as ./scripts/demo runs it), twice:
    # the second run continues the demo session and gives the same outcomes.
    step = json.loads((repo / "examples" / "first-step.json").read_text())
    out = batch(run_zuno, step, "--root", str(root), "--new-session", "demo")
    again = batch(run_zuno, step, "--root", str(root), "--session", "demo")
    assert [r["outcome"] for r in again["results"]] == [r["outcome"] for r in out["results"]]
    assert again["results"][4]["text"].startswith("Replaced build/zuno-demo/hello.txt")
    outcomes = [(r["name"], r["outcome"]) for r in out["results"]]
    assert outcomes == [
        ("read", "ok"),
        ("glob", "ok"),
        ("grep", "ok"),
        ("shell", "ok"),
        ("write", "ok"),
        ("write", "error"),
        ("no_such_tool", "blocked"),
    ]
    assert "src/zuno/tools/files.py" in out["results"][2]["text"]
    assert "[verification rcp_" in out["results"][3]["text"]
    assert out["results"][5]["metadata"]["conflict"]["kind"] == "ReadRequired"
    assert (root / ".zuno" / "zuno.db").is_file()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert ".zuno" not in status


def test_migrations_run_once_and_are_recorded(tmp_path: Path) -> None:
    db = tmp_path / "z.db"
    s = Store(db)
    assert s.applied_migrations()[: len(MIGRATIONS)] == [m[0] for m in MIGRATIONS]
    s.close()
    s2 = Store(db, [("9999_extra", "CREATE TABLE extra (x INTEGER)")])
    assert s2.applied_migrations()[-1] == "9999_extra"
    s2.close()
    s3 = Store(db, [("9999_extra", "CREATE TABLE extra (x INTEGER)")])  # not applied twice
    assert s3.applied_migrations().count("9999_extra") == 1
    s3.close()


def test_invalid_unicode_in_a_call_is_refused_not_a_crash(workspace: Path, run_zuno: Any) -> None:
    # JSON allows a lone surrogate escape; it is not valid Unicode and cannot name a file.
    text = (
        '[{"name": "read", "arguments": {"path": "\\ud800x"}},'
        ' {"name": "read", "arguments": {"path": "a", "intent": ["x", {"\\udc80": 1}]}},'
        ' {"name": "re\\udc80ad", "id": "\\ud800", "arguments": {}}]'
    )
    proc = run_zuno("batch", "-", input=text)
    assert proc.returncode == 1, proc.stderr
    first, second, third = json.loads(proc.stdout)["results"]
    assert (first["outcome"], first["block_kind"]) == ("blocked", "invalid_arguments")
    assert "argument 'path' is not valid Unicode" in first["text"]
    assert "intent[1]." in second["text"] and second["block_kind"] == "invalid_arguments"
    assert third["block_kind"] == "unavailable" and third["call_id"] == "\\ud800"


def test_the_common_options_may_come_before_the_commands_name(workspace: Path, run_zuno: Any, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("from the other root\n")
    out = run_zuno("--profile", "chord", f"--root={other}", "call", "read", '{"path": "a.txt"}', "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["outcome"] == "ok" and "from the other root" in record["text"]
    listed = run_zuno("--profile", "chord", "tools")
    assert listed.returncode == 0 and "view_image" in listed.stdout  # chord's surface, not zuno's
    assert run_zuno("--profile").returncode == 2  # a value missing is still a usage error
