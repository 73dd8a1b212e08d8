"""Read receipts and typed mutation conflicts, shared by every tool that changes files.

A read receipt says: in this session, the file at this path was seen with exactly these bytes
(SHA-256) at read generation N. A mutation of an existing file needs a receipt that still
matches the file; otherwise it is a typed, model-correctable conflict and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from zuno.tool import ToolContext, ToolOutput

ConflictKind = Literal["ReadRequired", "StaleRead", "ContextMismatch", "IdenticalReplay"]

REQUIRED_ACTION: dict[str, str] = {
    "ReadRequired": "Read the named resource before constructing a mutation.",
    "StaleRead": "Read the current file and rebuild the operation from that content.",
    "ContextMismatch": "Read the named hunk area and generate a smaller patch with fresh, unique context.",
    "IdenticalReplay": "Do not resend it; revise the operation, or wait for a real file change and read again.",
}


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Conflict:
    kind: ConflictKind
    resource: str
    operation_digest: str
    current_digest: str | None
    hunk: dict[str, Any] | None = None
    detail: str = ""
    # The concrete next call the recovery starts with (a read of the resource, at the hunk's
    # area when there is one); None when the recovery is not a call (IdenticalReplay).
    suggested_call: dict[str, Any] | None = None

    @property
    def required_action(self) -> str:
        return REQUIRED_ACTION[self.kind]

    def to_metadata(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "resource": self.resource,
            "operationDigest": self.operation_digest,
            "currentDigest": self.current_digest,
            "hunk": self.hunk,
            "requiredAction": self.required_action,
            "suggestedCall": self.suggested_call,
        }

    def to_output(self) -> ToolOutput:
        where = ""
        if self.hunk:
            where = f" (hunk {self.hunk.get('number')}" + (
                f" {self.hunk['title']!r})" if self.hunk.get("title") else ")"
            )
        text = (
            f"[conflict: {self.kind}] {self.resource}{where}: {self.detail or self.kind}. "
            f"Nothing was written. Required action: {self.required_action}"
        )
        if self.suggested_call:
            text += f" Next: {self.suggested_call['name']} {json.dumps(self.suggested_call['arguments'])}"
        return ToolOutput.failure(text, conflict=self.to_metadata())


def receipt_key(ctx: ToolContext, path: Path) -> str:
    return str(path)


def record_read(ctx: ToolContext, path: Path, data: bytes, st: os.stat_result | None = None) -> int:
    """Record a read receipt for the exact bytes this session saw; returns the generation."""
    return record_seen(ctx, path, sha256_hex(data), len(data), st)


def record_seen(
    ctx: ToolContext, path: Path, digest: str, size: int, st: os.stat_result | None = None
) -> int:
    """Record a read receipt from a digest made while streaming (the bytes were never held).
    ``st`` is the status of the descriptor that was read; without it the name is looked up."""
    if st is None:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            st = None
    mtime_ns = st.st_mtime_ns if st is not None else 0
    return ctx.store.put_read_receipt(ctx.session_id, receipt_key(ctx, path), digest, size, mtime_ns, ctx.call_seq)


def read_call(shown: str, offset: int | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"path": shown}
    if offset is not None:
        arguments["offset"] = max(1, offset)
        arguments["limit"] = 60
    return {"name": "read", "arguments": arguments}


def check_fresh(ctx: ToolContext, path: Path, current: bytes, operation_digest: str) -> Conflict | None:
    """ReadRequired when this session never read the file; StaleRead when it changed since."""
    return check_fresh_digest(ctx, path, sha256_hex(current), operation_digest)


def check_fresh_digest(ctx: ToolContext, path: Path, current_digest: str, operation_digest: str) -> Conflict | None:
    """check_fresh from the SHA-256 of the current bytes (streamed; the bytes need not be held)."""
    receipt = ctx.store.read_receipt(ctx.session_id, receipt_key(ctx, path))
    shown = ctx.workspace.display(path)
    if receipt is None:
        return Conflict(
            "ReadRequired",
            shown,
            operation_digest,
            current_digest,
            detail="this session has no read receipt for the file",
            suggested_call=read_call(shown),
        )
    if receipt["sha256"] != current_digest:
        return Conflict(
            "StaleRead",
            shown,
            operation_digest,
            current_digest,
            detail=f"the file changed after read generation {receipt['generation']}",
            suggested_call=read_call(shown),
        )
    return None


def changed_on_write(ctx: ToolContext, path: Path, current_digest: str, operation_digest: str) -> Conflict:
    """StaleRead for a file that passed check_fresh but was found changed on the descriptor about
    to be written (another process wrote it in between): nothing was written."""
    shown = ctx.workspace.display(path)
    return Conflict(
        "StaleRead",
        shown,
        operation_digest,
        current_digest,
        detail="the file changed between the check and the write (another writer); nothing was written",
        suggested_call=read_call(shown),
    )
