"""How many lines a tool's output has, as the output limits count them (a last line without a
newline counts). Apart from ``zuno.output`` (which re-exports it) so that the state documents'
size checks, read by ``zuno plan`` / ``goal`` / ``todo`` / ``memory``, load no config models."""

from __future__ import annotations


def count_lines(data: bytes) -> int:
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
