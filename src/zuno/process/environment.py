"""Zuno's private environment namespace, and the environment every process Zuno starts inherits.

The whole ``ZUNO_*`` namespace is withheld, names compared case-insensitively (``zuno_server_password``
and ``ZUNO_Pid`` included), with no allowlist; ``ZUNO`` and ``AGENT`` (outside the namespace) and
everything else are inherited. This applies to every process between Zuno and a command, not only to
the command: the guard fork-server is exec'd with it (a process's ``/proc/PID/environ`` is the
environment it was exec'd with, so removing names from ``os.environ`` later would not hide them),
the guards it forks inherit it, and pre-dispatch hooks and ripgrep get it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

WITHHELD_PREFIX = "ZUNO_"


def withheld(name: str) -> bool:
    """Is this variable in Zuno's private namespace? The fold only grows the withheld set."""
    return name.upper().startswith(WITHHELD_PREFIX)


def withheld_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's environment) without Zuno's private namespace."""
    src = os.environ if environ is None else environ
    return {k: v for k, v in src.items() if not withheld(k)}
