"""The dispatcher: admit -> run -> settle, the only place tools run.

A step admits its calls in the model's order (``zuno.admitting``: resolve -> validate -> classify
-> hooks -> permission). A refusal commits a dispatch-blocked event at once and settles as
``blocked``. Execution: runs of consecutive non-Exclusive calls overlap under
``concurrency.tool_calls``; an Exclusive call is a two-sided barrier (each call is run by
``zuno.call_runner``). The intent row of a call is committed before it starts (at-most-once), and
results are persisted in call order whatever order they complete in (``zuno.settling``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from zuno.admission import nothing_ran
from zuno.admitting import CROSS_CUTTING, Admission, Admitted, Blocked
from zuno.call_runner import CallRunner
from zuno.config import Config
from zuno.declarations import Concurrency, Effect, Outcome, Replay
from zuno.permissions import Approver
from zuno.records import CallRecord, StepResult, StepWrites
from zuno.settling import StepBook
from zuno.step_state import StepState
from zuno.store import Store
from zuno.store.calls import CallEntry
from zuno.surface import Surface
from zuno.tool import Services
from zuno.workspace import Workspace

__all__ = ["CROSS_CUTTING", "Dispatcher"]


class Dispatcher:
    """One session's steps: each admitted (``Admission``), its runs opened and run in order
    (``CallRunner``), its results settled in call order (``StepBook``)."""

    def __init__(
        self,
        *,
        session_id: str,
        workspace: Workspace,
        store: Store,
        config: Config,
        surface: Surface,
        services: Services,
        approver: Approver,
    ) -> None:
        self.session_id = session_id
        self.store = store
        self.admission = Admission(
            session_id=session_id,
            workspace=workspace,
            store=store,
            config=config,
            surface=surface,
            approver=approver,
        )
        self.runner = CallRunner(
            session_id=session_id,
            workspace=workspace,
            store=store,
            config=config,
            services=services,
            artifact_reader="bg" if "bg" in surface.tools else "read",
        )
        self._steps: set[StepState] = set()

    # -- cancellation ---------------------------------------------------------------------------

    def cancel(self) -> None:
        """Cancel every running step: running calls are cancelled and settle with what they have;
        calls not started yet do not start. (Cancelling the task that runs one step cancels only
        that step.)"""
        for st in list(self._steps):
            st.cancel()

    # -- the step -------------------------------------------------------------------------------

    async def step(
        self,
        calls: list[Any],
        notices: list[dict[str, Any]] | None = None,
        also: StepWrites | None = None,
        hidden: Mapping[str, str] | None = None,
    ) -> StepResult:
        n = self.store.begin_step(self.session_id, {"calls": len(calls)})
        st = StepState(n, hidden=dict(hidden or {}))
        self._steps.add(st)
        try:
            return await self._step(st, calls, notices, also)
        finally:
            self._steps.discard(st)

    async def _step(
        self, st: StepState, calls: list[Any], notices: list[dict[str, Any]] | None, also: StepWrites | None
    ) -> StepResult:
        n = st.n
        running = [o.n for o in self._steps if o is not st]
        delivered = [*(notices or []), *self.store.take_notices(self.session_id, n, running)]
        book = StepBook(self.store, self.session_id, st, len(calls), also)
        admit, run_call, not_started = self.admission.admit, self.runner.run_call, self.runner.not_started

        admissions: list[Admitted | Blocked] = []
        for idx, raw in enumerate(calls):
            adm = await admit(st, idx, raw)
            if isinstance(adm, Blocked):
                self.store.add_event(
                    self.session_id,
                    "dispatch-blocked",
                    {"tool": adm.name, "block_kind": str(adm.kind), "reason": adm.message},
                    step=n,
                    call_id=adm.call_id,
                )
            admissions.append(adm)

        blocked = [adm for adm in admissions if isinstance(adm, Blocked)]
        for b in blocked:
            book.add(b.idx, self._blocked_entry(n, b))
        if blocked:
            book.flush()

        segments: list[list[Admitted]] = []
        for adm in admissions:
            if not isinstance(adm, Admitted):
                continue
            exclusive = adm.decl.concurrency is Concurrency.Exclusive
            if exclusive or not segments or segments[-1][0].decl.concurrency is Concurrency.Exclusive:
                segments.append([adm])
            else:
                segments[-1].append(adm)

        async def one(adm: Admitted) -> None:
            # A result that stands for an effect is made durable as soon as it is in (a crash
            # after would otherwise leave it uncertain); a read-only one waits for the segment's
            # end, so a run of reads settles in one commit (a crash before loses only results
            # that nothing depends on: those calls did nothing).
            book.add(adm.idx, await run_call(st, adm), soon=adm.decl.effect is not Effect.ReadOnly)

        for seg in segments:
            if st.cancel_requested:
                for adm in seg:
                    book.add(adm.idx, not_started(n, adm))
                continue
            self._open_run(n, seg)
            if len(seg) == 1:
                # One call: awaited in the step's own task (no task of its own); a cancellation of
                # the step reaching it is absorbed there, the call settles, then it goes through.
                book.add(seg[0].idx, await run_call(st, seg[0], direct=True))
                book.flush()
                if st.outer_cancelled:
                    self._record_rest(n, segments, seg, book)
                    self._end_step(st, book)
                    raise asyncio.CancelledError
                continue
            tasks = [asyncio.create_task(one(adm)) for adm in seg]
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                # The step itself was cancelled (API): cancel the calls, let them settle, record
                # everything, then let the cancellation through.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                st.cancel()
                await asyncio.wait(tasks)
                self._record_rest(n, segments, seg, book)
                self._end_step(st, book)
                raise
            for t in tasks:
                if (exc := t.exception()) is not None:  # a bug in the dispatcher itself
                    raise exc
            book.flush()
        self._end_step(st, book)
        return StepResult(self.session_id, n, [r for r in book.records if r is not None], delivered)

    def _open_run(self, n: int, seg: list[Admitted]) -> None:
        """Number the calls of a run and commit the intents of its Never calls, all in one
        transaction (with a full sync), before any of them starts. A Safe call gets no intent row:
        it may be run again by definition, so it is written once, settled."""
        intents = []
        for adm in seg:
            never = adm.decl.replay is not Replay.Safe
            adm.entry = CallEntry(
                "intent" if never else "ran",
                self.session_id,
                n,
                adm.idx,
                adm.call_id,
                adm.name,
                adm.arguments,
                adm.decl.as_dict(),
                seq=self.store.next_call_seq(),
                started_at=time.time(),
            )
            if never:
                intents.append(adm.entry)
        if intents:
            self.store.write_intents(intents)

    def _record_rest(self, n: int, segments: list[list[Admitted]], current: list[Admitted], book: StepBook) -> None:
        after = False
        for seg in segments:
            if seg is current:
                after = True
                continue
            if after:
                for adm in seg:
                    book.add(adm.idx, self.runner.not_started(n, adm))

    def _end_step(self, st: StepState, book: StepBook) -> None:
        book.flush()
        if not st.ended:
            st.ended = True
            self.store.end_step(self.session_id, st.n)

    # -- settling -------------------------------------------------------------------------------

    def _blocked_entry(self, n: int, b: Blocked) -> tuple[CallEntry, CallRecord]:
        text = f"[blocked: {b.kind}] {nothing_ran(b.message)}"
        entry = CallEntry(
            "settled",
            self.session_id,
            n,
            b.idx,
            b.call_id,
            b.name,
            b.arguments,
            b.decl.as_dict(),
            outcome=str(Outcome.blocked),
            block_kind=str(b.kind),
            text=text,
            metadata=b.metadata,
        )
        rec = CallRecord(b.call_id, b.name, Outcome.blocked, b.kind, False, text, b.metadata, b.decl, None, None)
        return entry, rec
