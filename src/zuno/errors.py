"""Errors shared by the layers below the tools: the workspace, the safe file helper and the tools
themselves raise them, the dispatcher turns them into values. This module imports nothing of Zuno's
but the vocabulary, so ``zuno.workspace`` and ``zuno.tool`` both build on it without importing each
other."""

from __future__ import annotations

from typing import Any

from zuno.declarations import BlockKind


class Refused(Exception):
    """Raised by a tool for a call that must not run (nothing happened): the call settles as
    ``blocked`` with the given kind, and a dispatch-blocked event is recorded first."""

    def __init__(self, kind: BlockKind, message: str, **metadata: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.metadata = metadata


class TransientError(Exception):
    """Raised by a tool whose failure may pass. Only a call whose replay is Safe is attempted
    again (after a backoff, a bounded number of times); a Never call settles as ``error``."""
