"""Outside testing of the action tools (ninth round): shell, bg / the chord job tools, apply_patch,
edit, write and read, driven the way models and users drive them (``zuno steps``, ``zuno call``).
Each test here failed before the fix it names."""

from __future__ import annotations

import json
import time
from pathlib import Path

from zuno.process import procfs

from conftest import RunZuno
from jobhelp import Steps, call


def test_a_job_lost_with_its_process_reports_the_bytes_its_log_holds(workspace: Path) -> None:
    """kill -9 of the process holding a job: the next process records it lost, and says how much
    output it left (the log's size), not the 0 of a row nobody finished."""
    with Steps(workspace) as z:
        res = z.one("shell", command="printf 'hello\\nworld\\n'; sleep 60", run_in_background=True)
        bg = res["metadata"]["background"]
        log = workspace / res["metadata"]["logPath"]
        session = z.step()["session"]
        deadline = time.monotonic() + 20
        while (not log.exists() or log.stat().st_size < 12) and time.monotonic() < deadline:
            time.sleep(0.02)
        z.proc.kill()
        z.proc.wait()
    deadline = time.monotonic() + 20
    while procfs.group_exists(bg["pgid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    with Steps(workspace, "--session", session) as z:
        first = z.step(call("bg", action="list"))
        z.close()
    notice = next(n for n in first["notices"] if n["kind"] == "job_completed")
    assert notice["status"] == "lost" and notice["totalWritten"] == 12
    assert "; 12 bytes of output in" in notice["text"]
    listed = first["results"][0]
    assert "12 bytes" in listed["text"]
    assert {m["taskID"]: m["total_written"] for m in listed["metadata"]["jobs"]}[bg["taskID"]] == 12


def _shown_lines(text: str) -> list[str]:
    """The file lines a model copies out of a read result (``<number>\\t<text>`` rows)."""
    return [
        row.split("\t", 1)[1] for row in text.splitlines() if "\t" in row and row.split("\t", 1)[0].strip().isdigit()
    ]


def test_a_bom_file_reads_without_the_mark_so_copied_lines_match(workspace: Path) -> None:
    """read showed the UTF-8 BOM as part of line 1; a model copying that line into a patch or an
    old_string got ContextMismatch, because both match without the mark."""
    (workspace / "a.txt").write_bytes(b"\xef\xbb\xbfalpha\nbeta\n")
    (workspace / "b.txt").write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\n")
    with Steps(workspace) as z:
        shown = z.one("read", path="a.txt")
        first = _shown_lines(shown["text"])[0]
        assert first == "alpha" and shown["metadata"]["bom"] is True and "byte-order mark" in shown["text"]
        patch = f"*** Begin Patch\n*** Update File: a.txt\n@@\n-{first}\n+ALPHA\n*** End Patch"
        done = z.one("apply_patch", patch=patch)
        assert done["outcome"] == "ok", done["text"]
        z.close()
    assert (workspace / "a.txt").read_bytes() == b"\xef\xbb\xbfALPHA\nbeta\n"
    with Steps(workspace, "--profile", "chord") as z:
        first = _shown_lines(z.one("read", path="b.txt")["text"])[0]
        done = z.one("edit", path="b.txt", old_string=first + "\nbeta", new_string="A\nB")
        assert done["outcome"] == "ok", done["text"]
        z.close()
    assert (workspace / "b.txt").read_bytes() == b"\xef\xbb\xbfA\r\nB\r\n"


def test_apply_patch_takes_a_markdown_fenced_patch_and_says_how_to_fix_what_models_get_wrong(
    workspace: Path,
) -> None:
    """A whole-patch markdown fence (what chat models send) was refused; a blank line inside an
    Add File body was blamed on the next '+' line as "expected '*** Add File: <path>' …"; a missing
    Begin Patch or End Patch gave no fix; two Add Files of one path were told to merge into one
    Update File section."""
    fenced = "```diff\n*** Begin Patch\n*** Add File: f.txt\n+fenced\n*** End Patch\n```\n"
    blank_in_add = "*** Begin Patch\n*** Add File: g.txt\n+one\n\n+three\n*** End Patch"
    no_begin = "*** Add File: h.txt\n+x\n*** End Patch"
    cut_short = "*** Begin Patch\n*** Add File: i.txt\n+x\n+y"
    twice = "*** Begin Patch\n*** Add File: j.txt\n+1\n*** Add File: j.txt\n+2\n*** End Patch"
    with Steps(workspace) as z:
        res = z.step(*(call("apply_patch", patch=p) for p in (fenced, blank_in_add, no_begin, cut_short, twice)))
        z.close()
    ok, blank, begin, end, dup = res["results"]
    assert ok["outcome"] == "ok", ok["text"]
    assert (workspace / "f.txt").read_bytes() == b"fenced\n"
    for r in (blank, begin, end, dup):
        assert r["outcome"] == "blocked" and r["block_kind"] == "invalid_arguments", r["text"]
    assert "line 4:" in blank["text"] and "an empty line is a lone '+'" in blank["text"]
    assert "put '*** Begin Patch' before this line" in begin["text"]
    assert "If the patch was cut short, send it whole" in end["text"]
    assert "Merge the chunks" not in dup["text"] and "operation 1 is '*** Add File'" in dup["text"]
    assert not any((workspace / n).exists() for n in ("g.txt", "h.txt", "i.txt", "j.txt"))


def test_lines_copied_with_reads_line_numbers_are_named_as_such(workspace: Path) -> None:
    """old_string or patch lines copied with read's ``<number>\\t`` prefixes were only "not in the
    current file"; now the conflict says the numbers are not part of the file (and only when the
    text after them is)."""
    (workspace / "code.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    (workspace / "data.tsv").write_text("1\tone\n2\ttwo\n")
    numbered = (
        "*** Begin Patch\n*** Update File: code.py\n@@\n 4\tdef g():\n-5\t    return 2\n+    return 3\n*** End Patch"
    )
    tsv = "*** Begin Patch\n*** Update File: data.tsv\n@@\n-7\tseven\n+7\tSEVEN\n*** End Patch"
    with Steps(workspace) as z:
        z.step(call("read", path="code.py"), call("read", path="data.tsv"))
        patched, other = z.step(call("apply_patch", patch=numbered), call("apply_patch", patch=tsv))["results"]
        z.close()
    assert patched["metadata"]["conflict"]["kind"] == "ContextMismatch"
    assert "start with read's line numbers ('4' and a tab)" in patched["text"]
    assert other["outcome"] == "error" and "line numbers" not in other["text"]
    with Steps(workspace, "--profile", "chord") as z:
        z.one("read", path="code.py")
        edited = z.one("edit", path="code.py", old_string="4\tdef g():\n5\t    return 2\n", new_string="x")
        z.close()
    assert edited["metadata"]["conflict"]["kind"] == "ContextMismatch"
    assert "start with read's line numbers ('4' and a tab)" in edited["text"]
    assert (workspace / "code.py").read_text().endswith("return 2\n")


def test_a_cursor_past_the_end_is_said_not_silently_clamped(workspace: Path) -> None:
    """bg output / artifact with a cursor past the last byte came back as an ordinary empty window
    at the end, indistinguishable from "you have read it all"; now a notice names the cursor."""
    with Steps(workspace) as z:
        job = z.one("shell", command="printf abc", run_in_background=True)["metadata"]["background"]["taskID"]
        z.one("bg", action="wait", taskID=job)
        big = z.one("shell", command="head -c 60000 /dev/zero | tr '\\0' y")
        path = big["metadata"]["withheldOutput"]["outputPath"]
        out, art, inside = z.step(
            call("bg", action="output", taskID=job, cursor=100),
            call("bg", action="artifact", outputPath=path, cursor=10**9),
            call("bg", action="output", taskID=job, cursor=1),
        )["results"]
        z.close()
    assert out["outcome"] == "ok" and out["metadata"]["cursorPastEnd"] == 100
    assert "cursor 100 is past the end (3 bytes written so far)" in out["text"]
    assert art["metadata"]["cursorPastEnd"] == 10**9 and f"cursor {10**9} is past the end (60000" in art["text"]
    assert "past the end" not in inside["text"] and "cursorPastEnd" not in inside["metadata"]


def test_a_path_through_a_file_says_so_instead_of_a_symlink_race(workspace: Path) -> None:
    """write / read / apply_patch / shell workdir on ``a_file/child`` were refused as "kept changing
    while it was resolved (a symbolic link swapped in and out) … Try again when it holds still":
    a retry could never succeed. Now the file in the way is named."""
    (workspace / "notes.txt").write_text("x\n")
    add = "*** Begin Patch\n*** Add File: notes.txt/child.txt\n+y\n*** End Patch"
    with Steps(workspace) as z:
        results = z.step(
            call("write", path="notes.txt/child.txt", content="y"),
            call("read", path="notes.txt/child.txt"),
            call("apply_patch", patch=add),
            call("shell", command="pwd", workdir="notes.txt/sub"),
        )["results"]
        z.close()
    for r in results:
        assert r["outcome"] == "blocked" and r["block_kind"] == "invalid_arguments", r["text"]
        assert "symbolic link swapped" not in r["text"]
        assert f"{str(workspace / 'notes.txt')!r} is a file, not a directory" in r["text"]
    assert (workspace / "notes.txt").read_text() == "x\n"


def test_a_copied_replacement_character_for_bytes_that_are_not_utf8_is_explained(workspace: Path) -> None:
    """read shows a Latin-1 byte as U+FFFD; an old_string or patch line copying it matched nothing
    and the conflict said only "not in the current file"."""
    (workspace / "menu.txt").write_bytes(b"caf\xe9 au lait\nsecond\n")
    patch = "*** Begin Patch\n*** Update File: menu.txt\n@@\n-caf\ufffd au lait\n+coffee\n*** End Patch"
    with Steps(workspace) as z:
        shown = z.one("read", path="menu.txt")
        assert "caf\ufffd au lait" in shown["text"]
        patched = z.one("apply_patch", patch=patch)
        z.close()
    with Steps(workspace, "--profile", "chord") as z:
        z.one("read", path="menu.txt")
        edited = z.one("edit", path="menu.txt", old_string="caf\ufffd au lait", new_string="coffee")
        z.close()
    for r in (patched, edited):
        assert r["metadata"]["conflict"]["kind"] == "ContextMismatch"
        assert "bytes that are not UTF-8" in r["text"] and "shell (iconv, sed)" in r["text"]
    assert (workspace / "menu.txt").read_bytes() == b"caf\xe9 au lait\nsecond\n"


def test_a_one_shot_command_says_it_stopped_the_job_it_started(workspace: Path, run_zuno: RunZuno) -> None:
    """`zuno call shell {"run_in_background": true}` printed "running … Completion arrives by itself"
    and exited 0, and the job was silently killed as the process ended. Now stderr says so."""
    args = json.dumps({"command": "sleep 5; touch late.txt", "run_in_background": True})
    proc = run_zuno("call", "shell", args)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.split("background job ", 1)[1].split(" ", 1)[0]
    assert f"zuno: background job {job} (sleep 5; touch late.txt) was still running when this command ended" in (
        proc.stderr
    )
    assert "keep one process (zuno steps, zuno mcp) open while it runs" in proc.stderr
    # A job that ended before the command did is not mentioned.
    with Steps(workspace) as z:
        quick = z.one("shell", command="true", run_in_background=True)["metadata"]["background"]["taskID"]
        assert z.one("bg", action="wait", taskID=quick)["metadata"]["status"] == "completed"
        assert z.close() == 0
        assert z.proc.stderr is not None
        assert "was still running when this command ended" not in z.proc.stderr.read()
    assert not (workspace / "late.txt").exists()


def _half_a_character_then_the_rest(workspace: Path) -> str:
    go = workspace / "go"
    return f"printf 'caf\\xc3'; while [ ! -e {go} ]; do sleep 0.02; done; printf '\\xa9 ok\\n'"


def _until_written(z: Steps, job: str, n: int, *, chord: bool) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        listed = z.one("job_list") if chord else z.one("bg", action="list")
        facts = {f.get("taskID") or f.get("job_id"): f for f in listed["metadata"]["jobs"]}
        if facts[job].get("totalWritten", 0) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{job} did not write {n} bytes")


def test_a_character_a_running_job_is_still_writing_is_not_split_in_two(workspace: Path) -> None:
    """job_output (and bg output at the end of a running job) showed the first half of a UTF-8
    character as U+FFFD (or \\xc3), and the next read began with the second half: 'café' read as
    'caf�' + '� ok'. The partial character now waits for the next read."""
    go = workspace / "go"
    with Steps(workspace, "--profile", "chord") as z:
        job = z.one("shell", command=_half_a_character_then_the_rest(workspace), run_in_background=True)
        jid = job["metadata"]["background"]["taskID"]
        _until_written(z, jid, 4, chord=True)
        first = z.one("job_output", job_id=jid)
        go.touch()
        rest = z.one("job_output", job_id=jid, wait="exit")
        z.close()
    assert first["text"].startswith("caf\n") and "\ufffd" not in first["text"]
    assert rest["text"].startswith("é ok\n"), rest["text"]
    go.unlink()
    with Steps(workspace) as z:
        job = z.one("shell", command=_half_a_character_then_the_rest(workspace), run_in_background=True)
        jid = job["metadata"]["background"]["taskID"]
        _until_written(z, jid, 4, chord=False)
        first = z.one("bg", action="output", taskID=jid)
        go.touch()
        rest = z.one("bg", action="wait", taskID=jid, cursor=first["metadata"]["cursor"])
        z.close()
    assert first["metadata"]["cursor"] == 3 and first["text"].endswith("]\ncaf"), first["text"]
    assert "é ok" in rest["text"] and rest["metadata"]["windowFrom"] == 3


def test_a_read_page_stays_inside_the_output_limits(workspace: Path) -> None:
    """read with a limit over tool_output.max_lines (models send 5000, 10000), or of a directory of
    long names, came back as "[output withheld …] read it back with bg artifact" instead of a page;
    now the page ends inside the limits and its footer names the next offset."""
    (workspace / "short.txt").write_text("x\n" * 5000)
    many = workspace / "many"
    many.mkdir()
    for i in range(2500):
        (many / f"f{i}").touch()
    long_names = workspace / "long"
    long_names.mkdir()
    for i in range(400):
        (long_names / (f"n{i:03d}" + "0" * 200)).touch()
    with Steps(workspace) as z:
        text, listing, wide = z.step(
            call("read", path="short.txt", limit=5000),
            call("read", path="many", limit=3000),
            call("read", path="long"),
        )["results"]
        z.close()
    for r in (text, listing, wide):
        assert r["outcome"] == "ok" and "withheldOutput" not in r["metadata"], r["text"][:300]
    assert text["metadata"]["to"] == 2000 and text["text"].endswith("(lines 1-2000 of 5000; continue with offset=2001)")
    assert listing["text"].endswith("(2000 of 2500 entries; continue with offset=2001)")
    shown = len(wide["text"].splitlines()) - 2  # the head and the footer
    assert 0 < shown < 400 and wide["text"].endswith(f"({shown} of 400 entries; continue with offset={shown + 1})")
    (workspace / "zuno.json").write_text(json.dumps({"tool_output": {"max_lines": 50}}))
    with Steps(workspace) as z:
        small = z.one("read", path="short.txt")
        z.close()
    assert "withheldOutput" not in small["metadata"] and small["metadata"]["to"] == 50


def test_job_output_of_a_job_from_an_earlier_process_shows_its_output(workspace: Path) -> None:
    """The completion notice says "Read it with job_output", but job_output of a job an earlier
    process of the session ran answered only "its output is in <log> (N bytes)"; now it shows the
    output (the 16 KiB preview rule) with the status and the verification receipt."""
    with Steps(workspace, "--profile", "chord") as z:
        first = z.one("shell", command="echo hello from job", run_in_background=True)
        jid = first["metadata"]["background"]["taskID"]
        assert z.one("job_output", job_id=jid, wait="exit")["metadata"]["status"] == "completed"
        session = z.step()["session"]
        z.close()
    with Steps(workspace, "--session", session, "--profile", "chord") as z:
        again = z.one("job_output", job_id=jid)
        z.close()
    assert again["outcome"] == "ok"
    assert "belonged to an earlier process" in again["text"] and "\nhello from job\n" in again["text"]
    assert "[status: completed]" in again["text"] and "[verification rcp_" in again["text"]
    assert again["metadata"]["totalWritten"] == len("hello from job\n")


def test_shell_says_each_call_is_a_new_shell_and_behaves_so(workspace: Path, run_zuno: RunZuno) -> None:
    """Models expect `cd` and `export` to persist between shell calls (other harnesses keep the
    directory); the description did not say they do not. Now it does, and that is what happens;
    a command asking the terminal for a password fails instead of waiting."""
    tools = json.loads(run_zuno("tools", "--json").stdout)
    shell = next(t for t in tools["tools"] if t["name"] == "shell")
    assert "cd and exported variables do not carry over" in shell["description"]
    (workspace / "sub").mkdir()
    with Steps(workspace) as z:
        z.one("shell", command="cd sub && export ZZ_FLAG=1")
        where = z.one("shell", command='pwd; echo "flag=${ZZ_FLAG:-unset}"')
        prompt = z.one("shell", command="read -r pw < /dev/tty", timeout_ms=20000)
        z.close()
    assert where["text"].startswith(f"{workspace.resolve()}\nflag=unset\n")
    assert prompt["outcome"] == "error" and "/dev/tty" in prompt["text"]


def test_zuno_sessions_does_not_count_a_job_that_died_with_its_process(workspace: Path, run_zuno: RunZuno) -> None:
    """After kill -9 of the process holding a job (its guard takes the group along), `zuno sessions`
    still listed the job as open until the session was next driven; now only a job with a live
    group counts."""

    def open_jobs() -> dict[str, int]:
        proc = run_zuno("sessions", "--json")
        return {s["id"]: s["open_jobs"] for s in json.loads(proc.stdout)["sessions"]}

    with Steps(workspace) as z:
        bg = z.one("shell", command="sleep 60", run_in_background=True)["metadata"]["background"]
        session = z.step()["session"]
        assert open_jobs()[session] == 1  # the job runs, its process holds it
        z.proc.kill()
        z.proc.wait()
    deadline = time.monotonic() + 20
    while procfs.group_exists(bg["pgid"]) and time.monotonic() < deadline:
        alive = [p for p, _ in procfs.group_members(bg["pgid"]) if (procfs.stat(p) or (0, 0, "Z"))[2] != "Z"]
        if not alive:
            break
        time.sleep(0.05)
    assert open_jobs()[session] == 0


def test_a_unified_diff_sent_as_a_patch_is_named_as_one(workspace: Path) -> None:
    """Models send `git diff` output, or keep its "\\ No newline at end of file" line; both got only
    "expected '*** Begin Patch'" / "expected a chunk line …" with no way forward."""
    (workspace / "a.txt").write_text("x\n")
    git_diff = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n"
    inside = "*** Begin Patch\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n+y\n*** End Patch"
    marker = "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n\\ No newline at end of file\n*** End Patch"
    with Steps(workspace) as z:
        z.one("read", path="a.txt")
        results = z.step(*(call("apply_patch", patch=p) for p in (git_diff, inside, marker)))["results"]
        z.close()
    for r in results:
        assert r["outcome"] == "blocked" and r["block_kind"] == "invalid_arguments", r["text"]
    assert "this is a unified diff, not an apply_patch patch" in results[0]["text"]
    assert "or apply the diff with shell (git apply)" in results[1]["text"]
    assert "line 6:" in results[2]["text"] and "is unified-diff syntax" in results[2]["text"]
    assert (workspace / "a.txt").read_text() == "x\n"


def test_bg_says_which_action_reads_what_when_the_two_are_mixed_up(workspace: Path) -> None:
    """bg output with the withheld-output path (or artifact with a job id) was told only that the
    other field was required; now the refusal names the action that reads what was given."""
    with Steps(workspace) as z:
        path = z.one("shell", command="seq 1 5000")["metadata"]["withheldOutput"]["outputPath"]
        by_path, path_as_id, by_id = z.step(
            call("bg", action="output", outputPath=path),
            call("bg", action="wait", taskID=path),
            call("bg", action="artifact", taskID="job_0123456789"),
        )["results"]
        z.close()
    for r in (by_path, path_as_id, by_id):
        assert r["outcome"] == "blocked" and r["block_kind"] == "invalid_arguments", r["text"]
    assert 'read it with action "artifact"' in by_path["text"]
    assert 'withheld output is read with action "artifact" and outputPath' in path_as_id["text"]
    assert 'read its output with action "output"' in by_id["text"]


def test_a_directory_offset_past_its_entries_is_said_like_a_files(workspace: Path) -> None:
    """read of a directory with an offset past its entries came back "ok" with only the header, as if
    the directory were empty; a file's says "offset N is past the end". Now both do."""
    (workspace / "d").mkdir()
    (workspace / "d" / "one").touch()
    (workspace / "empty").mkdir()
    with Steps(workspace) as z:
        past, empty, last = z.step(
            call("read", path="d", offset=50), call("read", path="empty"), call("read", path="d", offset=1)
        )["results"]
        z.close()
    assert past["outcome"] == "error" and "offset 50 is past the end of d/ (1 entry)" in past["text"]
    assert empty["outcome"] == "ok" and "(0 entries)" in empty["text"]
    assert last["outcome"] == "ok" and last["text"].endswith("one")


def test_a_multi_line_command_stays_one_line_in_job_listings(workspace: Path) -> None:
    """A here-document or a script run in the background has newlines in its label: bg list and
    job_list printed it across several lines (the next job's line looked like part of it), and so
    did the completion notice. Now its first line and how many more are shown."""
    script = "cat > /dev/null <<'EOF'\nline one\nline two\nEOF\necho done"
    with Steps(workspace) as z:
        jid = z.one("shell", command=script, run_in_background=True)["metadata"]["background"]["taskID"]
        z.one("shell", command="sleep 30", run_in_background=True)
        listed = z.one("bg", action="list")
        waited = z.step(call("bg", action="wait", taskID=jid))
        z.close()
    rows = listed["text"].splitlines()
    assert len(rows) == 2 and rows[0].startswith(jid), listed["text"]
    assert rows[0].endswith("cat > /dev/null <<'EOF' … (+4 lines)")
    assert listed["metadata"]["jobs"][0]["label"] == script  # the facts keep the whole command
    assert waited["results"][0]["metadata"]["status"] == "completed"
    with Steps(workspace, "--profile", "chord") as z:
        z.one("shell", command=script + "; sleep 30", run_in_background=True)
        chord = z.one("job_list")
        z.close()
    assert len(chord["text"].splitlines()) == 1 and chord["text"].endswith("(+4 lines)"), chord["text"]


def test_bg_artifact_given_a_commands_log_says_how_to_read_it(workspace: Path) -> None:
    """The shell result names its capture log (logPath); bg artifact on it was only "not an
    artifact Zuno saved". Now a job's log points at bg output with its id, a foreground one at read."""
    with Steps(workspace) as z:
        job = z.one("shell", command="echo hi", run_in_background=True)["metadata"]
        fore = z.one("shell", command="echo there")["metadata"]
        of_job, of_fore = z.step(
            call("bg", action="artifact", outputPath=job["logPath"]),
            call("bg", action="artifact", outputPath=fore["logPath"]),
        )["results"]
        z.close()
    jid = job["background"]["taskID"]
    assert of_job["block_kind"] == "invalid_arguments"
    assert f'read it with action "output", taskID "{jid}"' in of_job["text"]
    assert f'read it with read {{"path": "{fore["logPath"]}"}}' in of_fore["text"]


def test_chord_shell_output_over_16_kib_is_a_preview_and_the_log_path(workspace: Path) -> None:
    """The chord page: "Shell and background output over 16 KiB: the result shows a short preview
    and where the log file is". A foreground chord shell inlined up to 50 KiB (and withheld more
    behind an artifact notice); now it shows the last 2 KiB and the log, which holds every byte.
    The zuno profile keeps its own rule (inline up to tool_output, withheld beyond)."""
    cmd = "head -c 20000 /dev/zero | tr '\\0' a; echo; seq 1 300"
    with Steps(workspace, "--profile", "chord") as z:
        chord = z.one("shell", command=cmd)
        z.close()
    with Steps(workspace) as z:
        plain = z.one("shell", command=cmd)
        z.close()
    assert chord["outcome"] == "ok" and "withheldOutput" not in chord["metadata"]
    log = chord["metadata"]["logPath"]
    assert chord["text"].startswith(
        f"[output is 21093 bytes, over 16384: showing the last {chord['metadata']['preview']['bytes']} bytes; "
        f"the whole log is {log}"
    )
    assert "\n300\n[exit 0 · passed" in chord["text"] and len(chord["text"]) < 3000
    assert (workspace / log).read_bytes() == b"a" * 20000 + b"\n" + "".join(f"{i}\n" for i in range(1, 301)).encode()
    assert "output is" not in plain["text"] and plain["text"].startswith("a" * 20000)
