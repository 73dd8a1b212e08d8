"""zuno subcommands that live in their own modules.

Every module in this package that defines ``add_parser(sub)`` is a command: it adds its
subparser (with ``zuno.cli_support.add_common_arguments``) and sets ``func``, which takes the
parsed arguments and returns an exit status (``zuno.cli_support.EXIT_*``).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def command_modules() -> list[ModuleType]:
    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "add_parser"):
            out.append(module)
    return out
