"""A step's results, persisted in call order in as few transactions as that order allows."""

from __future__ import annotations

import asyncio
from typing import Protocol

from zuno.records import CallRecord, StepWrites
from zuno.store import Store
from zuno.store.calls import CallEntry


class StepState(Protocol):
    """What the book needs of its step: its number, and a flag it sets once the step is closed."""

    n: int
    ended: bool


class StepBook:
    """A step's results, persisted in call order in as few transactions as that order allows: every
    result ready in order is written in one transaction, the last one with the end of the step (and
    the caller's ``StepWrites``). A run of overlapping calls gathers the results that complete in
    one turn of the event loop; a read-only result waits for the run's end (see ``Dispatcher``)."""

    def __init__(
        self, store: Store, session_id: str, st: StepState, count: int, also: StepWrites | None = None
    ) -> None:
        self.also = also  # the caller's writes, with the last results
        self.store = store
        self.session_id = session_id
        self.st = st
        self.count = count
        self.records: list[CallRecord | None] = [None] * count
        self.pending: dict[int, tuple[CallEntry, CallRecord]] = {}
        self.cursor = 0
        self.handle: asyncio.Handle | None = None
        self.error: BaseException | None = None

    def add(self, idx: int, item: tuple[CallEntry, CallRecord], *, soon: bool = False) -> None:
        self.pending[idx] = item
        if soon and self.handle is None:
            self.handle = asyncio.get_running_loop().call_soon(self._soon)

    def _soon(self) -> None:
        self.handle = None
        try:
            self.flush()
        except BaseException as e:  # re-raised in the step by its next flush
            self.error = e

    def flush(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        if self.error is not None:
            err, self.error = self.error, None
            raise err
        ready = []
        i = self.cursor
        while i in self.pending:
            ready.append(i)
            i += 1
        if not ready:
            return
        last = i == self.count

        def take() -> None:
            for j in ready:
                entry, rec = self.pending[j]
                rec.attempt = entry.attempt
                rec.seq = entry.seq or None
                self.records[j] = rec

        def records() -> tuple[int, list[CallRecord]]:
            take()  # (each entry has its seq and attempt by now)
            return self.st.n, [r for r in self.records if r is not None]

        also = self.also if last else None
        self.store.write_settlements(
            [self.pending[j][0] for j in ready],
            (self.session_id, self.st.n) if last else None,
            also,
            records if also is not None else None,
        )
        take()
        for j in ready:
            del self.pending[j]
        self.cursor = i
        if last:
            self.st.ended = True
