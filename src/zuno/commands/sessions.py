"""``zuno sessions [--json]``: the workspace's sessions, most recently active first — id, when it
started, its last step, how many calls it ran and how many background jobs are still open. Reads
the store read-only and creates nothing (no store yet: no sessions)."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from zuno.cli_support import EXIT_OK, RUNTIME_IMPORTS, add_common_arguments, print_json, runtime_from_args


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def cmd_sessions(args: argparse.Namespace) -> int:
    rt = runtime_from_args(args)
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
        asyncio.run(rt.aclose())


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sessions", help="list the workspace's sessions (most recent first)")
    p.add_argument("--json", action="store_true", help="print them as one JSON object")
    add_common_arguments(p, session=False)
    p.set_defaults(func=cmd_sessions, imports=RUNTIME_IMPORTS)
