"""Pre-dispatch hooks: commands from the config that see a call before it runs and may refuse it.

A hook gets the call as JSON on stdin: ``{"session", "call_id", "tool", "arguments",
"declarations"}``. Exit 0 lets the call through, unless stdout is a JSON object with
``"decision": "deny"`` (its ``"reason"`` is given to the model). Any other exit refuses the call,
with stderr (or stdout) as the reason. A hook that cannot be started or does not answer within
its timeout refuses the call too: hooks fail closed. The verdict is taken when the hook exits;
what it left running is stopped then, and at most ``limits.HOOK_OUTPUT_MAX_BYTES`` of each stream
is kept (the rest is read away and counted). A hook runs with Zuno's environment minus
the private ``ZUNO_*`` namespace (:mod:`zuno.process.environment`), like every process Zuno starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from zuno import limits
from zuno.config import HookConfig
from zuno.process.environment import withheld_environment


@dataclass(frozen=True, slots=True)
class HookVerdict:
    allowed: bool
    reason: str = ""


def _sentence(text: str) -> str:
    """The hook's own words, ended as a sentence (the dispatcher's "Nothing ran." follows)."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def applies(hook: HookConfig, tool: str) -> bool:
    return any(fnmatchcase(tool, pat) for pat in hook.tools)


class _Output:
    """What a hook wrote to one pipe: the first ``limits.HOOK_OUTPUT_MAX_BYTES`` kept, the rest
    counted and read away (the hook never blocks on a full pipe, and a flood costs no memory)."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.total = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            room = limits.HOOK_OUTPUT_MAX_BYTES - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]

    def text(self) -> str:
        text = self.kept.decode("utf-8", "replace").strip()
        if self.total > len(self.kept):
            text += f" [… the hook wrote {self.total} bytes; the first {len(self.kept)} are shown]"
        return text


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """The call to the hook's stdin, then end of file; a hook that exits without reading it all is
    not an error (it decides by its exit status)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.close()
        await stdin.wait_closed()


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Until the hook process itself has exited. (``Process.wait()`` also waits for its pipes to
    close, which a process it left behind keeps open.) Its status is set by the loop's child
    watcher; looked at every few milliseconds."""
    pause = 0.001
    while proc.returncode is None:
        await asyncio.sleep(pause)
        pause = min(pause * 2, limits.HOOK_EXIT_POLL_MAX_S)


def _stop_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_hook(hook: HookConfig, payload: dict[str, Any], cwd: Path) -> HookVerdict:
    """Runs the hook and decides by what it did: its exit status and what it wrote, once it has
    exited. Processes it left behind in its group (a daemon it started, which would hold its pipes
    open) are stopped then: the verdict never waits on them, and nothing it started outlives it."""
    argv = hook.command if isinstance(hook.command, list) else ["/bin/sh", "-c", hook.command]
    label = hook.command if isinstance(hook.command, str) else shlex.join(hook.command)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=withheld_environment(),  # Zuno's private namespace is withheld from hooks too
        )
    except OSError as e:
        why = e.strerror or "it could not be executed"
        return HookVerdict(False, f"pre-dispatch hook {label!r} could not start ({why}); the call was refused.")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = _Output(), _Output()
    tasks = [
        asyncio.ensure_future(_feed(proc.stdin, json.dumps(payload).encode())),
        asyncio.ensure_future(out.drain(proc.stdout)),
        asyncio.ensure_future(err.drain(proc.stderr)),
    ]
    try:
        async with asyncio.timeout(hook.timeout_ms / 1000):
            await _exited(proc)
            _stop_group(proc.pid)  # what it left behind: its pipes close with them
            await asyncio.wait(tasks[1:], timeout=limits.HOOK_PIPE_GRACE_S)
    except TimeoutError:
        _stop_group(proc.pid)
        await proc.wait()
        return HookVerdict(
            False, f"pre-dispatch hook {label!r} did not answer within {hook.timeout_ms} ms; the call was refused."
        )
    finally:
        _stop_group(proc.pid)  # (cancelled: the hook and its group end with the call)
        for t in tasks:
            t.cancel()
    text_out = out.text()
    text_err = err.text()
    if proc.returncode != 0:
        reason = text_err or text_out or f"exit status {proc.returncode}"
        return HookVerdict(False, f"refused by pre-dispatch hook {label!r}: {_sentence(reason)}")
    if text_out.startswith("{"):
        # An answer that cannot be read is not a yes: it may be a deny (hooks fail closed).
        if out.total > len(out.kept):
            return HookVerdict(
                False,
                f"pre-dispatch hook {label!r} answered with {out.total} bytes, over the "
                f"{limits.HOOK_OUTPUT_MAX_BYTES} a hook's answer may hold; the call was refused.",
            )
        try:
            verdict = json.loads(text_out)
        except json.JSONDecodeError as e:
            return HookVerdict(
                False,
                f"pre-dispatch hook {label!r} answered with an object that is not valid JSON ({e.msg} at "
                f"character {e.pos}); the call was refused. A hook allows a call by exiting 0 with no such "
                'object, and refuses it with {"decision": "deny", "reason": "..."}.',
            )
        if isinstance(verdict, dict) and verdict.get("decision") == "deny":
            reason = verdict.get("reason")
            if reason is None or reason == "":
                reason = "it gave no reason"
            elif not isinstance(reason, str):
                reason = json.dumps(reason, ensure_ascii=False)  # as the hook sent it, in JSON
            return HookVerdict(False, f"refused by pre-dispatch hook {label!r}: {_sentence(reason)}")
    return HookVerdict(True)
