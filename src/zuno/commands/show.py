"""``zuno show ID [--json]``: an agent session's transcript, readable.

Turns with their mode and stop reason; user messages with their ids; the model's text and tool
calls; each result with its outcome; notices; compaction markers; and per request its attempts,
provider time (the wire attempts) apart from the turn's elapsed time, and usage.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from zuno.cli_support import EXIT_OK, STORE_IMPORTS, UsageError, add_common_arguments, print_json, store_from_args
from zuno.session_ids import InvalidSessionId, SessionNotFound

if TYPE_CHECKING:
    from zuno.agent.transcript import Transcript

RESULT_PREVIEW_CHARS = 400


def add_parser(sub: Any) -> None:
    p = sub.add_parser("show", help="show an agent session's transcript")
    p.add_argument("session_id", metavar="ID", nargs="?", default=None, help="the session ('zuno sessions' lists them)")
    p.add_argument(
        "-c", "--continue", dest="continue_latest", action="store_true", help="the most recent session, for ID"
    )
    p.add_argument("--json", action="store_true", help="the transcript as JSON")
    add_common_arguments(p, session=False)
    p.set_defaults(func=cmd_show, imports=(*STORE_IMPORTS, "zuno.agent.transcript"))


def cmd_show(args: argparse.Namespace) -> int:
    from zuno.agent.transcript import Transcript

    rt = store_from_args(args)
    try:
        if (args.session_id is None) == (not args.continue_latest):
            raise UsageError(
                "zuno show takes a session ID or -c (the most recent session), one of them: "
                "'zuno sessions' lists the sessions."
            )
        try:
            sid = rt.resolve_session(args.session_id, continue_latest=args.continue_latest)
        except (InvalidSessionId, SessionNotFound) as e:
            raise UsageError(str(e)) from None
        assert sid is not None
        t = Transcript(rt.store, sid)
        if args.json:
            print_json(transcript_json(t))
        else:
            from zuno.commands.state import state_summary
            from zuno.commands.terminal_markdown import visible_controls

            print(visible_controls(render(t)), end="")  # the model's escape sequences are shown, never obeyed
            if not t.items():
                print(no_conversation(len(rt.store.calls(sid)), sid))
            for line in state_summary(rt.store, sid):  # the session's Goal, Plan and Todo as they are now
                print(visible_controls(line))
        return EXIT_OK
    finally:
        rt.close_stores()


def no_conversation(calls: int, sid: str) -> str:
    """What ``show`` says of a session no model has driven (zuno call / batch / steps, MCP)."""
    if not calls:
        return "(no agent conversation in this session yet)"
    made = f"{calls} tool call{'' if calls == 1 else 's'} came"
    return (
        f"(no agent conversation in this session: its {made} from zuno call, batch, steps or MCP; "
        f"see them with `zuno events --session {sid}`)"
    )


def transcript_json(t: Transcript) -> dict[str, Any]:
    state = t.state()
    return {
        "session": t.session_id,
        "mode": state.mode,
        "model": state.model,
        "turns": t.turns(),
        "items": [
            {
                "seq": i.seq,
                "turn": i.turn,
                "kind": i.kind,
                "msg_id": i.msg_id,
                "digest": i.digest,
                "call_id": i.call_id,
                "step": i.step,
                "call_seq": i.call_seq,
                "request_id": i.request_id,
                "data": {k: v for k, v in i.data.items() if k not in ("opaque", "images")},
                "at": i.at,
            }
            for i in t.items()
        ],
        "requests": [
            {
                "id": r.id,
                "turn": r.turn,
                "purpose": r.purpose,
                "status": r.status,
                "stop_reason": r.stop_reason,
                "usage": r.usage,
                "attempts": r.attempts,
                "provider_time_s": provider_time(r.attempts),
                "started_at": r.started_at,
                "ended_at": r.ended_at,
                "error": r.error,
            }
            for r in t.requests()
        ],
        # The streamed text of answers that never completed (the process was killed mid-stream, or
        # is streaming now): saved as it came, recorded as interrupted by the session's next turn.
        "partial_responses": [partial_json(p) for p in t.partials()],
    }


def partial_json(p: dict[str, Any]) -> dict[str, Any]:
    streaming = p["state"] == "streaming"
    return {
        "request_id": p["request_id"],
        "turn": p["turn"],
        "purpose": p["purpose"],
        "text": p["text"],
        # "streaming": the process writing it (writer_pid, the same process by its start time)
        # still runs; "interrupted": it died before the answer completed; "unknown": no writer recorded.
        "state": "streaming" if streaming else "interrupted" if p["state"] == "died" else "unknown",
        "streaming": streaming,
        "interrupted": not streaming,
        "complete": False,
        "writer_pid": p["writer_pid"],
        "started_at": p["started_at"],
        "saved_at": p["updated_at"],
    }


PARTIAL_HEADS = {
    "streaming": "model (request {number}: still streaming (pid {pid}): its text so far, saved while it streams)",
    "died": (
        "model (request {number}: interrupted: the process died before the answer completed (pid {pid}); "
        "its text so far, saved while it streamed; `zuno resume` records it as interrupted)"
    ),
    "unknown": (
        "model (request {number}: the answer never completed: its text so far, saved while it streamed; "
        "`zuno resume` records it as interrupted)"
    ),
}
PARTIAL_MARKS = {"streaming": " [streaming…]", "died": " [interrupted]", "unknown": " [interrupted]"}


def provider_time(attempts: list[dict[str, Any]]) -> float:
    return round(sum(a["ended_at"] - a["started_at"] for a in attempts), 6)


def _preview(text: str) -> str:
    text = text.rstrip("\n")
    if len(text) > RESULT_PREVIEW_CHARS:
        text = text[:RESULT_PREVIEW_CHARS] + f"… ({len(text)} chars)"
    return text.replace("\n", "\n      ")


def render(t: Transcript) -> str:
    state = t.state()
    out = [f"session {t.session_id} · mode {state.mode} · model {state.model or '-'}"]
    turns = {x["n"]: x for x in t.turns()}
    requests = {r.id: r for r in t.requests()}
    # Requests are numbered in the session (1, 2, …); their ids are the store's, shared by every
    # session of the workspace (and reserved in blocks), so a second request may be id 65.
    number = {rid: i for i, rid in enumerate(requests, 1)}
    current = 0
    for it in t.items():
        if it.turn != current:
            current = it.turn
            tr = turns.get(current, {})
            elapsed = (tr["ended_at"] - tr["started_at"]) if tr.get("ended_at") else None
            out.append("")
            out.append(
                f"── turn {current} ({tr.get('mode', '?')}) · stop {tr.get('stop_reason') or 'open'}"
                + (f" · {tr.get('steps', 0)} steps · elapsed {elapsed:.2f}s" if elapsed is not None else "")
            )
        d = it.data
        if it.kind == "user":
            out.append(f"user [{it.msg_id}]: {d['text']}")
        elif it.kind == "notice":
            out.append(f"notice ({d['source']}): {_preview(d['text'])}")
        elif it.kind == "assistant":
            r = requests.get(it.request_id or 0)
            if r is not None:
                retries = f", {len(r.attempts)} attempts" if len(r.attempts) > 1 else ""
                out.append(
                    f"model (request {number[r.id]}: provider {provider_time(r.attempts):.3f}s{retries}, "
                    f"{r.usage['input_tokens']} in / {r.usage['output_tokens']} out / "
                    f"{r.usage['cached_tokens']} cached)"
                )
            if d["text"]:
                out.append("  " + d["text"].replace("\n", "\n  ") + _cut_mark(d))
            for c in d["tool_calls"]:
                out.append(f"  → {c['name']} {c['arguments']} [{c['id']}]")
        elif it.kind == "tool_result":
            flag = " (recovered)" if d.get("recovered") else " (cancelled)" if d.get("cancelled") else ""
            out.append(f"  ← {d['name']} [{it.call_id}] {d['outcome']}{flag}: {_preview(d['text'])}")
        elif it.kind == "compaction":
            out.append(
                f"── compaction {d['n']}: the history before item {d['upto_seq']} was summarised by {d['model']}"
            )
    for extra, p in enumerate(t.partials(), 1):
        if p["turn"] != current:
            current = p["turn"]
            out.append("")
            out.append(f"── turn {current} · stop {(turns.get(current) or {}).get('stop_reason') or 'open'}")
        head = PARTIAL_HEADS[p["state"]]
        out.append(head.format(number=number.get(p["request_id"], len(number) + extra), pid=p["writer_pid"]))
        out.append("  " + p["text"].replace("\n", "\n  ") + PARTIAL_MARKS[p["state"]])
    failed = [r for r in requests.values() if r.status == "failed"]
    for r in failed:
        out.append(failed_request_line(number[r.id], r.purpose, r.turn, len(r.attempts), r.error))
    return "\n".join(out) + "\n"


def _cut_mark(d: dict[str, Any]) -> str:
    """How an answer cut off ends: interrupted (the user, a killed process), or failed (the
    provider's error mid-stream, named)."""
    failed = d.get("failed")
    if failed:
        error = str(failed.get("error") or "").split("\n", 1)[0]
        return f" [failed ({failed.get('category', 'error')}): the request failed before the answer completed: {error}]"
    return " [interrupted]" if d.get("interrupted") else ""


def failed_request_line(number: int, purpose: str, turn: int, attempts: int, error: str | None) -> str:
    """A failed request, with what it was for: a compaction's summary request ("compaction") is
    not the turn's own request ("turn")."""
    tries = f"{attempts} attempt{'' if attempts == 1 else 's'}"
    return f"request {number} (purpose {purpose}, turn {turn}) failed after {tries}: {error}"
