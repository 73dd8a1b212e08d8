"""Durable work state: plan, todo, goal, task_context, notes, history, memory.

Every document is revisioned (docstore.py): a mutation carries the revision it was based on, a
stale one is a typed refusal naming the current revision, a repeated delivery is idempotent.
See docs/state.md.

Read API::

    from zuno.tools.state import read_state
    read_state(runtime.store, session_id)   # {"goal": ..., "plan": ..., "todo": ...}

The names are re-exported lazily (``__getattr__``): importing this package, as every module of the
family does first, loads none of the family's tools, so ``zuno plan`` loads the read API and the
documents it reads, ``zuno memory`` the memory's; the tools are imported when the registry
registers them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from zuno import family_migrations

if TYPE_CHECKING:
    from zuno.surface import Registry
    from zuno.tools.state.api import plan_instruction, read_goal, read_plan, read_state, read_todo
    from zuno.tools.state.history import record_compaction
    from zuno.tools.state.memory import accept_proposal, reject_proposal
    from zuno.tools.state.sources import lookup_message, record_message, source_digest

# The family's tables (each module's MIGRATIONS), in the order the registry applies them.
MIGRATIONS = [
    *family_migrations.STATE_DOCUMENTS,
    *family_migrations.STATE_SOURCES,
    *family_migrations.STATE_NOTES,
    *family_migrations.STATE_MEMORY,
    *family_migrations.STATE_GOAL_INPUT,
]

# The re-exported names -> the module of the family that defines them (the tool classes too, as
# the package bound them before it re-exported lazily).
_WHERE = {
    "plan_instruction": "api",
    "read_goal": "api",
    "read_plan": "api",
    "read_state": "api",
    "read_todo": "api",
    "GoalGetTool": "goal",
    "GoalUpdateTool": "goal",
    "GoalRequestInputTool": "goal_input",
    "HistoryTool": "history",
    "record_compaction": "history",
    "MemoryReadTool": "memory",
    "MemoryUpdateTool": "memory",
    "accept_proposal": "memory",
    "reject_proposal": "memory",
    "NotesTool": "notes",
    "PlanGetTool": "plan",
    "PlanUpdateTool": "plan",
    "observe_goal": "progress",
    "refresh_goal": "projection",
    "refresh_plan": "projection",
    "refresh_todo": "projection",
    "lookup_message": "sources",
    "record_message": "sources",
    "source_digest": "sources",
    "TaskContextTool": "task_context",
    "TodoGetTool": "todo",
    "TodoUpdateTool": "todo",
    "TodoWriteTool": "todo",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


def register(registry: Registry) -> None:
    from zuno.tools.state.goal import GoalGetTool, GoalUpdateTool
    from zuno.tools.state.goal_input import GoalRequestInputTool
    from zuno.tools.state.history import HistoryTool
    from zuno.tools.state.memory import MemoryReadTool, MemoryUpdateTool
    from zuno.tools.state.notes import NotesTool
    from zuno.tools.state.plan import PlanGetTool, PlanUpdateTool
    from zuno.tools.state.progress import observe_goal
    from zuno.tools.state.projection import refresh_goal, refresh_plan, refresh_todo
    from zuno.tools.state.task_context import TaskContextTool
    from zuno.tools.state.todo import TodoGetTool, TodoUpdateTool, TodoWriteTool

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
