"""What every zuno command shares: the exit statuses, the usage error, the common options, the
runtime built from them, the session they continue, JSON printing.

Exit statuses (every command; docs/cli.md): 0 the work succeeded (for ``zuno call``, the call's
outcome was ok; for ``zuno batch`` / ``zuno steps``, every call's outcome was ok); 1 it ran but
did not succeed (an outcome other than ok); 2 usage or configuration error, nothing run; 130
interrupted (SIGINT); 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from zuno.session_ids import SessionNotFound, SessionOfAnotherWorkspace, validate_session_id

if TYPE_CHECKING:  # imported when a command builds its runtime: `zuno --version` needs neither
    from zuno.permissions import Approver
    from zuno.runtime import Runtime
    from zuno.workspace_store import WorkspaceStore

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_HANGUP = 129  # zuno run: its terminal hung up (SIGHUP)

# A command that builds a runtime names it in ``set_defaults(imports=...)``: main() imports those
# modules after parsing and before it installs its SIGTERM handler, so a signal never lands in the
# middle of an import (the other commands start without them: ``zuno --version`` loads no config).
RUNTIME_IMPORTS = ("zuno.runtime",)
# A command that only reads (or writes) the store, and runs no tool, builds a WorkspaceStore
# (store_from_args): the config and the store without the tool surface.
STORE_IMPORTS = ("zuno.workspace_store",)


def status_of_interrupted_wait(e: BaseException) -> int | None:
    """The exit status of an error that a signal caused: a store's busy wait ended by Ctrl-C (130)
    or SIGTERM (143) (``StoreWaitInterrupted.signum``); None for any other error."""
    import signal

    signum = getattr(e, "signum", None)
    if signum == signal.SIGINT:
        return EXIT_INTERRUPTED
    if signum == signal.SIGTERM:
        return EXIT_TERMINATED
    return None


class UsageError(Exception):
    """Unusable input: one clear line naming the problem and the fix; exit 2, nothing run."""


class Terminated(Exception):
    """SIGTERM arrived outside a running step: the command stops, exit 143 (``status``; 129 for
    zuno run's terminal hanging up)."""

    def __init__(self, status: int = EXIT_TERMINATED) -> None:
        super().__init__(status)
        self.status = status


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def approver_from_args(args: argparse.Namespace) -> Approver:
    from zuno.permissions import AutoApprover, NoApprover, TerminalApprover

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
    from zuno.runtime import Runtime

    return Runtime(
        root=args.root,
        config_file=args.config,
        profile=args.profile,
        db=args.db,
        approver=approver if approver is not None else approver_from_args(args),
    )


def store_from_args(args: argparse.Namespace) -> WorkspaceStore:
    """The workspace's config and store, as ``runtime_from_args`` would build them (the same config
    errors), without the tool surface: for the commands that only look at the store."""
    from zuno.workspace_store import WorkspaceStore

    return WorkspaceStore(
        root=args.root, config_file=args.config, profile=args.profile, db=args.db, check_surface=True
    )


def add_common_arguments(p: argparse.ArgumentParser, session: bool = True) -> None:
    p.add_argument("--root", default=".", help="workspace root (default: the current directory)")
    p.add_argument("--config", default=None, help="a config file, read after the root's zuno.json")
    p.add_argument("--profile", default=None, help="tool profile: zuno (default) or chord")
    p.add_argument("--db", default=None, help="the store (default: <root>/.zuno/zuno.db, or $ZUNO_DB)")
    p.add_argument("--approve", action="store_true", help="approve every call that asks for approval")
    if session:  # --session alone (as before); the commands that run calls use add_session_arguments
        p.add_argument(
            "--session", default=None, metavar="ID", help="continue this session ('zuno sessions' lists them)"
        )


# The options every command takes (add_common_arguments): those taking a value, and the flags.
COMMON_VALUE_OPTIONS = ("--root", "--config", "--profile", "--db")
COMMON_FLAGS = ("--approve",)


def hoist_common_options(argv: list[str]) -> list[str]:
    """``zuno --profile chord steps f.jsonl`` as ``zuno steps --profile chord f.jsonl``: the options
    every command takes may come before the command's name (as they do for git), and are moved
    after it; anything else before the name is left where it is (argparse judges it)."""
    hoisted: list[str] = []
    before: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if name in COMMON_VALUE_OPTIONS:
            take = 1 if "=" in a else 2
            if i + take > len(argv):
                break  # a value missing: argparse says so
            hoisted.extend(argv[i : i + take])
            i += take
        elif a in COMMON_FLAGS:
            hoisted.append(a)
            i += 1
        elif a.startswith("-"):
            before.append(a)
            i += 1
        else:  # the command's name
            if not hoisted:
                return argv
            return [*before, a, *hoisted, *argv[i + 1 :]]
    return argv


def add_session_arguments(p: argparse.ArgumentParser, *, new: bool = False, required: bool = False) -> None:
    """--session ID (continue that session; an error when it does not exist), -c/--continue (the
    workspace's most recent session) and, with ``new``, --new-session ID (start one with that id)."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--session", default=None, metavar="ID", help="continue this session ('zuno sessions' lists them)")
    g.add_argument(
        "-c", "--continue", dest="continue_latest", action="store_true", help="continue the most recent session"
    )
    if new:
        g.add_argument("--new-session", default=None, metavar="ID", help="start a new session with this id")


def session_from_args(rt: Runtime, args: argparse.Namespace) -> str | None:
    """The session a command continues (validated, existing), the new id it names, or None for a
    new session. Raises InvalidSessionId / SessionNotFound / UsageError; writes nothing."""
    new = getattr(args, "new_session", None)
    if new is not None:
        validate_session_id(new)
        store = rt.existing_store()
        its_root = store.session_root(new) if store is not None else None
        if its_root == str(rt.root):
            raise UsageError(f"session {new!r} already exists: continue it with --session {new}, or choose another id.")
        if its_root is not None:
            raise UsageError(
                f"session {new!r} already exists in the store {rt.db_path}, as a session of the workspace "
                f"{its_root}: choose another id (or continue it from its own workspace, --root {its_root})."
            )
        return new
    return resolve_or_start(rt, getattr(args, "session", None), getattr(args, "continue_latest", False))


def resolve_or_start(rt: Runtime, session_id: str | None, continue_latest: bool) -> str | None:
    """``Runtime.resolve_session`` for a command that starts a new session when it names none: a
    missing ``--session`` says so, as the way to start one."""
    try:
        return rt.resolve_session(session_id, continue_latest=continue_latest)
    except SessionOfAnotherWorkspace:
        raise  # (it says what to do)
    except SessionNotFound as e:
        if session_id is None:  # -c with no session yet
            no_session = f"there is no session to continue in {rt.db_path}: leave out --continue to start one."
            raise SessionNotFound(no_session) from None
        raise SessionNotFound(f"{e} Or leave out --session to start a new one.") from None
