"""Durable work state: plan, todo, goal, task_context, notes, history, memory.

Every document is revisioned (docstore.py): a mutation carries the revision it was based on, a
stale one is a typed refusal naming the current revision, a repeated delivery is idempotent.
See docs/state.md.

Read API::

    from zuno.tools.state import read_state
    read_state(runtime.store, session_id)   # {"goal": ..., "plan": ..., "todo": ...}
"""

from __future__ import annotations

from zuno.surface import Registry
from zuno.tools.state.api import plan_instruction, read_goal, read_plan, read_state, read_todo
from zuno.tools.state.docstore import MIGRATIONS as _DOC_MIGRATIONS
from zuno.tools.state.goal import GoalGetTool, GoalUpdateTool
from zuno.tools.state.goal_input import MIGRATIONS as _GOAL_INPUT_MIGRATIONS
from zuno.tools.state.goal_input import GoalRequestInputTool
from zuno.tools.state.history import HistoryTool, record_compaction
from zuno.tools.state.memory import MIGRATIONS as _MEMORY_MIGRATIONS
from zuno.tools.state.memory import MemoryReadTool, MemoryUpdateTool, accept_proposal, reject_proposal
from zuno.tools.state.notes import MIGRATIONS as _NOTES_MIGRATIONS
from zuno.tools.state.notes import NotesTool
from zuno.tools.state.plan import PlanGetTool, PlanUpdateTool
from zuno.tools.state.progress import observe_goal
from zuno.tools.state.projection import refresh_goal, refresh_plan, refresh_todo
from zuno.tools.state.sources import MIGRATIONS as _SOURCE_MIGRATIONS
from zuno.tools.state.sources import lookup_message, record_message, source_digest
from zuno.tools.state.task_context import TaskContextTool
from zuno.tools.state.todo import TodoGetTool, TodoUpdateTool, TodoWriteTool

MIGRATIONS = [
    *_DOC_MIGRATIONS,
    *_SOURCE_MIGRATIONS,
    *_NOTES_MIGRATIONS,
    *_MEMORY_MIGRATIONS,
    *_GOAL_INPUT_MIGRATIONS,
]


def register(registry: Registry) -> None:
    registry.add("plan_get", PlanGetTool, profiles=("zuno",))
    registry.add("plan_update", PlanUpdateTool, profiles=("zuno",))
    registry.add("todo_get", TodoGetTool, profiles=("zuno",))
    registry.add("todo_update", TodoUpdateTool, profiles=("zuno",))
    registry.add("goal_get", GoalGetTool, profiles=("zuno",))
    registry.add("goal_update", GoalUpdateTool, profiles=("zuno",))
    registry.add("goal_request_input", GoalRequestInputTool, profiles=("zuno",))
    registry.add("todo_write", TodoWriteTool, profiles=("chord",))
    registry.add("task_context", TaskContextTool, profiles=("zuno",))
    registry.add("history", HistoryTool, profiles=("zuno",))
    registry.add("notes", NotesTool, profiles=("zuno",))
    registry.add("memory_read", MemoryReadTool, profiles=("zuno",))
    registry.add("memory_update", MemoryUpdateTool, profiles=("zuno",))
    registry.refreshers.append(("goal", refresh_goal))
    registry.refreshers.append(("plan", refresh_plan))
    registry.refreshers.append(("todo", refresh_todo))
    registry.goal_observers.append(observe_goal)


__all__ = [
    "MIGRATIONS",
    "accept_proposal",
    "lookup_message",
    "plan_instruction",
    "read_goal",
    "read_plan",
    "read_state",
    "read_todo",
    "record_compaction",
    "record_message",
    "register",
    "reject_proposal",
    "source_digest",
]
