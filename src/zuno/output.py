"""Output limits and withholding, and the artifacts that keep every byte.

Output over ``tool_output.max_bytes`` or ``max_lines`` is withheld, never truncated: its exact
bytes are saved first as an artifact, and the model gets a notice naming the measured size, the
limit crossed, the artifact and its size, and the read that gets it back. The call still
succeeds. ``accept_large_output: true`` inlines it instead (a deliberate back door).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zuno.config import ToolOutputConfig
from zuno.line_count import count_lines
from zuno.store import Store
from zuno.tool import ToolOutput
from zuno.workspace import ARTIFACTS_DIR, Workspace


@dataclass(frozen=True, slots=True)
class SavedArtifact:
    path: str  # relative to the workspace root, as the model names it
    size: int
    sha256: str


class Artifacts:
    """Saves exact bytes under ``.zuno/artifacts/<session>/`` and records them in the store."""

    def __init__(self, workspace: Workspace, store: Store) -> None:
        self.workspace = workspace
        self.store = store

    def directory(self, session_id: str) -> Path:
        d = self.workspace.ensure_state_dir() / ARTIFACTS_DIR / session_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def save(self, session_id: str, call_seq: int | None, stem: str, data: bytes, kind: str) -> SavedArtifact:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", stem)[:80] or "output"
        target = self.directory(session_id) / f"{call_seq or 0:06d}-{safe}.out"
        tmp = target.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        return self.register(session_id, call_seq, target, kind, scan_bytes(data))

    def register(
        self, session_id: str, call_seq: int | None, target: Path, kind: str, scanned: FileScan | None = None
    ) -> SavedArtifact:
        """Record a file that already holds an output's exact bytes (a shell log, say). ``scanned``
        is a scan of that file already made, so a large log is read once, not twice."""
        scan = scanned or scan_file(target)
        rel = self.workspace.display(target)
        self.store.record_artifact(session_id, call_seq, rel, kind, scan.size, scan.sha256)
        return SavedArtifact(rel, scan.size, scan.sha256)


@dataclass(frozen=True, slots=True)
class FileScan:
    size: int
    lines: int
    sha256: str


def scan_bytes(data: bytes) -> FileScan:
    """What scan_file would say of a file holding exactly ``data`` (no re-read of what was written)."""
    return FileScan(len(data), count_lines(data), hashlib.sha256(data).hexdigest())


def scan_file(path: Path) -> FileScan:
    """Bytes, lines and SHA-256 of a file, in one streamed pass."""
    h = hashlib.sha256()
    size = newlines = 0
    last = b""
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    return FileScan(size, newlines + (1 if size and last != b"\n" else 0), h.hexdigest())


def render(out: ToolOutput, body: str) -> str:
    return "\n".join(part for part in (out.head, body, out.tail) if part)


def apply_limits(
    out: ToolOutput,
    *,
    limits: ToolOutputConfig,
    accept_large_output: bool,
    artifacts: Artifacts,
    session_id: str,
    call_seq: int,
    call_id: str,
    artifact_reader: str,
) -> tuple[str, dict[str, Any]]:
    """Decide what the model sees for one output. Returns (text, metadata)."""
    metadata = dict(out.metadata)
    if out.bounded:
        return render(out, out.text), metadata
    if accept_large_output:
        if out.raw_path is not None and out.raw is None and not out.text:
            return render(out, out.body_bytes().decode("utf-8", "replace")), metadata
        return render(out, out.text), metadata
    data = b""
    scan: FileScan | None = None
    if out.raw_path is not None and out.raw is None:
        scan = scan_file(out.raw_path)
        size, lines = scan.size, scan.lines
    else:
        data = out.body_bytes()
        size, lines = len(data), count_lines(data)
    crossed: list[tuple[str, int, int]] = []
    if size > limits.max_bytes:
        crossed.append(("tool_output.max_bytes", limits.max_bytes, size))
    if lines > limits.max_lines:
        crossed.append(("tool_output.max_lines", limits.max_lines, lines))
    if not crossed:
        if out.raw_path is not None and out.raw is None and not out.text:
            return render(out, out.body_bytes().decode("utf-8", "replace")), metadata
        return render(out, out.text), metadata
    if out.raw_path is not None and out.raw is None:
        saved = artifacts.register(session_id, call_seq, out.raw_path, kind="withheld-output", scanned=scan)
    else:
        saved = artifacts.save(session_id, call_seq, call_id, data, kind="withheld-output")
    if artifact_reader == "bg":
        read = {"name": "bg", "arguments": {"action": "artifact", "outputPath": saved.path}}
    else:
        read = {"name": "read", "arguments": {"path": saved.path}}
    limit_text = "; ".join(f"{name} = {lim} (measured {measured})" for name, lim, measured in crossed)
    notice = (
        f"[output withheld: {size} bytes, {lines} lines; over {limit_text}. Nothing was truncated or lost: "
        f"every byte is saved in {saved.path} ({saved.size} bytes). Read it back in windows with "
        f"{read['name']} {json.dumps(read['arguments'])}"
        + (", passing the returned cursor to continue" if artifact_reader == "bg" else "")
        + ". accept_large_output: true re-runs the call and inlines it, spending the context this limit protects.]"
    )
    outputs = list(metadata.get("outputPaths", []))
    outputs.append(saved.path)
    metadata["outputPaths"] = outputs
    metadata["withheldOutput"] = {
        "outputPath": saved.path,
        "bytes": size,
        "lines": lines,
        "sha256": saved.sha256,
        "limits": [{"limit": name, "value": lim, "measured": measured} for name, lim, measured in crossed],
        "read": read,
    }
    return render(out, notice), metadata
