"""``zuno goal resume`` and the interactive ``/goal resume``: the user's explicit resumption of a
paused Goal (a model pause, or the host's ``no_progress``). The model can never resume a Goal;
this is the one way a person does, at the revision they see, recorded like any other mutation.

    zuno goal resume [--session ID | --continue] [--input ANSWER [--request GI_ID]] [--json]

A Goal paused ``waiting_input`` waits for the user's input: a plain resume is refused (saying so, and
how to give it); ``--input ANSWER`` gives it and resumes the Goal, the answer recorded in the Goal
(goal_get's ``input_answer``, and the dynamic context) for the model to read. A Goal paused by
goal_request_input waits for exactly that request: the answer closes its wait (``answered``) in the
same transaction; ``--request GI_ID`` names it, and is refused if the Goal waits for another. A
second answer to an answered request is refused (not taken again, not replaced). In ``zuno run``:
``/goal resume [--request GI_ID] [ANSWER]`` (``resume_from_line``), refused as the command is.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from zuno.cli_support import EXIT_NOT_OK, EXIT_OK, EXIT_USAGE, print_json, store_from_args
from zuno.session_ids import InvalidSessionId, SessionNotFound


@dataclass(frozen=True, slots=True)
class Resumed:
    ok: bool
    message: str
    revision: int = 0
    request: str | None = None  # the required-input request the answer answered


def answer_problem(answer: str | None) -> str | None:
    """Why ``answer`` (``--input``) cannot be an answer (blank, too long), or None."""
    from zuno.tools.state.goal import GOAL_INPUT_MAX_CHARS

    if answer is None:
        return None
    if not answer.strip():
        return "--input is blank: give the answer the Goal waits for, in words."
    if len(answer) > GOAL_INPUT_MAX_CHARS:
        return f"--input is {len(answer):,} characters; an answer holds at most {GOAL_INPUT_MAX_CHARS:,}. Shorten it."
    return None


def resume_paused_goal(
    store: Any, session_id: str, answer: str | None = None, request: str | None = None
) -> Resumed:
    """Resume the session's Goal if it is paused; otherwise say why nothing was done. A Goal waiting
    for input resumes only with ``answer`` (the input), and ``answer`` answers only such a Goal.
    ``request``: the required-input request (gi_…) the answer answers; refused unless it is the one
    the Goal waits for. An answered request is not answered again (refused, naming its answer)."""
    from zuno.tools.state import docstore, goal

    problem = answer_problem(answer) or request_problem(answer, request)
    if problem is not None:
        return Resumed(False, problem)
    doc = docstore.read(store, goal.scope_of(session_id), goal.KIND)
    if doc.body is None:
        return Resumed(False, f"session {session_id} has no Goal: nothing to resume.")
    closed = closed_request(store, session_id, request)
    if closed is not None:
        return Resumed(False, closed, doc.revision)
    status = doc.body["status"]
    if status != "paused":
        nothing = f"the Goal is {status}, not paused: nothing to resume.{_answered(doc.body)}"
        return Resumed(False, nothing, doc.revision)
    why = (doc.body.get("pause_reason") or {}).get("kind", "paused")
    delivery = f"user-goal-resume-{uuid.uuid4().hex}"
    try:
        result = goal.resume_goal(store, session_id, doc.revision, delivery, answer, request)
    except docstore.StateRefusal as r:  # waiting for input; or it changed meanwhile (another process)
        return Resumed(False, refusal_for_a_person(r, session_id), doc.revision)
    answered = (doc.body.get("pause_reason") or {}).get("request") if answer is not None else None
    facts = {
        "revision": result["revision"],
        "was": why,
        **({"answered": True} if answer is not None else {}),
        **({"request": answered} if answered else {}),
    }
    store.add_event(session_id, "goal-resumed", facts)
    with_answer = ""
    if answer is not None:
        with_answer = f" with your answer to {answered}" if answered else " with your answer"
    done = f"Goal resumed{with_answer} (it was paused: {why}; now revision {result['revision']})."
    return Resumed(True, done, result["revision"], answered)


GOAL_LINE_USAGE = (
    "/goal resume [--request GI_ID] [your answer] (resumes the paused Goal; --request names the "
    "required-input request the answer answers; zuno goal shows it)"
)


def parse_goal_line(line: str) -> tuple[str | None, str | None] | str:
    """The (answer, request) of an interactive ``/goal resume [--request GI_ID] [ANSWER]`` line
    (``--request=GI_ID`` too), or why the line is not one (the usage, or what is missing)."""
    words = line.split(None, 2)
    if words[:1] != ["/goal"] or words[1:2] != ["resume"]:
        return GOAL_LINE_USAGE
    rest = words[2] if len(words) > 2 else ""
    request: str | None = None
    parts = rest.split(None, 1)
    if parts and (parts[0] == "--request" or parts[0].startswith("--request=")):
        if parts[0] == "--request":
            parts = parts[1].split(None, 1) if len(parts) > 1 else [""]
        else:
            parts[0] = parts[0].removeprefix("--request=")
        request = parts[0]
        if not request:
            return "/goal resume --request needs the request's id: /goal resume --request GI_ID your answer."
        rest = parts[1] if len(parts) > 1 else ""
    answer = rest.strip() or None
    if request is not None and answer is None:
        return (
            f"--request {request} names the request to answer: give the answer after it "
            f"(/goal resume --request {request} your answer)."
        )
    return answer, request


def resume_from_line(store: Any, session_id: str, line: str) -> str:
    """What interactive ``zuno run`` says for a ``/goal ...`` line: the usage, or the resume's outcome
    (the same refusals as ``zuno goal resume --input ANSWER --request GI_ID``). A store locked by
    another process raises (``StoreUnusable``), nothing resumed."""
    parsed = parse_goal_line(line)
    if isinstance(parsed, str):
        return parsed
    answer, request = parsed
    return resume_paused_goal(store, session_id, answer, request).message


def request_problem(answer: str | None, request: str | None) -> str | None:
    """Why ``--request`` cannot be used as given (without an answer), or None."""
    if request is not None and answer is None:
        return f"--request {request} names the request to answer: give the answer with --input 'your answer'."
    return None


def closed_request(store: Any, session_id: str, request: str | None) -> str | None:
    """Why the named request cannot be answered (unknown, already answered, cancelled), or None."""
    if request is None:
        return None
    from zuno.tools.state import goal_input

    row = goal_input.request_row(store, session_id, request)
    if row is None:
        return f"session {session_id} has no required-input request {request}. Run 'zuno goal' to see the pending one."
    if row["status"] == "answered":
        return (
            f"request {request} was already answered ({row['answer']!r}); a request is answered once, and the "
            "Goal has that answer. Say anything more as the next prompt."
        )
    if row["status"] == "cancelled":
        return f"request {request} was cancelled (the Goal stopped waiting for it): there is nothing to answer."
    return None


def _answered(body: dict[str, Any]) -> str:
    got = body.get("input_answer") or {}
    if not got.get("request"):
        return ""
    return f" Its request {got['request']} was already answered; a request is answered once."


def refusal_for_a_person(r: Any, session_id: str) -> str:
    """A resume's refusal as the person who asked for it reads it. The state layer's advice is the
    model's ("Call goal_get, then … send expected_revision N"): a person lost a race to another
    change of the Goal, and looks again."""
    if r.kind == "StaleRevision":
        return (
            "the Goal changed while it was being resumed (another process changed it); nothing was resumed. "
            f"Run 'zuno goal --session {session_id}' to see it as it is now, and resume again if it is still paused."
        )
    return f"{r.message} {r.required_action}"


def run(args: argparse.Namespace) -> int:
    problem = answer_problem(args.input) or request_problem(args.input, args.request)
    if problem is not None:
        print(f"zuno: {problem}", file=sys.stderr)
        return EXIT_USAGE
    rt = store_from_args(args)
    try:
        try:
            sid = rt.resolve_session(args.session, continue_latest=True)
        except (SessionNotFound, InvalidSessionId) as e:
            print(f"zuno: {e}", file=sys.stderr)
            return EXIT_USAGE
        assert sid is not None  # continue_latest: a session, or SessionNotFound
        done = resume_paused_goal(rt.store, sid, args.input, args.request)
        if args.json:
            answered = {"request": done.request} if done.request else {}
            print_json(
                {"session": sid, "resumed": done.ok, "revision": done.revision, "message": done.message, **answered}
            )
        elif done.ok:
            print(f"session {sid}: {done.message} Continue it with: zuno resume {sid} --mode goal")
        else:
            print(f"zuno: {done.message}", file=sys.stderr)
        return EXIT_OK if done.ok else EXIT_NOT_OK
    finally:
        rt.close_stores()
