"""The shell family: the ``shell`` tool, its verification receipts, environment and pre-flight.

Public API::

    from zuno.tools.shell import get_receipt, add_env_hook
    get_receipt(runtime.store, "rcp_…")            # a stored verification receipt (dict) or None
    add_env_hook(session, lambda env, info: {...})  # put values back into a command's environment

The names are re-exported lazily (``__getattr__``): importing this package, as every module of the
family does first (``zuno.tools.shell.receipts`` for ``zuno receipt``), loads no tool, no process
machinery and no event loop; the shell tool is imported when the registry registers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zuno import family_migrations
from zuno.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from zuno.surface import Registry
    from zuno.tools.shell.env import EnvHook, EnvHookInfo, add_env_hook
    from zuno.tools.shell.receipts import get_receipt, receipts_for_session, render_receipt
    from zuno.tools.shell.tool import ShellArgs, ShellTool

MIGRATIONS = family_migrations.SHELL_RECEIPTS  # (zuno.tools.shell.receipts.MIGRATIONS)

# The re-exported names -> the module of the family that defines them.
_WHERE = {
    "EnvHook": "env",
    "EnvHookInfo": "env",
    "add_env_hook": "env",
    "get_receipt": "receipts",
    "receipts_for_session": "receipts",
    "render_receipt": "receipts",
    "ShellArgs": "tool",
    "ShellTool": "tool",
}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, globals())


def register(registry: Registry) -> None:
    from zuno.tools.shell.tool import ShellTool

    registry.add("shell", ShellTool, profiles=("zuno", "chord"))


def receipt(store_or_runtime: Any, receipt_id: str) -> dict[str, Any] | None:
    """A verification receipt by id, from a ``zuno.Runtime`` or its store."""
    from zuno.tools.shell.receipts import get_receipt

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
