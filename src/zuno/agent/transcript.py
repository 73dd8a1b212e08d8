"""The durable transcript of an agent session (tables of migration ``0002_agent``).

Every fact is committed before the next provider request goes out: the request (digests of its
system text and dynamic context, its message count), the response (text, tool calls, usage, stop
reason, each wire attempt with its own times), every tool result (linked to the dispatcher's
``calls`` row by step and seq), every user message (with an id and a digest, for later
authorization checks), notices, and compaction markers. No key, header or base URL is recorded.

History windows are delimited by compaction markers: the messages of the next request are the
marker's summary followed by the items recorded after the point it summarised.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from zuno import limits
from zuno.agent.items import (
    MODES,
    SUMMARY_HEAD,
    AgentState,
    Item,
    Mode,
    RequestRow,
    ToolResultRow,
    Unmatched,
    UserSource,
    digest_text,
    image_rows,
    item_json,
    to_messages,
)
from zuno.agent.types import Attempt, Finished, ImagePart, Message, ModelRequest, ToolCall, UserMessage, well_formed
from zuno.agent.writer import Writer, this_process, writer_state
from zuno.records import CallRecord, StepWrites
from zuno.store import Store

_INSERT_SQL: dict[tuple[str, ...], str] = {}  # an item insert per set of optional columns
# A step's results go in as few statements as possible: up to this many rows (8 parameters each)
# per statement, under the 999 host parameters of the oldest SQLite builds.
RESULT_ROWS_PER_STATEMENT = 100
_RESULT_COLUMNS = "session_id, turn, kind, data, at, call_id, step, call_seq"


@functools.lru_cache(maxsize=64)
def _results_sql(rows: int) -> str:
    return f"INSERT INTO agent_items ({_RESULT_COLUMNS}) VALUES " + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * rows)


class _RequestRow:
    """A deferred write of a sent request's row: ``row`` as it went out, and its outcome once
    ``finished`` is known (the row is then written finished, in one statement)."""

    __slots__ = ("finished", "row")

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.row = row
        self.finished: tuple[Any, ...] | None = None

    def __call__(self, db: Any) -> None:
        if self.finished is None:
            db.execute(_INSERT_REQUEST_SENT, self.row)
        else:
            db.execute(_INSERT_REQUEST_FINISHED, (*self.row, *self.finished))


_REQUEST_COLUMNS = (
    "id, session_id, turn, purpose, model, system_digest, context_digest, message_count, tool_count,"
    " estimated_tokens, started_at"
)
_INSERT_REQUEST_SENT = f"INSERT INTO agent_requests ({_REQUEST_COLUMNS}, status) VALUES ({'?, ' * 11}'sent')"
_INSERT_REQUEST_FINISHED = (
    f"INSERT INTO agent_requests ({_REQUEST_COLUMNS}, ended_at, stop_reason, provider_stop_reason, input_tokens,"
    f" output_tokens, cached_tokens, status) VALUES ({'?, ' * 17}'finished')"
)


_PARTIAL_COLUMNS = (
    "request_id, session_id, turn, purpose, model, system_digest, context_digest, message_count, tool_count,"
    " estimated_tokens, started_at"
)
# The first save of a request's streamed text (and the one after a restarted stream): the whole row.
# The writer (this process: pid, start time, boot id) is recorded so that a reader can tell an
# answer still streaming from one whose process died (``zuno.agent.writer``).
_SAVE_PARTIAL = (
    f"INSERT INTO agent_partials ({_PARTIAL_COLUMNS}, text, updated_at, writer_pid, writer_start, writer_boot)"
    f" VALUES ({'?, ' * 15}?)"
    " ON CONFLICT (request_id) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at,"
    " writer_pid = excluded.writer_pid, writer_start = excluded.writer_start, writer_boot = excluded.writer_boot"
)
# A later save adds only the text that arrived since (no rewrite of the row from Python).
_APPEND_PARTIAL = "UPDATE agent_partials SET text = text || ?, updated_at = ? WHERE request_id = ?"
_DROP_PARTIAL = "DELETE FROM agent_partials WHERE request_id = ?"
# After a crash: each request whose streamed text was saved is recorded as interrupted (its row
# written now when it never was, ended when its text was last saved).
_INTERRUPT_PARTIAL_REQUESTS = (
    f"INSERT INTO agent_requests ({_REQUEST_COLUMNS}, status, ended_at) SELECT {_PARTIAL_COLUMNS},"
    " 'interrupted', updated_at FROM agent_partials WHERE session_id = ?"
    " ON CONFLICT (id) DO UPDATE SET status = 'interrupted', ended_at = excluded.ended_at"
    " WHERE agent_requests.status = 'sent'"
)
PARTIAL_RECOVERED_TEXT = "saved while it streamed; the process stopped before the answer was complete"
PARTIAL_LOCKED_TEXT = (
    "saved while it streamed; the store was locked by another process before the answer's outcome was recorded"
)


class Transcript:
    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self._cache: list[Item] = []
        self._seqs: list[int] = []  # the seqs of _cache, for bisect
        self._messages: dict[int, Message | None] = {}
        self._last_compaction: Item | None = None
        self._users: list[UserSource] = []
        # The current window's messages, extended as items arrive: (marker seq, last item seq, messages).
        self._window_msgs: tuple[int, int, list[Message]] | None = None
        self._state: AgentState | None = None
        self._open_calls: dict[str, Unmatched] = {}  # recorded calls with no result item yet
        # Write-through: the items this transcript writes join the cache when their transaction
        # commits (no read back). A session has one driver process (its lock) and one transcript
        # writing it, so after the first read only ``refresh()`` looks at the table again.
        self._loaded = False
        self._written: list[Item] = []
        # Writes that ride with the next one: a request's row (with its outcome), a response whose
        # calls are all read-only (with their results).
        self._deferred: list[Callable[[Any], None]] = []
        self._abandon: Callable[[], None] = lambda: None
        # Requests in flight: the row each went out with (their streamed text is saved with it), and
        # those whose text has a saved agent_partials row (dropped in the commit of their outcome).
        self._sending: dict[int, tuple[Any, ...]] = {}
        self._partials: set[int] = set()
        self._writer: Writer | None = None  # this process, as its saved rows name it (read once)
        with store.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO agent_state (session_id, updated_at) VALUES (?, ?)", (session_id, time.time())
            )

    # -- durable session state ------------------------------------------------------------------

    def state(self) -> AgentState:
        """The session's durable agent state (kept in memory between writes: one driver)."""
        if self._state is None:
            (r,) = self.store.query("SELECT * FROM agent_state WHERE session_id = ?", (self.session_id,))
            self._state = AgentState(r["mode"], r["model"], r["turns"], json.loads(r["data"]))
        st = self._state
        # A copy the caller may change (the values are JSON scalars; save_data writes it back).
        return AgentState(st.mode, st.model, st.turns, dict(st.data))

    def set_mode(self, mode: Mode) -> None:
        self._state = None
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}.")
        with self.store.transaction() as db:
            db.execute(
                "UPDATE agent_state SET mode = ?, updated_at = ? WHERE session_id = ?",
                (mode, time.time(), self.session_id),
            )
            db.execute(
                "INSERT INTO events (session_id, kind, data, at) VALUES (?, 'agent-mode', ?, ?)",
                (self.session_id, item_json({"mode": mode}), time.time()),
            )

    def set_model(self, model: str) -> None:
        self._state = None
        self.store.execute(
            "UPDATE agent_state SET model = ?, updated_at = ? WHERE session_id = ?",
            (model, time.time(), self.session_id),
        )

    def save_data(self, data: dict[str, Any]) -> None:
        text = item_json(data)
        self.store.execute(
            "UPDATE agent_state SET data = ?, updated_at = ? WHERE session_id = ?",
            (text, time.time(), self.session_id),
        )
        if self._state is not None:
            self._state.data = json.loads(text)

    # -- turns ----------------------------------------------------------------------------------

    def begin_turn(self, mode: Mode) -> int:
        """A new turn's number. A turn still open (its process was killed, so nothing recorded its
        end) is ended first, as interrupted at its last recorded item: a session has one driver, so
        an open turn of it is never one that still runs."""
        self._state = None
        with self._writing() as db:
            (n,) = db.execute("SELECT turns + 1 FROM agent_state WHERE session_id = ?", (self.session_id,)).fetchone()
            stopped = db.execute(
                "UPDATE agent_turns SET stop_reason = 'interrupted', stop_detail = ?, ended_at = COALESCE("
                "(SELECT MAX(i.at) FROM agent_items i WHERE i.session_id = agent_turns.session_id"
                " AND i.turn = agent_turns.n), started_at) WHERE session_id = ? AND ended_at IS NULL",
                (f"the process driving the session stopped during this turn (found when turn {n} began)",
                 self.session_id),
            ).rowcount
            if stopped:  # only a process that stopped mid-turn can have left streamed text behind
                self._recover_partials(db)
            db.execute("UPDATE agent_state SET turns = ? WHERE session_id = ?", (n, self.session_id))
            db.execute(
                "INSERT INTO agent_turns (session_id, n, mode, started_at) VALUES (?, ?, ?, ?)",
                (self.session_id, n, mode, time.time()),
            )
        return int(n)

    def end_open_turns(self, detail: str) -> None:
        """End every turn left open as interrupted (``detail`` says why) and recover the streamed
        text saved of its requests, as the next turn does after a crash, in one commit. For a turn
        its own process could not end (the store was locked by another process mid-turn): the
        save of an answer's outcome, and so the drop of its saved text, may not have committed."""
        with self._writing() as db:
            db.execute(
                "UPDATE agent_turns SET ended_at = ?, stop_reason = 'interrupted', stop_detail = ?"
                " WHERE session_id = ? AND ended_at IS NULL",
                (time.time(), detail, self.session_id),
            )
            self._recover_partials(db, PARTIAL_LOCKED_TEXT)

    def _recover_partials(self, db: Any, why: str = PARTIAL_RECOVERED_TEXT) -> None:
        """The answers a stopped process was streaming (their text saved as it came): each request
        is recorded as interrupted, and its text as an interrupted assistant item of its turn (as
        when the user interrupts a stream), which the turn's end then covers."""
        rows = db.execute(
            "SELECT request_id, turn, text, updated_at FROM agent_partials WHERE session_id = ? ORDER BY request_id",
            (self.session_id,),
        ).fetchall()
        if not rows:
            return
        db.execute(_INTERRUPT_PARTIAL_REQUESTS, (self.session_id,))
        for request_id, turn, text, updated_at in rows:
            if text:
                data = {"text": well_formed(text), "tool_calls": [], "opaque": [], "interrupted": True,
                        "calls_seq_floor": 0, "recovered": why}
                self._insert(db, turn, "assistant", data, request_id=request_id, at=float(updated_at))
            db.execute(
                "UPDATE agent_turns SET ended_at = MAX(ended_at, ?) WHERE session_id = ? AND n = ?",
                (updated_at, self.session_id, turn),
            )
        db.execute("DELETE FROM agent_partials WHERE session_id = ?", (self.session_id,))
        for request_id, *_ in rows:  # settled now (this transcript's own, after a lock)
            self._partials.discard(request_id)
            self._sending.pop(request_id, None)

    def partials(self) -> list[dict[str, Any]]:
        """The streamed text saved of answers that never completed: a request still streaming
        (``state`` "streaming": the process that saved it, ``writer_pid``, still runs, checked
        against /proc with its start time), or one whose process died ("died": the next turn
        records those as interrupted); "unknown" for a row that names no writer."""
        rows = self.store.query(
            "SELECT request_id, turn, purpose, text, started_at, updated_at, writer_pid, writer_start, writer_boot"
            " FROM agent_partials WHERE session_id = ? ORDER BY request_id",
            (self.session_id,),
        )
        out = []
        for r in rows:
            p = dict(r)
            p["state"] = writer_state(p.pop("writer_pid"), p.pop("writer_start"), p.pop("writer_boot"))
            p["writer_pid"] = r["writer_pid"]
            out.append(p)
        return out

    def end_turn(self, n: int, stop_reason: str, detail: str, steps: int) -> None:
        self.store.execute(
            "UPDATE agent_turns SET ended_at = ?, stop_reason = ?, stop_detail = ?, steps = ? "
            "WHERE session_id = ? AND n = ?",
            (time.time(), stop_reason, detail, steps, self.session_id, n),
        )

    def turns(self) -> list[dict[str, Any]]:
        rows = self.store.query("SELECT * FROM agent_turns WHERE session_id = ? ORDER BY n", (self.session_id,))
        return [dict(r) for r in rows]

    # -- items ----------------------------------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[Any]:
        """A store transaction whose inserted items join the cache once it commits."""
        self._sync()  # the cache is complete before it is extended in place
        self._written.clear()
        deferred, self._deferred = self._deferred, []
        try:
            with self.store.transaction() as db:
                for write in deferred:
                    write(db)
                yield db
        except BaseException:
            self._written.clear()
            self._deferred[:0] = deferred  # not written: still to write, first
            raise
        written, self._written = self._written, []
        for it in written:
            self._add(it)

    def _insert(
        self, db: Any, turn: int, kind: str, data: dict[str, Any], *, at: float | None = None, **cols: Any
    ) -> int:
        at = time.time() if at is None else at
        sql = _INSERT_SQL.get(tuple(cols))
        if sql is None:
            names = ["session_id", "turn", "kind", "data", "at", *cols]
            sql = _INSERT_SQL[tuple(cols)] = (
                f"INSERT INTO agent_items ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
            )
        cur = db.execute(sql, (self.session_id, turn, kind, item_json(data), at, *cols.values()))
        seq = int(cur.lastrowid or 0)
        # Every caller builds data afresh for this row and keeps no reference to it.
        self._written.append(Item(seq, turn, kind, data, at=at, **cols))
        return seq

    def add_user(self, turn: int, text: str, images: Sequence[ImagePart] = ()) -> tuple[str, str]:
        """A message from the user: its id and digest cover the text and every attached part."""
        msg_id = f"msg_{uuid.uuid4().hex[:16]}"
        digest = digest_text(text, *(f"{i.media_type}:{digest_text(i.data_b64)}" for i in images))
        with self._writing() as db:
            self._insert(db, turn, "user", {"text": text, "images": image_rows(images)}, msg_id=msg_id, digest=digest)
        return msg_id, digest

    def add_notice(self, turn: int, text: str, source: str, kinds: Sequence[str] = ()) -> int:
        with self._writing() as db:
            return self._insert(db, turn, "notice", {"text": text, "source": source, "kinds": list(kinds)})

    def request_sent(
        self, turn: int, purpose: str, model: str, request: ModelRequest, context_digest: str, estimated_tokens: int
    ) -> int:
        """A request going out: its id now; its row rides with the transcript's next write (the
        request's outcome), so it costs no commit of its own. Everything before it is committed
        already: the request itself changes nothing."""
        request_id = self.store.next_request_id()
        row = (
            request_id,
            self.session_id,
            turn,
            purpose,
            model,
            digest_text(request.system),
            context_digest,
            len(request.messages),
            len(request.tools) + len(request.hosted_tools),
            estimated_tokens,
            time.time(),
        )
        self._deferred.append(_RequestRow(row))
        self._sending[request_id] = row
        return request_id

    def save_partial(self, request_id: int, text: str, *, whole: bool) -> None:
        """The streamed text of a request in flight, durable: ``whole`` the text so far (the first
        save, or after the stream restarted), else the text since the last save, appended. One
        committed statement (``Store.execute``)."""
        if whole or request_id not in self._partials:
            w = self._writer
            if w is None:
                w = self._writer = this_process()
            params = (*self._sending[request_id], well_formed(text), time.time(), w.pid, w.start, w.boot)
            self.store.execute(_SAVE_PARTIAL, params)
            self._partials.add(request_id)
        else:
            self.store.execute(_APPEND_PARTIAL, (text, time.time(), request_id))

    def _settled(self, db: Any, request_id: int) -> None:
        """A request's outcome is being written: its saved streamed text, if any, goes with it."""
        self._sending.pop(request_id, None)
        if request_id in self._partials:
            db.execute(_DROP_PARTIAL, (request_id,))

    def _attempts(self, db: Any, request_id: int, attempts: Sequence[Attempt]) -> None:
        for a in attempts:
            db.execute(
                "INSERT OR REPLACE INTO agent_attempts VALUES (?, ?, ?, ?, ?, ?, ?)",
                (request_id, a.number, a.started_at, a.ended_at, a.status, a.error_category, a.retry_after_s),
            )

    def request_finished(
        self,
        request_id: int,
        turn: int,
        fin: Finished,
        attempts: Sequence[Attempt],
        calls_seq_floor: int,
        *,
        item: bool = True,
        defer: bool = False,
    ) -> None:
        """The response and its attempts, and (for a turn request) the assistant item: one commit.
        ``defer``: written with the transcript's next write instead (the results of its calls, when
        none of them can have an effect: a crash before then loses only a response whose calls
        may run again), and at the latest by ``flush``."""
        ended = time.time()
        attempts = tuple(attempts)
        outcome = (
            ended,
            fin.stop_reason,
            fin.provider_stop_reason,
            fin.usage.input_tokens,
            fin.usage.output_tokens,
            fin.usage.cached_tokens,
        )
        # A request row not written yet is written once, finished (one statement, not two).
        unsent = next((w for w in self._deferred if isinstance(w, _RequestRow) and w.row[0] == request_id), None)
        if unsent is not None:
            unsent.finished = outcome

        def write(db: Any) -> None:
            self._settled(db, request_id)
            if unsent is None:
                db.execute(
                    "UPDATE agent_requests SET status = 'finished', ended_at = ?, stop_reason = ?,"
                    " provider_stop_reason = ?,"
                    " input_tokens = ?, output_tokens = ?, cached_tokens = ? WHERE id = ?",
                    (*outcome, request_id),
                )
            self._attempts(db, request_id, attempts)
            if not item:
                return
            m = fin.message
            data = {
                "text": m.text,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls],
                "opaque": list(m.opaque),
                "interrupted": False,
                "calls_seq_floor": calls_seq_floor,
            }
            self._insert(db, turn, "assistant", data, request_id=request_id)

        if defer:
            self._deferred.append(write)
            return
        with self._writing() as db:
            write(db)

    def flush(self) -> None:
        """Commit the deferred writes now."""
        if self._deferred:
            with self._writing():
                pass

    def request_failed(
        self,
        request_id: int,
        category: str,
        message: str,
        attempts: Sequence[Attempt],
        *,
        turn: int | None = None,
        partial: str = "",
    ) -> None:
        """The request failed. ``partial``: the text it streamed before the error (a turn's request
        that failed mid-stream), kept as an assistant item of ``turn`` marked ``failed`` with the
        error, with no tool call; the model is sent it marked as cut off (``FAILED_MARK``)."""
        with self._writing() as db:
            db.execute(
                "UPDATE agent_requests SET status = 'failed', ended_at = ?, error_category = ?, error = ? WHERE id = ?",
                (time.time(), category, well_formed(message), request_id),
            )
            self._settled(db, request_id)
            self._attempts(db, request_id, attempts)
            if partial and turn is not None:
                data = {"text": well_formed(partial), "tool_calls": [], "opaque": [], "interrupted": False,
                        "failed": {"category": category, "error": well_formed(message)}, "calls_seq_floor": 0}
                self._insert(db, turn, "assistant", data, request_id=request_id)

    def request_interrupted(
        self, request_id: int, turn: int, partial: str, attempts: Sequence[Attempt], *, keep: bool = True
    ) -> None:
        """The user interrupted the stream: the partial text is kept, marked, with no tool call."""
        with self._writing() as db:
            db.execute(
                "UPDATE agent_requests SET status = 'interrupted', ended_at = ? WHERE id = ?", (time.time(), request_id)
            )
            self._settled(db, request_id)
            self._attempts(db, request_id, attempts)
            if keep and partial:
                text = well_formed(partial)  # cut off anywhere: between the halves of a surrogate pair too
                data = {"text": text, "tool_calls": [], "opaque": [], "interrupted": True, "calls_seq_floor": 0}
                self._insert(db, turn, "assistant", data, request_id=request_id)

    def add_tool_results(self, turn: int, step: int | None, results: Sequence[ToolResultRow]) -> None:
        with self._writing() as db:
            self._insert_results(db, turn, step, results)

    def _insert_results(self, db: Any, turn: int, step: int | None, results: Sequence[ToolResultRow]) -> None:
        """A step's result items, one row per result in call order, up to
        RESULT_ROWS_PER_STATEMENT rows per statement."""
        if not results:
            return
        at = time.time()
        rows = [
            (
                r,
                {
                    "name": r.name,
                    "text": r.text,
                    "outcome": r.outcome,
                    "images": image_rows(r.images),
                    "recovered": r.recovered,
                    "cancelled": r.cancelled,
                },
            )
            for r in results
        ]
        for lo in range(0, len(rows), RESULT_ROWS_PER_STATEMENT):
            part = rows[lo : lo + RESULT_ROWS_PER_STATEMENT]
            params: list[Any] = []
            for r, data in part:
                params += (self.session_id, turn, "tool_result", item_json(data), at, r.call_id, step, r.call_seq)
            cur = db.execute(_results_sql(len(part)), params)
            # One statement under the write lock: AUTOINCREMENT numbers its rows in order, up to lastrowid.
            first = int(cur.lastrowid or 0) - len(part) + 1
            for seq, (r, data) in enumerate(part, first):
                self._written.append(
                    Item(seq, turn, "tool_result", data, at=at, call_id=r.call_id, step=step, call_seq=r.call_seq)
                )

    def results_with_step(
        self, turn: int, rows: Callable[[list[CallRecord]], Sequence[ToolResultRow]]
    ) -> StepWrites:
        """The result items of a step (``rows`` of its records), with the writes deferred until
        then, as writes that ride in the step's own last transaction (``Session.step(also=...)``):
        one commit for both. When they were not committed (``done`` false), ``abandon()`` puts
        the deferred writes back, and ``add_tool_results`` writes the results itself."""
        self._sync()
        taken: list[Callable[[Any], None]] = []

        def write(db: Any, step: int, records: list[CallRecord]) -> None:
            self._written.clear()
            taken[:] = self._deferred
            self._deferred = []
            try:
                for w in taken:
                    w(db)
                self._insert_results(db, turn, step, rows(records))
            except BaseException:
                self._written.clear()
                self._deferred[:0] = taken
                taken.clear()
                raise

        def committed() -> None:
            written, self._written = self._written, []
            taken.clear()
            for it in written:
                self._add(it)

        writes = StepWrites(write, committed)

        def abandon() -> None:
            if not writes.done:
                self._written.clear()
                self._deferred[:0] = taken
                taken.clear()

        self._abandon = abandon
        return writes

    def abandon_step_writes(self) -> None:
        """Undo what ``results_with_step`` took when its transaction did not commit."""
        self._abandon()

    def add_compaction(self, turn: int, summary: str, upto_seq: int, request_id: int | None, model: str) -> int:
        with self._writing() as db:
            (n,) = db.execute(
                "SELECT COUNT(*) + 1 FROM agent_items WHERE session_id = ? AND kind = 'compaction'", (self.session_id,)
            ).fetchone()
            return self._insert(
                db,
                turn,
                "compaction",
                {"summary": summary, "upto_seq": upto_seq, "model": model, "n": int(n)},
                request_id=request_id,
            )

    # -- reading --------------------------------------------------------------------------------

    def _item(self, r: Any) -> Item:
        return Item(
            seq=r["seq"],
            turn=r["turn"],
            kind=r["kind"],
            data=json.loads(r["data"]),
            msg_id=r["msg_id"],
            call_id=r["call_id"],
            request_id=r["request_id"],
            step=r["step"],
            call_seq=r["call_seq"],
            digest=r["digest"],
            at=r["at"],
        )

    def _sync(self) -> None:
        """Read the items recorded by others than this transcript (once: a session has one driver,
        and what this transcript writes joins the cache as it commits)."""
        if not self._loaded:
            self.refresh()

    def refresh(self) -> None:
        """Read the items recorded since the last read. Items are never changed once written, so
        the rows read once are kept and only newer ones are read."""
        top = self._seqs[-1] if self._seqs else 0
        rows = self.store.query(
            "SELECT * FROM agent_items WHERE session_id = ? AND seq > ? ORDER BY seq", (self.session_id, top)
        )
        self._loaded = True
        for r in rows:
            self._add(self._item(r))

    def _add(self, it: Item) -> None:
        self._cache.append(it)
        self._seqs.append(it.seq)
        if it.kind == "assistant":
            for c in it.data["tool_calls"]:
                call = ToolCall(c["id"], c["name"], c["arguments"])
                self._open_calls[c["id"]] = Unmatched(it.seq, it.turn, call, it.data["calls_seq_floor"])
        elif it.kind == "tool_result" and it.call_id is not None:
            self._open_calls.pop(it.call_id, None)
        elif it.kind == "compaction":
            self._last_compaction = it
        elif it.kind == "user":
            self._users.append(UserSource(it.msg_id or "", it.digest or "", it.data["text"], it.turn))

    def items(self, after_seq: int = 0) -> list[Item]:
        """The items after ``after_seq``."""
        self._sync()
        if after_seq <= 0:
            return list(self._cache)
        return self._cache[bisect.bisect_right(self._seqs, after_seq) :]

    def last_compaction(self) -> Item | None:
        self._sync()
        return self._last_compaction

    def window(self) -> tuple[Item | None, list[Item]]:
        """The current history window: the last compaction marker and the items after the point it summarised."""
        marker = self.last_compaction()
        after = int(marker.data["upto_seq"]) if marker else 0
        return marker, [i for i in self.items(after) if i.kind != "compaction"]

    def _message(self, it: Item) -> Message | None:
        m = self._messages.get(it.seq)
        if m is None and it.seq not in self._messages:
            converted = to_messages([it])
            m = self._messages[it.seq] = converted[0] if converted else None
        return m

    def messages(self) -> tuple[Message, ...]:
        """The current window as messages. Kept between requests and extended by the items
        recorded since; rebuilt when a new compaction marker delimits a new window."""
        marker = self.last_compaction()
        marker_seq = marker.seq if marker is not None else 0
        cached = self._window_msgs
        if cached is None or cached[0] != marker_seq:
            out: list[Message] = []
            if marker is not None:
                out.append(UserMessage(SUMMARY_HEAD.format(n=marker.data["n"]) + "\n" + marker.data["summary"]))
            after = int(marker.data["upto_seq"]) if marker else 0
        else:
            _, after, out = cached
        new = self._cache[bisect.bisect_right(self._seqs, after) :]
        for it in new:
            if it.kind != "compaction":
                m = self._message(it)
                if m is not None:
                    out.append(m)
        self._window_msgs = (marker_seq, new[-1].seq if new else after, out)
        return tuple(out)

    def window_user_ids(self) -> set[str]:
        """The msg ids of the user's messages in the current history window."""
        _, items = self.window()
        return {it.msg_id for it in items if it.kind == "user" and it.msg_id}

    def user_sources(self) -> list[UserSource]:
        self._sync()
        return list(self._users)

    def unmatched_calls(self) -> list[Unmatched]:
        """Tool calls of recorded responses that have no result item yet."""
        self._sync()
        return list(self._open_calls.values())

    def requests(self) -> list[RequestRow]:
        rows = self.store.query("SELECT * FROM agent_requests WHERE session_id = ? ORDER BY id", (self.session_id,))
        attempts: dict[int, list[dict[str, Any]]] = {}
        for a in self.store.query(
            "SELECT a.* FROM agent_attempts a JOIN agent_requests r ON r.id = a.request_id "
            "WHERE r.session_id = ? ORDER BY a.request_id, a.number",
            (self.session_id,),
        ):
            attempts.setdefault(a["request_id"], []).append(dict(a))
        return [
            RequestRow(
                id=r["id"],
                turn=r["turn"],
                purpose=r["purpose"],
                status=r["status"],
                stop_reason=r["stop_reason"],
                usage={
                    "input_tokens": r["input_tokens"] or 0,
                    "output_tokens": r["output_tokens"] or 0,
                    "cached_tokens": r["cached_tokens"] or 0,
                },
                attempts=attempts.get(r["id"], []),
                started_at=r["started_at"],
                ended_at=r["ended_at"],
                error=r["error"],
            )
            for r in rows
        ]

    def calls_seq_floor(self) -> int:
        """A seq no later call row of this session can be at or under (seq is one global sequence)."""
        return self.store.call_seq_floor()




class StreamSaver:
    """Saves a turn request's streamed text while it arrives (``Transcript.save_partial``): at most
    every ``STREAM_SAVE_INTERVAL_S`` of streaming, or as soon as ``STREAM_SAVE_BYTES`` of new text
    arrived, whichever comes first; never a write per delta, and none at all for an answer that
    ends before either (its timer is cancelled unfired). A stalled stream is saved by the timer."""

    def __init__(self, transcript: Transcript, request_id: int, parts: list[str]) -> None:
        self.transcript = transcript
        self.request_id = request_id
        self.parts = parts  # the stream's text so far, as the loop collects it (cleared on a restart)
        self._saved_parts = 0  # how many of ``parts`` are durable
        self._whole = True  # the next save writes the whole text (the first, or after a restart)
        self._new_bytes = 0
        self._last = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None

    def added(self, text: str) -> None:
        """``text`` was appended to ``parts``."""
        self._new_bytes += len(text.encode("utf-8", "surrogatepass"))
        if self._new_bytes >= limits.STREAM_SAVE_BYTES:
            self.save()
        elif self._timer is None:
            wait = max(0.0, self._last + limits.STREAM_SAVE_INTERVAL_S - time.monotonic())
            self._timer = asyncio.get_running_loop().call_later(wait, self.save)

    def restarted(self) -> None:
        """The stream restarted (``parts`` was cleared): the saved text is void, the next save replaces it."""
        self._saved_parts = 0
        self._whole = True
        if self._timer is None and self.request_id in self.transcript._partials:
            self._timer = asyncio.get_running_loop().call_later(limits.STREAM_SAVE_INTERVAL_S, self.save)

    def save(self) -> None:
        self.stop()
        whole = self._whole
        text = "".join(self.parts if whole else self.parts[self._saved_parts :])
        count = len(self.parts)
        try:
            self.transcript.save_partial(self.request_id, text, whole=whole)
        except Exception:  # a failed save is tried again, whole, with the next text: the stream goes
            # on, and the request's own outcome is written (or fails) as ever
            self._whole = True
            return
        self._saved_parts, self._whole, self._new_bytes = count, False, 0
        self._last = time.monotonic()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
