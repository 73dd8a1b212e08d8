"""The shell family: the ``shell`` tool, its verification receipts, environment and pre-flight.

Public API::

    from zuno.tools.shell import get_receipt, add_env_hook
    get_receipt(runtime.store, "rcp_…")            # a stored verification receipt (dict) or None
    add_env_hook(session, lambda env, info: {...})  # put values back into a command's environment
"""

from __future__ import annotations

from typing import Any

from zuno.surface import Registry
from zuno.tools.shell.env import EnvHook, EnvHookInfo, add_env_hook
from zuno.tools.shell.receipts import MIGRATIONS, get_receipt, receipts_for_session, render_receipt
from zuno.tools.shell.tool import ShellArgs, ShellTool


def register(registry: Registry) -> None:
    registry.add("shell", ShellTool, profiles=("zuno", "chord"))


def receipt(store_or_runtime: Any, receipt_id: str) -> dict[str, Any] | None:
    """A verification receipt by id, from a ``zuno.Runtime`` or its store."""
    store = getattr(store_or_runtime, "store", store_or_runtime)
    return get_receipt(store, receipt_id)


__all__ = [
    "MIGRATIONS",
    "EnvHook",
    "EnvHookInfo",
    "ShellArgs",
    "ShellTool",
    "add_env_hook",
    "get_receipt",
    "receipt",
    "receipts_for_session",
    "register",
    "render_receipt",
]
