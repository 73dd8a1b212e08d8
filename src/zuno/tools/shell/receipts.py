"""Verification receipts: what ran, what it decided, the exit code, and how far that code reaches.

A receipt is stored durably (table ``shell_receipts``) under an id ``rcp_…`` that appears in the
tool result as ``[verification rcp_…]``. That id, not a recollection of the transcript, is what a
later step cites as evidence: ``zuno receipt RCP_ID [--json]`` or :func:`get_receipt`.

``decision`` is one of ``passed`` (exit 0), ``failed`` (a non-zero exit the command itself reported),
or ``nothing`` (no verdict: killed by a signal, timed out, cancelled while running, the guard's own
failure, a program that never started, a status that could not be settled).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from zuno import family_migrations
from zuno.store import Store
from zuno.tools.shell.policy import Authority, Limitation

MIGRATIONS = family_migrations.SHELL_RECEIPTS  # (the SQL: zuno.family_migrations)


def new_receipt_id() -> str:
    return "rcp_" + secrets.token_hex(10)


@dataclass(slots=True)
class Receipt:
    id: str
    command: str
    interpreter: str
    exitPolicy: str
    prologue: str
    workdir: str
    exitCode: int | None
    signal: int | None
    decision: str  # passed | failed | nothing
    authority: str  # authoritative | derived | unknown
    decidedBy: str  # which part of the command the exit code speaks for
    limitations: list[dict[str, Any]] = field(default_factory=list)
    notProven: list[str] = field(default_factory=list)  # what the number fails to prove
    killedBy: str | None = None
    guardDiagnostic: str | None = None
    cancelled: bool = False
    timedOut: bool = False
    session: str = ""
    callId: str = ""
    callSeq: int | None = None
    startedAt: float | None = None
    endedAt: float | None = None
    durationMs: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """The always-visible status line that precedes the receipt id."""
        code = f"exit {self.exitCode}" if self.exitCode is not None else "no exit code"
        if self.signal is not None:
            code = f"killed by signal {self.signal}" + (
                f" ({self.killedBy})" if self.killedBy and self.killedBy != "signal" else ""
            )
        parts = [code, self.decision, f"{self.authority} ({self.exitPolicy}, {self.interpreter})"]
        if self.decidedBy.startswith("the last statement"):
            parts.append("decided by " + self.decidedBy.split(";")[0].removeprefix("the "))
        text = "[" + " · ".join(parts) + "]"
        if self.limitations:
            for lim in self.limitations[:4]:
                where = f" at {lim['at']}" if lim.get("at") else ""
                snip = f" `{lim['snippet']}`" if lim.get("snippet") else ""
                text += (
                    f"\n[{self.authority}: {lim['construct']}{where}{snip}: {lim['text']}. Remedy: {lim['remedy']}.]"
                )
            if len(self.limitations) > 4:
                text += f"\n[{len(self.limitations) - 4} more limitation(s) in the receipt]"
        if self.notProven:
            label = "decides nothing" if self.decision == "nothing" else "not covered"
            text += f"\n[{label}: " + "; ".join(self.notProven) + "]"
        return text


def limitation_dicts(lims: list[Limitation] | tuple[Limitation, ...]) -> list[dict[str, Any]]:
    return [lim.as_dict() for lim in lims]


def authority_of(base: Authority, lims: list[Limitation] | tuple[Limitation, ...]) -> Authority:
    if base is Authority.unknown:
        return base
    return Authority.derived if lims else base


def save_receipt(store: Store, r: Receipt) -> None:
    store.execute(
        "INSERT INTO shell_receipts (id, session_id, call_id, call_seq, created_at, authority, decision, "
        "exit_code, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            r.id,
            r.session,
            r.callId,
            r.callSeq,
            time.time(),
            r.authority,
            r.decision,
            r.exitCode,
            json.dumps(r.as_dict(), ensure_ascii=False),
        ),
    )


def get_receipt(store: Store, receipt_id: str) -> dict[str, Any] | None:
    """A stored verification receipt by its id (``rcp_…``), or None."""
    rows = store.query("SELECT body FROM shell_receipts WHERE id = ?", (receipt_id,))
    if not rows:
        return None
    body: dict[str, Any] = json.loads(rows[0]["body"])
    return body


def receipts_for_session(store: Store, session_id: str) -> list[dict[str, Any]]:
    rows = store.query("SELECT body FROM shell_receipts WHERE session_id = ? ORDER BY call_seq", (session_id,))
    return [json.loads(r["body"]) for r in rows]


def render_receipt(r: dict[str, Any]) -> str:
    """A receipt as text for a person (``zuno receipt RCP_ID``)."""
    lines = [
        f"verification {r['id']}",
        f"  command:    {r['command']}",
        f"  ran with:   {r['interpreter']} ({r['prologue']}), exitPolicy {r['exitPolicy']}, in {r['workdir']}",
        f"  exit code:  {r['exitCode'] if r['exitCode'] is not None else 'none'}"
        + (f" (signal {r['signal']})" if r.get("signal") is not None else ""),
        f"  decided:    {r['decision']} — {r['decidedBy']}",
        f"  authority:  {r['authority']}",
    ]
    for lim in r.get("limitations") or []:
        where = f" at {lim['at']}" if lim.get("at") else ""
        snip = f" `{lim['snippet']}`" if lim.get("snippet") else ""
        lines.append(f"  limitation: {lim['construct']}{where}{snip}: {lim['text']}. Remedy: {lim['remedy']}.")
    for np in r.get("notProven") or []:
        lines.append(f"  not proven: {np}")
    if r.get("cancelled"):
        lines.append("  cancelled:  yes")
    if r.get("killedBy"):
        lines.append(f"  stopped by: {r['killedBy']}")
    if r.get("guardDiagnostic"):
        lines.append(f"  guard:      {r['guardDiagnostic']}")
    lines.append(f"  session:    {r['session']} call {r['callId']}")
    return "\n".join(lines)
