"""The model's own durable state is always seen inline.

What plan_get, todo_get, goal_get and memory_read return (and an update's result, after its one
head line) must fit the output limits (tool_output.max_bytes / max_lines): withheld into a file,
the model would no longer see its own Plan, list, Goal or memory. Each bound on a field alone
(a title of 500 characters, notes of 4000, 500 steps) does not add up to that, so every mutation
is measured as the document will render — counted as large as the changes that need no new text
could still make it (a status set, a step adopted) — and refused when it would grow past
``budget`` (the configured limits, never more than the defaults, less ``HEAD_ALLOWANCE_BYTES``
and one line for the head line). A change that does not grow an over-budget document (one made
before the limits were lowered) stays allowed.
"""

from __future__ import annotations

import json
from typing import Any

from zuno import limits
from zuno.line_count import count_lines
from zuno.tools.state.docstore import StateRefusal

HEAD_ALLOWANCE_BYTES = 256
VIEW_MAX_BYTES = limits.DEFAULT_MAX_BYTES - HEAD_ALLOWANCE_BYTES
VIEW_MAX_LINES = limits.DEFAULT_MAX_LINES - 1
# A document is measured with its revision counted as this many digits' worth (10**9), so that the
# next revisions (9 -> 10 -> 100) never push one at its budget over.
REVISION_ALLOWANCE = 10**9


def budget(max_bytes: int = limits.DEFAULT_MAX_BYTES, max_lines: int = limits.DEFAULT_MAX_LINES) -> tuple[int, int]:
    """The bytes and lines a state document's rendering may take under these tool_output limits."""
    return min(VIEW_MAX_BYTES, max_bytes - HEAD_ALLOWANCE_BYTES), min(VIEW_MAX_LINES, max_lines - 1)


def of_config(ctx: Any) -> tuple[int, int]:
    cfg = ctx.config.tool_output
    return budget(cfg.max_bytes, cfg.max_lines)


def measure(text: str) -> tuple[int, int]:
    data = text.encode("utf-8", "surrogateescape")
    return len(data), count_lines(data)


def j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def check(
    kind: str,
    what: str,
    new: tuple[int, int],
    old: tuple[int, int] | None,
    limit: tuple[int, int],
    required_action: str,
    counted: str = "",
) -> None:
    """Refuse (``kind``) when ``new`` (bytes, lines) is over ``limit`` and larger than ``old``."""
    size, lines = new
    max_bytes, max_lines = limit
    old_size, old_lines = old or (0, 0)
    over_bytes = size > max_bytes and size > old_size
    over_lines = lines > max_lines and lines > old_lines
    if not (over_bytes or over_lines):
        return
    name, measured, cap, unit = (
        ("tool_output.max_bytes", size, max_bytes, "bytes")
        if over_bytes
        else ("tool_output.max_lines", lines, max_lines, "lines")
    )
    raise StateRefusal(
        kind,
        f"{what} would render as {measured} {unit}{counted}; it is returned at most {cap} {unit} ({name}, less "
        "room for a result's head line), so that it is always seen inline.",
        required_action,
        bytes=size,
        lines=lines,
        limit=cap,
        limitName=name,
    )
