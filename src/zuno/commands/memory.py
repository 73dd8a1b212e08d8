"""``zuno memory``: the workspace's bounded memory, and the explicit accept a review policy waits for.

zuno memory [list] [--json]            entries of every agent, and the pending proposals
zuno memory accept MP_ID | reject MP_ID [--json]
                                       accepting one proposal supersedes the others pending for
                                       the same key (they are listed, and no longer pending)
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from zuno.cli_support import (
    EXIT_NOT_OK,
    EXIT_OK,
    EXIT_USAGE,
    STORE_IMPORTS,
    add_common_arguments,
    print_json,
    store_from_args,
)

# The shape of a proposal id (``mp_`` and ASCII letters/digits, as `zuno memory` lists them). Anything
# else (a space, a control character, non-ASCII, a path, 200 characters) is a usage error, refused
# before the store is opened.
_PROPOSAL_ID = re.compile(r"mp_[A-Za-z0-9_-]{1,64}")


def _malformed_proposal(op: str, proposal: str | None) -> str | None:
    if proposal is None or _PROPOSAL_ID.fullmatch(proposal) is not None:
        return None
    shown = proposal if len(proposal) <= 80 else proposal[:80] + "…"
    return (
        f"memory {op}: {shown!r} is not a proposal id (mp_ and letters or digits, e.g. mp_3f2a9c0d1e4b5a67). "
        "Run 'zuno memory' to list the pending ones and copy an id from there."
    )


def _undecidable_without_writing(rt: Any, proposal: str, root: str) -> Any:
    """Why ``proposal`` cannot be decided, read from the store as it is (read-only), or None when it
    is pending and the decision may go ahead. No store yet, or one from before the memory tables, has
    no proposal: that is said without creating the store (or migrating it) only to refuse."""
    import sqlite3

    from zuno.tools.state.memory import not_pending

    store = rt.existing_store()
    row = None
    if store is not None:
        try:
            rows = store.query("SELECT * FROM state_memory_proposals WHERE id = ?", (proposal,))
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise
            rows = []
        row = rows[0] if rows else None
    if row is not None and row["status"] == "pending" and row["root"] == root:
        return None
    return not_pending(proposal, row, root)


def _refused(args: argparse.Namespace, r: Any) -> int:
    if args.json:
        print_json({"proposal": args.proposal, "decision": None, "refusal": {"message": r.message, **r.to_metadata()}})
    print(f"zuno: {r.message} {r.required_action}", file=sys.stderr)
    return EXIT_NOT_OK


def _run(args: argparse.Namespace) -> int:
    import sqlite3

    from zuno.tools.state import fits
    from zuno.tools.state.docstore import StateRefusal
    from zuno.tools.state.memory import accept_proposal, proposals, reject_proposal

    malformed = _malformed_proposal(args.op, args.proposal) if args.op in ("accept", "reject") else None
    if malformed is not None:
        print(f"zuno: {malformed}", file=sys.stderr)
        return EXIT_USAGE
    rt = store_from_args(args)
    try:
        root = str(rt.root)
        if args.op in ("accept", "reject"):
            if not args.proposal:
                print(
                    f"zuno: memory {args.op} needs a proposal id (mp_…); run 'zuno memory' to list them.",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            # Looked at first, read-only: a proposal that is not pending (or no store at all) is
            # refused without the store being created, so no .zuno/ is left behind by a refusal.
            undecidable = _undecidable_without_writing(rt, args.proposal, root)
            if undecidable is not None:
                return _refused(args, undecidable)
            try:
                if args.op == "accept":
                    limit = fits.budget(rt.config.tool_output.max_bytes, rt.config.tool_output.max_lines)
                    result = accept_proposal(rt.store, args.proposal, limit, root=root)
                else:
                    reject_proposal(rt.store, args.proposal, root=root)
                    result = {}
                if args.json:  # --json is JSON for every op, not only the listing
                    print_json({"proposal": args.proposal, "decision": f"{args.op}ed", **result})
                elif args.op == "accept":
                    what = "deleted" if result.get("deleted") else f"set, revision {result['revision']}"
                    print(f"accepted {args.proposal}: memory {result['key']!r} {what}")
                    if result.get("superseded"):
                        print(
                            f"superseded (the same key, no longer pending): {', '.join(result['superseded'])}"
                        )
                else:
                    print(f"rejected {args.proposal}")
            except StateRefusal as r:  # decided meanwhile by another process, stale, too large
                return _refused(args, r)
            return EXIT_OK
        # Listing only looks: no store yet is no memory, and nothing is created (docs/cli.md).
        store = rt.existing_store()
        entries: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        if store is not None:
            try:
                rows = store.query(
                    "SELECT agent, key, revision, content FROM state_memory WHERE root = ? ORDER BY agent, key", (root,)
                )
                entries = [dict(r) for r in rows]
                pending = [
                    {k: p[k] for k in ("id", "agent", "op", "key", "content", "session_id")}
                    for p in proposals(store, root)
                ]
            except sqlite3.OperationalError as e:
                if "no such table" not in str(e):  # a store from before the memory tables: no memory
                    raise
        if args.json:
            print_json({"root": root, "memory": entries, "pending": pending})
            return EXIT_OK
        from zuno.commands.terminal_markdown import visible_controls

        def shown(text: str) -> str:  # one line per entry: a newline or an escape sequence is shown, never obeyed
            return visible_controls(text.replace("\n", "\u2424"))

        for e in entries:
            print(shown(f"{e['agent']}/{e['key']} (revision {e['revision']}): {e['content']}"))
        for p in pending:
            what = f"set to {p['content']!r}" if p["op"] == "set" else "delete"
            print(shown(f"pending {p['id']}: {p['agent']}/{p['key']} {what}  (zuno memory accept {p['id']})"))
        if not entries and not pending:
            print("no memory")
        return EXIT_OK
    finally:
        rt.close_stores()


def add_parser(sub: Any) -> None:
    p = sub.add_parser("memory", help="list the workspace's memory; accept or reject a pending proposal")
    p.add_argument("op", nargs="?", default="list", choices=["list", "accept", "reject"])
    p.add_argument("proposal", nargs="?", default=None, metavar="MP_ID")
    p.add_argument("--json", action="store_true")
    add_common_arguments(p, session=False)
    p.set_defaults(func=_run, imports=STORE_IMPORTS)
