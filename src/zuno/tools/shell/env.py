"""What a shell command inherits: the host environment minus Zuno's own namespace.

The whole ``ZUNO_*`` namespace is withheld, names compared case-insensitively (``zuno_server_password``
and ``ZUNO_Pid`` included), with no allowlist. ``ZUNO`` and ``AGENT`` (outside the namespace) and
everything else are inherited — no ``*_TOKEN`` wildcard. Removal happens first; then the host's hooks
run and may deliberately put a value back: the config's ``shell.env`` (name -> value), then any
Python hooks registered with :func:`add_env_hook`. The namespace rule itself lives in
:mod:`zuno.process.environment`, because every process Zuno starts (guards, hooks, rg) follows it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zuno.process.environment import WITHHELD_PREFIX, withheld
from zuno.process.environment import withheld_environment as inherited_environment

__all__ = [
    "WITHHELD_PREFIX",
    "EnvHook",
    "EnvHookInfo",
    "EnvHooks",
    "add_env_hook",
    "build_environment",
    "inherited_environment",
    "withheld",
]


@dataclass(frozen=True, slots=True)
class EnvHookInfo:
    """What a host environment hook is told about the call it prepares."""

    command: str
    workdir: str
    interpreter: str
    session_id: str
    call_id: str


# A hook gets the environment (already without ZUNO_*) and the call; it may change the mapping in
# place, or return a mapping of changes (a value of None removes the name).
EnvHook = Callable[[dict[str, str], EnvHookInfo], Mapping[str, str | None] | None]


class EnvHooks:
    """A session service holding the host's Python environment hooks."""

    def __init__(self) -> None:
        self.hooks: list[EnvHook] = []

    def add(self, hook: EnvHook) -> None:
        self.hooks.append(hook)


def add_env_hook(session: Any, hook: EnvHook) -> None:
    """Register a host environment hook for every shell call of this session (a ``zuno.Session``).

    >>> add_env_hook(session, lambda env, info: {"ZUNO_TRACE_ID": trace_id})
    """
    session.services.get(EnvHooks, EnvHooks).add(hook)


def build_environment(
    config_env: Mapping[str, str],
    hooks: list[EnvHook],
    info: EnvHookInfo,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    env = inherited_environment(environ)
    # The host hooks run after the removal: they are the single place that puts a value back.
    env.update(config_env)
    for hook in hooks:
        changes = hook(env, info)
        if changes:
            for k, v in changes.items():
                if v is None:
                    env.pop(k, None)
                else:
                    env[str(k)] = str(v)
    return env
