"""Zuno: a tool runtime for coding agents.

The names below are re-exported lazily (PEP 562): ``from zuno import Runtime`` imports
``zuno.runtime`` then, so a command that needs none of them (``zuno --version``) starts without
the runtime, the config models or the tool families.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zuno.config import Config, ConfigError, load_config
    from zuno.declarations import BlockKind, Concurrency, Declarations, Effect, Outcome, Replay
    from zuno.permissions import ApprovalRequest, Approver, AutoApprover, NoApprover
    from zuno.records import CallRecord, StepResult
    from zuno.runtime import Runtime, Session
    from zuno.store import SessionBusy
    from zuno.tool import Refused, Tool, ToolArgs, ToolContext, ToolOutput, TransientError, tool

_EXPORTS = {
    "zuno.config": ("Config", "ConfigError", "load_config"),
    "zuno.declarations": ("BlockKind", "Concurrency", "Declarations", "Effect", "Outcome", "Replay"),
    "zuno.permissions": ("ApprovalRequest", "Approver", "AutoApprover", "NoApprover"),
    "zuno.records": ("CallRecord", "StepResult"),
    "zuno.runtime": ("Runtime", "Session"),
    "zuno.store": ("SessionBusy",),
    "zuno.tool": ("Refused", "Tool", "ToolArgs", "ToolContext", "ToolOutput", "TransientError", "tool"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "ApprovalRequest",
    "Approver",
    "AutoApprover",
    "BlockKind",
    "CallRecord",
    "Concurrency",
    "Config",
    "ConfigError",
    "Declarations",
    "Effect",
    "NoApprover",
    "Outcome",
    "Refused",
    "Replay",
    "Runtime",
    "Session",
    "SessionBusy",
    "StepResult",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutput",
    "TransientError",
    "load_config",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'zuno' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once found, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


class _Package(types.ModuleType):
    """``zuno.tool`` is the decorator, as it always was, though a submodule has that name too: the
    import system binds a loaded submodule as its package's attribute, and this property keeps the
    name for the decorator (the submodule is ``sys.modules["zuno.tool"]``)."""

    @property
    def tool(self) -> Any:
        from zuno.tool import tool

        return tool

    @tool.setter
    def tool(self, value: Any) -> None:
        pass


sys.modules[__name__].__class__ = _Package
