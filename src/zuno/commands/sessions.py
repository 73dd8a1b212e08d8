"""``zuno sessions [--json]``: the workspace's sessions, most recently active first — id, when it
started, its last step, how many calls it ran and how many background jobs are still open. Reads
the store read-only and creates nothing (no store yet: no sessions).

``zuno sessions prune --older-than AGE | --keep N [--dry-run] [--json]``: delete old sessions
(``zuno.session_pruning``); exit 1 when a chosen session had to be kept (another process drives it)."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from zuno.cli_support import (
    EXIT_NOT_OK,
    EXIT_OK,
    STORE_IMPORTS,
    UsageError,
    add_common_arguments,
    print_json,
    store_from_args,
)


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def cmd_sessions(args: argparse.Namespace) -> int:
    rt = store_from_args(args)
    try:
        rows = rt.sessions()
        if args.json:
            print_json({"root": str(rt.root), "store": str(rt.db_path), "sessions": rows})
            return EXIT_OK
        if not rows:
            print(f"no sessions in {rt.db_path} for {rt.root}; 'zuno call' or 'zuno batch' starts one.")
            return EXIT_OK
        print(f"{'SESSION':<22} {'STARTED':<19} {'LAST STEP':<25} {'CALLS':>5} {'OPEN JOBS':>9}")
        for r in rows:
            last = f"{r['last_step']} at {_when(r['last_step_at'])}" if r["last_step"] else "-"
            print(f"{r['id']:<22} {_when(r['started_at']):<19} {last:<25} {r['calls']:>5} {r['open_jobs']:>9}")
        return EXIT_OK
    finally:
        rt.close_stores()


def _age_seconds(text: str) -> float:
    """``30`` or ``30d`` (days), ``12h``, ``90m``, ``45s`` -> seconds."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([dhms]?)", text.strip())  # ASCII digits only
    if m is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: give a number of days (30), or one with a unit: 30d, 12h, 90m, 45s."
        )
    return float(m.group(1)) * _UNIT_S[m.group(2) or "d"]


_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def _count(text: str) -> int:
    # ASCII digits only: str.isdigit() and int() also take '٣', '３' and '²' (which int() then refuses).
    if re.fullmatch(r"[0-9]+", text.strip()) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of sessions: give 0 or more in ASCII digits (0-9), e.g. --keep 20."
        )
    return int(text)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def cmd_prune(args: argparse.Namespace) -> int:
    if args.older_than is None and args.keep is None:
        raise UsageError(
            "zuno sessions prune: say which sessions go: --older-than AGE (e.g. 30d), --keep N (all but the N "
            "most recent), or both; add --dry-run to see them first."
        )
    rt = store_from_args(args)
    try:
        report = rt.prune_sessions(older_than_s=args.older_than, keep=args.keep, dry_run=args.dry_run)
        if args.json:
            print_json({"root": str(rt.root), "store": str(rt.db_path), **report.to_json()})
            return EXIT_OK if not report.skipped else EXIT_NOT_OK
        verb = "would prune" if report.dry_run else "pruned"
        for p in report.pruned:
            rows = "" if p["rows"] is None else f", {p['rows']} rows"
            print(f"{verb} {p['id']} (last active {_when(p['last_active'])}{rows}, {_size(p['bytes'])} of files)")
        for k in report.skipped:
            print(f"kept {k['id']}: {k['reason']}", file=sys.stderr)
        total = sum(p["bytes"] for p in report.pruned)
        print(
            f"{verb} {len(report.pruned)} session(s), {_size(total)} of files; {report.kept} kept"
            + (f", {len(report.skipped)} skipped" if report.skipped else "")
            + ". Reports in .zuno/reports/ and the workspace's memory are kept."
        )
        return EXIT_OK if not report.skipped else EXIT_NOT_OK
    finally:
        rt.close_stores()


def _dispatch(args: argparse.Namespace) -> int:
    if args.action == "prune":
        return cmd_prune(args)
    given = [o for o, v in (("--older-than", args.older_than), ("--keep", args.keep)) if v is not None]
    if args.dry_run:
        given.append("--dry-run")
    if given:
        raise UsageError(f"{', '.join(given)} go with 'zuno sessions prune'.")
    return cmd_sessions(args)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sessions",
        help="list the workspace's sessions (most recent first); 'prune' deletes old ones",
        description="List the workspace's sessions, or with 'prune' delete old ones: their records, job logs and "
        "saved outputs (never reports or the workspace's memory). A session another process drives is kept.",
    )
    p.add_argument("action", nargs="?", choices=["prune"], help="prune: delete the sessions named by the options")
    p.add_argument("--json", action="store_true", help="print them as one JSON object")
    p.add_argument(
        "--older-than", type=_age_seconds, default=None, metavar="AGE",
        help="prune: sessions last active at least this long ago (days, or 30d, 12h, 90m, 45s)",
    )
    p.add_argument(
        "--keep", type=_count, default=None, metavar="N", help="prune: all but the N most recently active sessions"
    )
    p.add_argument("--dry-run", action="store_true", help="prune: list what would go, delete nothing")
    add_common_arguments(p, session=False)
    p.set_defaults(func=_dispatch, imports=STORE_IMPORTS)
