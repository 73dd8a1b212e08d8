"""Quoting a value the user (the model) sent, in a message: as a JSON string, bounded.

A message names a bad value so it can be recognised and fixed; it never echoes a huge one back
whole, and it quotes in JSON (``"a\\u0000b"``), the language the call was written in, not Python.
"""

from __future__ import annotations

import json

# How much of a value a message quotes (the rest is counted, not shown).
QUOTE_MAX_CHARS = 200


def quote(value: str, limit: int = QUOTE_MAX_CHARS) -> str:
    """``value`` as a JSON string; a long one is cut, saying how many characters were left out."""
    if len(value) <= limit:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value[:limit], ensure_ascii=False) + f" (and {len(value) - limit:,} more characters)"
