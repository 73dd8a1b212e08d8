"""The cyclic garbage collector around a long-running command's start-up.

`zuno run` builds, once, what it keeps for its whole life: the provider SDK (the anthropic SDK
alone is thousands of modules and pydantic types), the tool surface, the store. While it does,
CPython's collector runs again and again over the growing heap (full collections included), a
sizeable share of the start-up that collects next to nothing: those objects live until exit.
So the collector is paused while they are built, and when they are, they are frozen
(``gc.freeze``: later collections, the full ones included, no longer walk them) and collection
resumes. A session then never stalls for a full collection over the SDK's objects mid-stream.

This is for the process the CLI owns; the Python API leaves its host's collector alone.
"""

from __future__ import annotations

import gc
import threading


class StartupCollection:
    """``pause()`` when the command starts building; ``settle()`` once what it keeps is built (or
    the command ends without getting there): what exists then is frozen and collection resumes as
    it was. Both are idempotent, so a ``finally`` may settle what the happy path settled already;
    ``zuno run`` settles from the thread that loads the provider's SDK, when it is loaded."""

    def __init__(self) -> None:
        self._resume: bool | None = None  # None: not paused
        self._lock = threading.Lock()  # settle may come from the thread that loads the SDK

    def pause(self) -> None:
        with self._lock:
            if self._resume is None:
                self._resume = gc.isenabled()
                gc.disable()

    def settle(self) -> None:
        with self._lock:
            if self._resume is None:
                return
            resume, self._resume = self._resume, None
            gc.freeze()
            if resume:
                gc.enable()
