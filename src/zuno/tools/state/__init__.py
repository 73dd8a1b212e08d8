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

from typing import TYPE_CHECKING

from zuno import family_migrations
from zuno.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from zuno.tools.state.api import plan_instruction, read_goal, read_plan, read_state, read_todo
    from zuno.tools.state.history import record_compaction
    from zuno.tools.state.memory import accept_proposal, reject_proposal
    from zuno.tools.state.registration import register
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
    "register": "registration",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, globals())


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
