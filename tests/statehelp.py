"""Helpers for the durable-state tests: drive calls through Session.step and read JSON bodies."""

from __future__ import annotations

import json
from typing import Any

from zuno.records import CallRecord


async def call(session: Any, name: str, arguments: dict[str, Any] | None = None, id: str | None = None) -> CallRecord:
    raw: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if id is not None:
        raw["id"] = id
    (rec,) = (await session.step([raw])).results
    return rec


def body(rec: CallRecord) -> Any:
    """The JSON a state tool returned (after its one status line, for an update)."""
    text = rec.text
    if text.startswith("["):
        text = text.split("\n", 1)[1]
    return json.loads(text)
