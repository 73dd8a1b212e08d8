"""Pre-dispatch hooks: commands from the config that see a call before it runs and may refuse it.

A hook gets the call as JSON on stdin: ``{"session", "call_id", "tool", "arguments",
"declarations"}``. Exit 0 lets the call through, unless stdout is a JSON object with
``"decision": "deny"`` (its ``"reason"`` is given to the model). Any other exit refuses the call,
with stderr (or stdout) as the reason. A hook that cannot be started or does not answer within
its timeout refuses the call too: hooks fail closed. A hook runs with Zuno's environment minus
the private ``ZUNO_*`` namespace (:mod:`zuno.process.environment`), like every process Zuno starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

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


async def run_hook(hook: HookConfig, payload: dict[str, Any], cwd: Path) -> HookVerdict:
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
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(json.dumps(payload).encode()), timeout=hook.timeout_ms / 1000
        )
    except TimeoutError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await proc.wait()
        return HookVerdict(
            False, f"pre-dispatch hook {label!r} did not answer within {hook.timeout_ms} ms; the call was refused."
        )
    except asyncio.CancelledError:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        raise
    text_out = out.decode("utf-8", "replace").strip()
    text_err = err.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        reason = text_err or text_out or f"exit status {proc.returncode}"
        return HookVerdict(False, f"refused by pre-dispatch hook {label!r}: {_sentence(reason)}")
    if text_out.startswith("{"):
        try:
            verdict = json.loads(text_out)
        except json.JSONDecodeError:
            verdict = {}
        if isinstance(verdict, dict) and verdict.get("decision") == "deny":
            reason = verdict.get("reason")
            if reason is None or reason == "":
                reason = "it gave no reason"
            elif not isinstance(reason, str):
                reason = json.dumps(reason, ensure_ascii=False)  # as the hook sent it, in JSON
            return HookVerdict(False, f"refused by pre-dispatch hook {label!r}: {_sentence(reason)}")
    return HookVerdict(True)
