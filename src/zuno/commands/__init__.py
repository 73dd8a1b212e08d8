"""zuno subcommands that live in their own modules.

Every module in this package that defines ``add_parser(sub)`` (a top-level ``def``) is a command:
it adds its subparser (with ``zuno.cli_support.add_common_arguments``) and sets ``func``, which
takes the parsed arguments and returns an exit status (``zuno.cli_support.EXIT_*``). A command
module imports what its command runs inside ``func`` (or its helpers), not at the top: every
start of ``zuno`` imports every command module to build the parser. Helper modules (no
``add_parser``) are not imported for that.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from types import ModuleType

_ADD_PARSER = re.compile(rb"^def add_parser\(", re.MULTILINE)


def _is_command(name: str) -> bool:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.has_location:
        return True  # not a plain source file: import it and look
    try:
        with open(spec.origin, "rb") as f:
            return _ADD_PARSER.search(f.read()) is not None
    except OSError:
        return True


def command_modules() -> list[ModuleType]:
    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        name = f"{__name__}.{info.name}"
        if not _is_command(name):
            continue
        module = importlib.import_module(name)
        if hasattr(module, "add_parser"):
            out.append(module)
    return out
