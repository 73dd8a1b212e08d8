"""A Zuno step result as an MCP tools/call result: the record's exact text, an image the call
loaded for the model (``view_image``) as an image block, its typed facts as structuredContent (the
same shape for every outcome), and the step's notices once."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from zuno.declarations import Outcome
from zuno.records import StepResult

# The typed facts lifted out of a record's metadata to the top of structuredContent.
LIFTED = ("receipt", "writtenPaths", "outputPaths", "withheldOutput", "conflict")


def _image(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The image a call loaded for the model (``view_image``: ``metadata.image``), or None."""
    image = meta.get("image")
    return image if isinstance(image, dict) and isinstance(image.get("base64"), str) and image["base64"] else None


def structured(result: StepResult) -> dict[str, Any]:
    rec = result.results[0]
    meta = rec.metadata
    image = _image(meta)
    if image is not None:
        # The pixels travel once, as an image content block; the facts about them stay here.
        meta = {**meta, "image": {k: v for k, v in image.items() if k != "base64"}}
    out: dict[str, Any] = {
        "outcome": str(rec.outcome),
        "block_kind": str(rec.block_kind) if rec.block_kind else None,
        "cancelled": rec.cancelled,
        "call_id": rec.call_id,
        "session": result.session,
        "step": result.step,
        "declarations": rec.declarations.as_dict(),
        "metadata": meta,
        "notices": result.notices,
        "started_at": rec.started_at,
        "ended_at": rec.ended_at,
    }
    for key in LIFTED:
        if key in meta:
            out[key] = meta[key]
    return out


def notice_text(notice: dict[str, Any]) -> str:
    return f"[notice: {notice.get('kind', 'notice')}] {notice.get('text', '')}"


def call_tool_result(result: StepResult) -> types.CallToolResult:
    rec = result.results[0]
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=rec.text)]
    image = _image(rec.metadata)
    if image is not None:
        content.append(
            types.ImageContent(type="image", data=image["base64"], mime_type=str(image.get("mime") or "image/png"))
        )
    content += [types.TextContent(type="text", text=notice_text(n)) for n in result.notices]
    return types.CallToolResult(
        content=content,
        structured_content=structured(result),
        is_error=rec.outcome is not Outcome.ok,
    )


def failure_result(text: str) -> types.CallToolResult:
    """A call Zuno could not take at all (the session is gone, the store failed): still a result
    the model sees, never an opaque protocol error."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content={
            "outcome": "error",
            "block_kind": None,
            "cancelled": False,
            "declarations": {},
            "metadata": {},
            "notices": [],
        },
        is_error=True,
    )
