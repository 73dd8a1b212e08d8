"""The read API: a session's current Goal, Plan and Todo list, as plan_get / goal_get / todo_get
return them. Reads only; never creates a session."""

from __future__ import annotations

from typing import Any

from zuno.store import Store
from zuno.tools.state import docstore, goal, plan, todo


def _doc(store: Store, session_id: str, kind: str) -> docstore.Doc:
    return docstore.read(store, plan.scope_of(session_id), kind)


def read_plan(store: Store, session_id: str) -> dict[str, Any]:
    return plan.view(_doc(store, session_id, plan.KIND))


def read_todo(store: Store, session_id: str) -> dict[str, Any]:
    return todo.view(_doc(store, session_id, todo.KIND))


def read_goal(store: Store, session_id: str) -> dict[str, Any]:
    return goal.view(_doc(store, session_id, goal.KIND))


def read_state(store: Store, session_id: str) -> dict[str, Any]:
    return {
        "session": session_id,
        "goal": read_goal(store, session_id),
        "plan": read_plan(store, session_id),
        "todo": read_todo(store, session_id),
    }


def plan_instruction(store: Store, session_id: str) -> str:
    """Explicit Plan mode: "Required" until the session's Plan has had a successful mutation
    (any committed revision), then "Maintain" — the same value plan_update results carry in
    ``metadata["planInstruction"]``."""
    return "Maintain" if _doc(store, session_id, plan.KIND).revision > 0 else "Required"
