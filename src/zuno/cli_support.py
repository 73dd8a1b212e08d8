"""What every zuno command shares: the exit statuses, the usage error, the common options, the
runtime built from them, JSON printing.

Exit statuses (every command): 0 the work succeeded (for ``zuno call``, the call's outcome was
ok); 1 it ran but did not succeed; 2 usage or configuration error, nothing run; 130 interrupted
(SIGINT); 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from zuno.permissions import Approver, AutoApprover, NoApprover, TerminalApprover
from zuno.runtime import Runtime

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class UsageError(Exception):
    """Unusable input: one clear line naming the problem and the fix; exit 2, nothing run."""


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def approver_from_args(args: argparse.Namespace) -> Approver:
    if getattr(args, "approve", False):
        return AutoApprover()
    if sys.stderr.isatty() and os.path.exists("/dev/tty"):
        try:
            with open("/dev/tty"):
                return TerminalApprover()
        except OSError:
            pass
    return NoApprover()


def runtime_from_args(args: argparse.Namespace, approver: Approver | None = None) -> Runtime:
    return Runtime(
        root=args.root,
        config_file=args.config,
        profile=args.profile,
        db=args.db,
        approver=approver if approver is not None else approver_from_args(args),
    )


def add_common_arguments(p: argparse.ArgumentParser, session: bool = True) -> None:
    p.add_argument("--root", default=".", help="workspace root (default: the current directory)")
    p.add_argument("--config", default=None, help="a config file, read after the root's zuno.json")
    p.add_argument("--profile", default=None, help="tool profile: zuno (default) or chord")
    p.add_argument("--db", default=None, help="the store (default: <root>/.zuno/zuno.db, or $ZUNO_DB)")
    p.add_argument("--approve", action="store_true", help="approve every call that asks for approval")
    if session:
        p.add_argument("--session", default=None, help="continue (or name) a session")
