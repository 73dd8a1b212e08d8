"""Session ids: one pattern, checked at every entry (CLI, Python API, MCP, HTTP) before anything
is written. An id names files (logs, locks), so it may hold no separator, no dot-dot, nothing a
path could be built from."""

from __future__ import annotations

import re

# A letter or digit, then letters, digits, '_' or '-'; at most 64 characters. Zuno's own ids are
# "ses_" + 16 hex digits.
SESSION_ID_MAX_CHARS = 64
SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class InvalidSessionId(ValueError):
    """A session id that does not match SESSION_ID_PATTERN: nothing was written."""


class SessionNotFound(LookupError):
    """A session id that names no session in this store: nothing was written."""


class SessionOfAnotherWorkspace(SessionNotFound):
    """A session id that names a session of another workspace root sharing this store (``--db``):
    refused, so one session never mixes two workspaces; nothing was written."""

    def __init__(self, session_id: str, its_root: str, root: str, db: object) -> None:
        self.session_id, self.its_root, self.root = session_id, its_root, root
        super().__init__(
            f"session {session_id!r} belongs to the workspace {its_root}, not to {root} (both use the store "
            f"{db}): continue it from its own workspace (--root {its_root}), or leave out the session id to "
            "start a session of this one."
        )


def validate_session_id(value: object) -> str:
    if not isinstance(value, str) or SESSION_ID_PATTERN.fullmatch(value) is None:
        shown = value if isinstance(value, str) else type(value).__name__
        raise InvalidSessionId(
            f"session id {shown!r} is not valid: a session id is 1 to {SESSION_ID_MAX_CHARS} letters, digits, "
            "'_' or '-', starting with a letter or digit (no '/', '.', spaces). Run 'zuno sessions' to list them."
        )
    return value
