"""The process layer: the guard, exit statuses, capture, group truth, stop, Zuno's death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zuno import limits
from zuno.process import GUARD_DIAG_PREFIX, CommandSpec, RunningCommand, procfs, start

SRC = Path(__file__).resolve().parents[1] / "src"


def spec(tmp_path: Path, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CommandSpec:
    return CommandSpec(list(argv), cwd or tmp_path, env or dict(os.environ), tmp_path / "logs", label="t")


async def run(tmp_path: Path, *argv: str, **kw) -> RunningCommand:  # type: ignore[no-untyped-def]
    r = await start(spec(tmp_path, *argv, **kw))
    assert await r.wait(30) is not None
    return r


def alive(pid: int) -> bool:
    st = procfs.stat(pid)
    return st is not None and st[2] != "Z"


async def test_exit_code_and_merged_exact_bytes(tmp_path: Path) -> None:
    r = await run(tmp_path, "bash", "-c", r"printf 'out\n'; printf 'err\xff\n' >&2; printf 'b\x00c'; exit 3")
    assert r.exit is not None
    assert (r.exit.returncode, r.exit.signal, r.exit.guard_diagnostic, r.exit.settled) == (3, None, None, True)
    assert r.read_all() == b"out\nerr\xff\nb\x00c"
    assert r.log_path.read_bytes() == b"out\nerr\xff\nb\x00c"
    assert r.total_written == len(b"out\nerr\xff\nb\x00c")
    assert not r.group_alive()
    assert r.pid == r.pgid and r.pid != os.getpgid(0)


async def test_guard_codes_carry_the_guards_own_line(tmp_path: Path) -> None:
    r = await run(tmp_path, "no-such-program-zuno")
    assert r.exit and r.exit.returncode == 127 and r.exit.guard_failed
    assert r.exit.guard_diagnostic and r.exit.guard_diagnostic.startswith(f"{GUARD_DIAG_PREFIX} 127:")
    assert r.read_all().decode().startswith(f"{GUARD_DIAG_PREFIX} 127:")

    noexec = tmp_path / "script.sh"
    noexec.write_text("#!/bin/sh\necho hi\n")
    noexec.chmod(0o644)
    r = await run(tmp_path, str(noexec))
    assert r.exit and r.exit.returncode == 126 and r.exit.guard_diagnostic

    r = await run(tmp_path, "true", cwd=tmp_path / "missing-dir")
    assert r.exit and r.exit.returncode == 125 and r.exit.guard_diagnostic
    assert "working directory" in r.exit.guard_diagnostic


async def test_a_command_cannot_forge_the_guard_line(tmp_path: Path) -> None:
    forged = f"{GUARD_DIAG_PREFIX} 125: the guard failed"
    for code in (125, 126, 127):
        r = await run(tmp_path, "bash", "-c", f"echo '{forged}' >&2; exit {code}")
        assert r.exit and r.exit.returncode == code
        assert r.exit.guard_diagnostic is None and not r.exit.guard_failed
    # bash's own "command not found" is bash's verdict, not the guard's
    r = await run(tmp_path, "bash", "-c", "no-such-program-zuno")
    assert r.exit and r.exit.returncode == 127 and r.exit.guard_diagnostic is None


async def test_killed_by_a_signal_has_no_exit_code(tmp_path: Path) -> None:
    r = await run(tmp_path, "bash", "-c", "kill -KILL $$")
    assert r.exit and r.exit.returncode is None and r.exit.signal == signal.SIGKILL


async def test_sigpipe_is_default_in_the_command(tmp_path: Path) -> None:
    # Python ignores SIGPIPE; the command must not inherit that (yes | head must end).
    r = await run(tmp_path, "bash", "-c", "set -o pipefail; yes | head -1; echo ${PIPESTATUS[0]}")
    assert r.read_all() == b"y\n141\n"


async def test_environment_and_cwd_are_the_specs(tmp_path: Path) -> None:
    d = tmp_path / "sub"
    d.mkdir()
    r = await run(tmp_path, "bash", "-c", 'echo "$FOO:$PWD"', cwd=d, env={"PATH": os.environ["PATH"], "FOO": "bar"})
    assert r.read_all() == f"bar:{d}\n".encode()


async def test_lingering_member_keeps_the_group_alive(tmp_path: Path) -> None:
    r = await start(spec(tmp_path, "bash", "-c", "(sleep 0.6; echo late) & echo early"))
    info = await r.wait(10)
    assert info and info.returncode == 0
    assert r.group_alive()
    assert len(r.recorded_members) >= 1
    assert await r.wait_group(15)
    assert not r.group_alive()
    assert await r.wait_capture(5)
    assert r.read_all() == b"early\nlate\n"


async def test_stop_kills_the_whole_group_with_grandchildren(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    r = await start(
        spec(
            tmp_path,
            "bash",
            "-c",
            f"sleep 300 & echo $! >> {pids}; bash -c 'sleep 300 & echo $! >> {pids}; wait' & wait",
        )
    )
    for _ in range(100):
        if pids.exists() and len(pids.read_text().split()) == 2:
            break
        await _sleep(0.05)
    members = [int(p) for p in pids.read_text().split()]
    assert all(alive(p) for p in members)
    res = await r.stop("cancel")
    assert res.signalled and res.group_exited and res.signals == ("SIGTERM",)
    # The group's end and the guard's exit report of its leader arrive apart: wait for the report,
    # as the callers of stop() do.
    info = await r.wait(5)
    assert info and info.killed_by == "cancel" and info.signal == signal.SIGTERM
    assert not any(alive(p) for p in members)


async def test_stop_escalates_to_kill(tmp_path: Path) -> None:
    r = await start(spec(tmp_path, "bash", "-c", "trap '' TERM; sleep 300 & trap '' TERM; wait; wait"))
    await _sleep(0.2)
    res = await r.stop("timeout", grace=0.3)
    assert res.signals == ("SIGTERM", "SIGKILL") and res.group_exited
    info = await r.wait(5)
    assert info and info.killed_by == "timeout"


async def test_stop_refuses_a_group_it_cannot_prove(tmp_path: Path) -> None:
    r = await start(spec(tmp_path, "bash", "-c", "sleep 300 & exit 0"))
    assert await r.wait(10)
    assert r.group_alive() and r.recorded_members
    member = r.recorded_members[0][0]
    # Pretend what was recorded at exit no longer matches /proc (as after pid reuse).
    real = r._members
    r._members = [(pid, start + 1) for pid, start in real]
    res = await r.stop("kill", grace=0.2)
    assert not res.signalled and not res.group_exited
    assert "could not confirm" in res.message
    assert alive(member)
    r._members = real
    res = await r.stop("kill", grace=1)
    assert res.signalled and res.group_exited and not alive(member)


async def test_windows_memory_and_disk_across_the_tail(tmp_path: Path) -> None:
    size = limits.PROCESS_MEMORY_TAIL + limits.PROCESS_READ_CHUNK + 700_000
    r = await run(
        tmp_path,
        sys.executable,
        "-c",
        f"import sys; sys.stdout.buffer.write(bytes(48 + i % 75 for i in range({size})))",
    )
    expected = bytes(48 + i % 75 for i in range(size))
    assert r.total_written == size
    # At least the most recent 2 MiB stay in memory, and at most one read chunk more.
    assert size - limits.PROCESS_MEMORY_TAIL - limits.PROCESS_READ_CHUNK <= r.memory_start
    assert r.memory_start <= size - limits.PROCESS_MEMORY_TAIL
    w, disk = r.window(None, None, from_end=True)
    assert not disk and w.cursor == size and w.window_from == size - limits.WINDOW_DEFAULT_LIMIT
    w, disk = r.window(0, 51_200, from_end=True)
    assert disk and w.data == expected[:51_200] and w.window_from == 0 and not w.has_earlier
    # forward through everything; the boundary window straddles memory_start (served from disk)
    got, cursor, sources = bytearray(), 0, set()
    while True:
        w, disk = r.window(cursor, 999_999, from_end=True)
        sources.add(disk)
        got += w.data
        cursor = w.cursor
        if not w.has_more:
            break
    assert bytes(got) == expected and sources == {True, False}


async def test_output_written_in_small_pieces_is_captured_exactly(tmp_path: Path) -> None:
    """Reads of every size land in the ring tail and the log without a byte lost or reordered."""
    size = limits.PROCESS_MEMORY_TAIL * 2 + 12_345
    script = (
        "import os, random\n"
        f"r = random.Random(3); data = bytes(r.randrange(256) for _ in range({size})); i = 0\n"
        "while i < len(data):\n"
        "    n = r.choice([1, 7, 4096, 65536, 300000]); os.write(1, data[i:i+n]); i += n\n"
    )
    r = await run(tmp_path, sys.executable, "-c", script)
    import random

    rng = random.Random(3)
    expected = bytes(rng.randrange(256) for _ in range(size))
    assert r.total_written == size and r.read_all() == expected
    assert r.memory_start == size - limits.PROCESS_MEMORY_TAIL
    assert r.read_range(r.memory_start, size) == expected[-limits.PROCESS_MEMORY_TAIL :]


async def test_released_memory_serves_every_window_from_disk(tmp_path: Path) -> None:
    r = await run(tmp_path, "bash", "-c", "seq 1 20000")
    expected = b"".join(b"%d\n" % i for i in range(1, 20001))
    await r.wait_capture(10)
    w, disk = r.window(None, None, from_end=True)
    assert not disk
    r.release_memory()
    assert r.memory_start == r.total_written == len(expected)
    w, disk = r.window(None, None, from_end=True)
    assert disk and expected.endswith(w.data)
    assert r.read_range(0, 10) == expected[:10]


async def test_a_flooding_group_member_does_not_hold_back_the_leaders_exit(tmp_path: Path) -> None:
    """A member that keeps the capture pipe full must not keep the guard's status pipe unread."""
    flood = "for i in 1 2 3; do (dd if=/dev/zero bs=1M status=none) & done; sleep 0.1; exit 0"
    r = await start(spec(tmp_path, "bash", "-c", flood))
    try:
        info = await r.wait(20)
        assert info is not None and info.returncode == 0
        assert r.group_alive() and not r.capture_done  # the member still floods
    finally:
        await r.stop("test")
        await r.wait_capture(20)
        await r.close()
        r.log_path.unlink()


async def test_a_drain_stops_at_its_budget_when_the_source_never_runs_dry(tmp_path: Path) -> None:
    """The pump drains the capture with a budget: a source that never runs dry (here a 20 MiB file,
    which never says EAGAIN) is read a budget at a time, so the status pipe gets its turn."""
    r = await run(tmp_path, "true")
    src = tmp_path / "src.bin"
    src.write_bytes(bytes(range(256)) * (20 * 4096))
    fd = os.open(src, os.O_RDONLY)
    r._log_fd = os.open(os.devnull, os.O_WRONLY)  # the ended command's log is closed; write nowhere
    before = r.total_written
    try:
        assert r._capture(fd, limits.PROCESS_DRAIN_BUDGET) is True  # more to read: not at end-of-file
        taken = r.total_written - before
        assert limits.PROCESS_DRAIN_BUDGET <= taken < limits.PROCESS_DRAIN_BUDGET + limits.PROCESS_READ_CHUNK
    finally:
        os.close(fd)
        os.close(r._log_fd)
        await r.close()


def test_a_failed_log_write_ends_paging_instead_of_looping(tmp_path: Path) -> None:
    """When the log cannot be written (here: a file-size limit), windows served from disk end where
    the log ends: a client paging by cursor stops instead of getting empty windows forever."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, resource, sys
        sys.path.insert(0, {str(SRC)!r})
        from pathlib import Path
        from zuno.process import CommandSpec, start

        async def main():
            d = Path({str(tmp_path)!r})
            resource.setrlimit(resource.RLIMIT_FSIZE, (5 << 20, resource.RLIM_INFINITY))
            r = await start(CommandSpec(["head", "-c", str(10 << 20), "/dev/zero"], d, dict(os.environ), d / "logs"))
            info = await r.wait(30)
            await r.wait_capture(30)
            cursor, pages = 0, 0
            while True:
                w, _ = r.window(cursor, 999_999, from_end=False)
                pages += 1
                assert pages < 1000, "paging never ends"  # 5 MiB in windows of at most 50 KiB: ~103
                cursor = w.cursor
                if not w.has_more:
                    break
            print(info.settled, r.total_written, cursor, os.path.getsize(r.log_path))
            await r.close()

        asyncio.run(main())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    settled, total, cursor, size = out.stdout.split()
    assert settled == "False"  # the capture broke: the status is not a verdict
    assert int(total) == 10 << 20 and int(cursor) == int(size) == 5 << 20


async def _sleep(s: float) -> None:
    import asyncio

    await asyncio.sleep(s)


def test_killed_zuno_leaves_no_survivors(tmp_path: Path) -> None:
    """A process using the process layer is killed with SIGKILL: the command's whole tree dies."""
    pids = tmp_path / "pids"
    script = tmp_path / "holder.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, os, sys
            from pathlib import Path
            from zuno.process import CommandSpec, start
            async def main():
                r = await start(CommandSpec(["bash", "-c", "sleep 300 & echo $! >> {pids}; "
                    "setsid -f sleep 2 ; bash -c 'sleep 300 & echo $! >> {pids}; wait' & wait"],
                    Path("{tmp_path}"), dict(os.environ), Path("{tmp_path}/logs")))
                print(r.pgid, flush=True)
                await asyncio.sleep(300)
            asyncio.run(main())
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    pgid = int(proc.stdout.readline())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (pids.exists() and len(pids.read_text().split()) == 2):
        time.sleep(0.05)
    members = [int(p) for p in pids.read_text().split()]
    assert procfs.group_exists(pgid) and all(alive(p) for p in members)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (procfs.group_exists(pgid) or any(alive(p) for p in members)):
        time.sleep(0.05)
    assert not procfs.group_exists(pgid)
    assert not any(alive(p) for p in members)


@pytest.mark.parametrize("n", [20])
async def test_many_commands_in_parallel(tmp_path: Path, n: int) -> None:
    import asyncio

    rs = await asyncio.gather(*(start(spec(tmp_path, "bash", "-c", f"echo {i}")) for i in range(n)))
    infos = await asyncio.gather(*(r.wait(30) for r in rs))
    assert all(i and i.returncode == 0 for i in infos)
    assert [r.read_all() for r in rs] == [f"{i}\n".encode() for i in range(n)]


async def test_direct_guard_without_the_fork_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zuno.process as zp

    monkeypatch.setattr(zp, "USE_GUARD_SERVER", False)
    r = await run(tmp_path, "bash", "-c", "echo direct; exit 4")
    assert r.exit and r.exit.returncode == 4 and r.read_all() == b"direct\n" and r._proc is not None
    r = await run(tmp_path, "no-such-program-zuno")
    assert r.exit and r.exit.returncode == 127 and r.exit.guard_diagnostic
    r = await start(spec(tmp_path, "bash", "-c", "sleep 300 & exit 0"))
    assert await r.wait(10) and r.group_alive()
    res = await r.stop("kill")
    assert res.group_exited and not r.group_alive()


async def test_fork_server_guard_reports_its_pid_and_survives_a_server_restart(tmp_path: Path) -> None:
    import zuno.process as zp

    zp.prestart()
    r = await run(tmp_path, "true")
    assert r.guard_pid and r._proc is None  # forked by the server
    server = zp._server.proc
    assert server is not None
    server.kill()
    server.wait()
    r = await run(tmp_path, "bash", "-c", "echo again")  # a new server (or a direct guard) takes over
    assert r.exit and r.exit.returncode == 0 and r.read_all() == b"again\n"


async def test_arguments_and_environment_keep_undecodable_bytes(tmp_path: Path) -> None:
    arg = os.fsdecode(b"caf\xe9")
    env = {"PATH": os.environ["PATH"], "ODD": os.fsdecode(b"\xff\xfe")}
    r = await run(tmp_path, "bash", "-c", 'printf "%s|%s" "$1" "$ODD"', "x", arg, env=env)
    assert r.read_all() == b"caf\xe9|\xff\xfe"


async def test_exit_is_reported_while_a_member_writes_without_end(tmp_path: Path) -> None:
    r = await start(spec(tmp_path, "bash", "-c", "yes & echo leader-done"))
    info = await r.wait(20)
    assert info is not None and info.returncode == 0 and r.group_alive()
    res = await r.stop("kill")
    assert res.group_exited
