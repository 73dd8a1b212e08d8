"""The check of a user's prompt before it is sent: shared by `zuno run` and the Python API, and
light to import (the CLI checks its prompt before the agent's modules load)."""

from __future__ import annotations


def prompt_problem(prompt: str) -> str | None:
    """What is wrong with ``prompt`` as a user's message (it is not UTF-8 text, or it is blank),
    said as the end of a sentence starting "the prompt"; None when it can be sent."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"is not UTF-8 text (an undecodable byte at character {e.start}): give the prompt as UTF-8."
    if not prompt.strip():
        return "is empty: give a prompt."
    return None
