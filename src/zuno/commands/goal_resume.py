"""``zuno goal resume`` and the interactive ``/goal resume``: the user's explicit resumption of a
paused Goal (a model pause, or the host's ``no_progress``). The model can never resume a Goal;
this is the one way a person does, at the revision they see, recorded like any other mutation.

    zuno goal resume [--session ID | --continue] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from zuno.cli_support import EXIT_NOT_OK, EXIT_OK, EXIT_USAGE, print_json, runtime_from_args
from zuno.session_ids import InvalidSessionId, SessionNotFound


@dataclass(frozen=True, slots=True)
class Resumed:
    ok: bool
    message: str
    revision: int = 0


def resume_paused_goal(store: Any, session_id: str) -> Resumed:
    """Resume the session's Goal if it is paused; otherwise say why nothing was done."""
    from zuno.tools.state import docstore, goal

    doc = docstore.read(store, goal.scope_of(session_id), goal.KIND)
    if doc.body is None:
        return Resumed(False, f"session {session_id} has no Goal: nothing to resume.")
    status = doc.body["status"]
    if status != "paused":
        return Resumed(False, f"the Goal is {status}, not paused: nothing to resume.", doc.revision)
    why = (doc.body.get("pause_reason") or {}).get("kind", "paused")
    try:
        result = goal.resume_goal(store, session_id, doc.revision, f"user-goal-resume-{uuid.uuid4().hex}")
    except docstore.StateRefusal as r:  # it changed meanwhile (another process): say so, change nothing
        return Resumed(False, f"{r.message} {r.required_action}", doc.revision)
    store.add_event(session_id, "goal-resumed", {"revision": result["revision"], "was": why})
    return Resumed(True, f"Goal resumed (it was paused: {why}; now revision {result['revision']}).", result["revision"])


def run(args: argparse.Namespace) -> int:
    rt = runtime_from_args(args)
    try:
        try:
            sid = rt.resolve_session(args.session, continue_latest=True)
        except (SessionNotFound, InvalidSessionId) as e:
            print(f"zuno: {e}", file=sys.stderr)
            return EXIT_USAGE
        assert sid is not None  # continue_latest: a session, or SessionNotFound
        done = resume_paused_goal(rt.store, sid)
        if args.json:
            print_json({"session": sid, "resumed": done.ok, "revision": done.revision, "message": done.message})
        elif done.ok:
            print(f"session {sid}: {done.message} Continue it with: zuno resume {sid} --mode goal")
        else:
            print(f"zuno: {done.message}", file=sys.stderr)
        return EXIT_OK if done.ok else EXIT_NOT_OK
    finally:
        asyncio.run(rt.aclose())
