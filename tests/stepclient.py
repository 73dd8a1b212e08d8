"""A session that runs one tool call per step and answers with the record's JSON: what the file-tool
tests drive the tools through (the same path as any caller's step). The ``chord`` and ``patcher``
fixtures (conftest.py) give one in a session of the chord profile or of the zuno profile (the
apply_patch one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import zuno


class StepClient:
    def __init__(self, session: Any, root: Path) -> None:
        self.s = session
        self.root = root

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        res = await self.s.step([{"name": name, "arguments": arguments}])
        return res.results[0].to_json()

    async def read(self, path: str) -> str:
        """read's text, the call asserted ok."""
        r = await self.call("read", path=path)
        assert r["outcome"] == "ok", r["text"]
        return str(r["text"])

    async def ok(self, name: str, **arguments: object) -> None:
        """A call asserted ok."""
        r = await self.call(name, **arguments)
        assert r["outcome"] == "ok", r["text"]


async def step_client(root: Path, profile: str) -> AsyncIterator[StepClient]:
    async with zuno.Runtime(root=root, profile=profile) as rt, rt.session() as s:
        yield StepClient(s, root)
