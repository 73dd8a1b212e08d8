"""The state family's registration: its tools, each imported when it is built, and its
refreshers and Goal observer (``zuno.tools.state.register``, re-exported lazily by the package)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zuno.surface import Registry

_PACKAGE = "zuno.tools.state"

# The family's tools: (name, module, class, profiles), in the order they register.
_TOOLS = [
    ("plan_get", "plan", "PlanGetTool", ("zuno",)),
    ("plan_update", "plan", "PlanUpdateTool", ("zuno",)),
    ("todo_get", "todo", "TodoGetTool", ("zuno",)),
    ("todo_update", "todo", "TodoUpdateTool", ("zuno",)),
    ("goal_get", "goal", "GoalGetTool", ("zuno",)),
    ("goal_update", "goal", "GoalUpdateTool", ("zuno",)),
    ("goal_request_input", "goal_input", "GoalRequestInputTool", ("zuno",)),
    ("todo_write", "todo", "TodoWriteTool", ("chord",)),
    ("task_context", "task_context", "TaskContextTool", ("zuno",)),
    ("history", "history", "HistoryTool", ("zuno",)),
    ("notes", "notes", "NotesTool", ("zuno",)),
    ("memory_read", "memory", "MemoryReadTool", ("zuno",)),
    ("memory_update", "memory", "MemoryUpdateTool", ("zuno",)),
]


def register(registry: Registry) -> None:
    """The tools, each imported when it is built (the registered slots, off the default surface,
    are not imported at all then); the refreshers and the Goal's observer now, as before (they
    import the Goal, Plan and Todo documents' modules)."""
    from zuno.surface import DeferredTool
    from zuno.tools.state.progress import observe_goal
    from zuno.tools.state.projection import refresh_goal, refresh_plan, refresh_todo

    for name, module, cls, profiles in _TOOLS:
        registry.add(name, DeferredTool(f"{_PACKAGE}.{module}", cls), profiles=profiles)
    registry.refreshers.append(("goal", refresh_goal))
    registry.refreshers.append(("plan", refresh_plan))
    registry.refreshers.append(("todo", refresh_todo))
    registry.goal_observers.append(observe_goal)
