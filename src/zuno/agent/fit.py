"""Tool results cut to fit the model's context in the request sent (never in the record).

A compaction keeps the latest step's results whole, so one result larger than the whole context
(a long file read, a command's output) made every request of the session too long for the
model: the server refused it, and ``zuno resume`` sent the same request again. When a request
still cannot fit the context after compacting, its largest tool results are shortened to their
head and tail in that request alone, each with a mark saying how much was left out, that the
record keeps it whole, and what to ask for instead. The transcript is unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from zuno.agent.types import ModelRequest, ToolResultMessage

# A shortened result keeps at least this many characters (its head and its tail).
FIT_RESULT_MIN_CHARS = 1_000
# Of a shortened result's characters, this fraction is its tail (a shell result ends with its
# status and its [verification rcp_…] receipt).
FIT_TAIL_FRACTION = 0.3
# Characters per estimated token (the Estimator's measure) and the room kept for the mark.
_CHARS_PER_TOKEN = 4
_MARK_ROOM = 400

_RECEIPT = re.compile(r"\[verification rcp_[0-9A-Za-z_]+\]")


@dataclasses.dataclass(frozen=True, slots=True)
class Cut:
    """One result shortened for the request: its call, tool, and sizes in characters."""

    call_id: str
    name: str
    chars: int
    kept: int


def shortened(text: str, keep: int, context_tokens: int) -> str:
    """``text`` cut to about ``keep`` characters: its head, a mark, its tail, and every receipt of
    the part left out."""
    keep = max(keep, FIT_RESULT_MIN_CHARS)
    if len(text) <= keep:
        return text
    tail_n = int(keep * FIT_TAIL_FRACTION)
    head_n = keep - tail_n
    middle = text[head_n : len(text) - tail_n]
    receipts = " ".join(dict.fromkeys(_RECEIPT.findall(middle)))
    mark = (
        f"\n[…{len(middle)} of this result's {len(text)} characters left out here: the whole result does "
        f"not fit the model's context ({context_tokens} tokens). The session record keeps it whole; "
        "to see the part left out, ask for less at a time (a line range, a narrower pattern, less output)"
        f"{'; receipts in it: ' + receipts if receipts else ''}…]\n"
    )
    return text[:head_n] + mark + text[len(text) - tail_n :]


def fit_results(
    request: ModelRequest, limit_tokens: int, context_tokens: int, estimate: Callable[[ModelRequest], int]
) -> tuple[ModelRequest, list[Cut]]:
    """``request`` with its largest tool results shortened until its estimate is within
    ``limit_tokens`` (or no result can shrink further), and what was cut."""
    over = estimate(request) - limit_tokens
    if over <= 0:
        return request, []
    results = [(i, m) for i, m in enumerate(request.messages) if isinstance(m, ToolResultMessage)]
    results.sort(key=lambda pair: len(pair[1].text), reverse=True)
    need = over * _CHARS_PER_TOKEN
    messages = list(request.messages)
    cuts: list[Cut] = []
    for i, m in results:
        if need <= 0:
            break
        room = len(m.text) - FIT_RESULT_MIN_CHARS - _MARK_ROOM
        if room <= 0:
            break  # sorted largest first: no later one can shrink either
        keep = len(m.text) - min(room, need + _MARK_ROOM)
        text = shortened(m.text, keep, context_tokens)
        need -= len(m.text) - len(text)
        messages[i] = dataclasses.replace(m, text=text)
        cuts.append(Cut(m.call_id, m.name, len(m.text), len(text)))
    if not cuts:
        return request, []
    return dataclasses.replace(request, messages=tuple(messages)), cuts


def cut_notice(cuts: list[Cut], context_tokens: int) -> str:
    """The notice the user sees; its first line (what the terminal shows) says it in short."""
    each = "\n".join(f"- {c.name} {c.call_id}: {c.chars} → {c.kept} characters" for c in cuts)
    many = len(cuts) > 1
    head = (
        f"{len(cuts)} tool results too large for the context ({context_tokens} tokens) were shortened; "
        "the record keeps them whole"
        if many
        else f"a tool result too large for the context ({context_tokens} tokens) was shortened; "
        "the record keeps it whole"
    )
    return f"{head}\n{each}"
