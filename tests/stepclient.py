"""A session that runs one tool call per step and answers with the record's JSON: what the file-tool
tests drive the tools through (the same path as any caller's step)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class StepClient:
    def __init__(self, session: Any, root: Path) -> None:
        self.s = session
        self.root = root

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        res = await self.s.step([{"name": name, "arguments": arguments}])
        return res.results[0].to_json()
