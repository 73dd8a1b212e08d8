"""Warm each SDK's stream-event parsing once per process, before the first request goes out.

The SDKs build a stream event with ``construct_type``, whose first use of a type walks its
annotations and fills caches: about 8 ms for the first chunk in a fresh process, paid between the
server's first byte and the first text on the screen. ``warm(api)`` builds one sample of the
first events of that API's stream (nothing is sent anywhere), so that cost is paid at start-up.
The Chat Completions adapter reads its chunks as plain JSON objects and needs none.
"""

from __future__ import annotations

import contextlib
from typing import Any

_done: set[str] = set()


def _samples(api: str) -> tuple[Any, list[dict[str, Any]], Any]:
    if api == "openai-responses":
        from openai._models import construct_type
        from openai.types.responses import ResponseStreamEvent

        response = {"id": "w", "object": "response", "created_at": 0, "model": "w", "status": "in_progress",
                    "output": [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
        return construct_type, [
            {"type": "response.created", "response": response, "sequence_number": 0},
            {"type": "response.output_item.added", "output_index": 0, "sequence_number": 0,
             "item": {"type": "message", "id": "w", "role": "assistant", "status": "in_progress", "content": []}},
            {"type": "response.content_part.added", "item_id": "w", "output_index": 0, "content_index": 0,
             "part": {"type": "output_text", "text": "", "annotations": []}, "sequence_number": 0},
            {"type": "response.output_text.delta", "item_id": "w", "output_index": 0, "content_index": 0,
             "delta": "w", "logprobs": [], "sequence_number": 1},
        ], ResponseStreamEvent
    from anthropic._models import construct_type as anthropic_construct
    from anthropic.types import RawMessageStreamEvent

    return anthropic_construct, [
        {"type": "message_start", "message": {"id": "w", "type": "message", "role": "assistant", "model": "w",
                                               "content": [], "stop_reason": None, "stop_sequence": None,
                                               "usage": {"input_tokens": 0, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "w"}},
    ], RawMessageStreamEvent


WARMED_APIS = frozenset({"openai-responses", "anthropic"})


def warm(api: str) -> None:
    """Once per API per process; a failure here only means the first chunk pays the cost."""
    if api in _done or api not in WARMED_APIS:
        return
    _done.add(api)
    with contextlib.suppress(Exception):
        construct, values, type_ = _samples(api)
        for value in values:
            construct(type_=type_, value=value)
