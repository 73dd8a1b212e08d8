"""The arrival-order gate of ``zuno mcp``: each tools/call request is one Zuno step, and requests
in flight together keep the dispatcher's rules across steps.

A request takes its place when it arrives. A non-Exclusive one (ParallelSafe, IsolatedBackground)
may start when no earlier request still in flight is Exclusive; an Exclusive one is a two-sided
barrier: it starts when every earlier request has settled, and no later request starts until it
has settled. The overlap bound itself (``concurrency.tool_calls``) is the dispatcher's, shared by
every step of the session.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Ticket:
    exclusive: bool
    go: asyncio.Event = field(default_factory=asyncio.Event)


class ArrivalGate:
    def __init__(self) -> None:
        self._in_flight: list[_Ticket] = []

    def _wake(self) -> None:
        # Synchronous on purpose: it runs in finally blocks of cancelled requests too.
        for i, t in enumerate(self._in_flight):
            if t.exclusive:
                if i == 0:
                    t.go.set()
                break
            t.go.set()

    @asynccontextmanager
    async def slot(self, exclusive: bool) -> AsyncIterator[None]:
        """Hold a place from arrival (this call, before any await) until the body has settled."""
        ticket = _Ticket(exclusive)
        self._in_flight.append(ticket)
        self._wake()
        try:
            await ticket.go.wait()
            yield
        finally:
            self._in_flight.remove(ticket)
            self._wake()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
