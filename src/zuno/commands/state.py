"""``zuno plan``, ``zuno goal``, ``zuno todo``: print a session's current durable work state.

    zuno plan [--session ID | --continue] [--json] [--root DIR] [--db FILE]
    zuno goal resume [--session ID | --continue] [--json]   (the user resumes a paused Goal)

Printing is read-only: the store is opened read-only and is never created; a workspace without a store has
no sessions. Exit 0 with the state (also "no plan yet"); 2 for a bad or unknown session id.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zuno.cli_support import EXIT_OK, EXIT_USAGE, add_common_arguments, print_json
from zuno.session_ids import InvalidSessionId, SessionOfAnotherWorkspace, validate_session_id

if TYPE_CHECKING:  # loaded when a store is read: every start builds this parser (zuno --version too)
    import sqlite3


class ReadOnlyStore:
    """Just enough of a Store for the read API, over the store's read-only connection: its busy
    wait (interruptible by Ctrl-C) and its words for a store another program keeps locked. (In WAL
    mode a read does not wait for another program's transaction, even ``BEGIN EXCLUSIVE``; it waits
    for one that holds the file in exclusive locking mode.)"""

    def __init__(self, path: Path) -> None:
        from zuno.store.connection import open_db

        self.path = path
        self._db = open_db(path, [], readonly=True)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        import sqlite3

        try:
            return list(self._db.execute(sql, params))
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):  # a store from before the state tables: no state
                return []
            raise

    def close(self) -> None:
        self._db.close()


def _db_path(args: argparse.Namespace, root: Path) -> Path:
    if args.db:
        return Path(args.db)
    if os.environ.get("ZUNO_DB"):
        return Path(os.environ["ZUNO_DB"])
    from zuno.workspace import STATE_DIR

    return root / STATE_DIR / "zuno.db"


def _unusable_store(path: Path) -> str | None:
    """Why an existing ``path`` cannot be a store (a directory, a FIFO, not SQLite), or None. Never
    opens a FIFO (that would block); a missing path is no store yet, not a problem."""
    from zuno.store.paths import StoreUnusable, check_store_path

    if not os.path.lexists(path):
        return None
    try:
        check_store_path(path, create=False)
    except StoreUnusable as e:
        return str(e)
    return None


def _fail(msg: str) -> int:
    print(f"zuno: {msg}", file=sys.stderr)
    return EXIT_USAGE


def _plan_text(view: dict[str, Any]) -> list[str]:
    lines = [f"Plan (revision {view['revision']}; focus {' > '.join(view['focus'])})"]

    def walk(plan: dict[str, Any], depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{plan['id']}: {plan['objective']}")
        for s in plan["steps"]:
            owner = f" ({s['owner']})" if s.get("owner") else ""
            lines.append(f"{pad}  {s['id']} [{s['status']}] {s['title']}{owner}")
            if s.get("notes"):
                lines.append(f"{pad}      {s['notes']}")
            for child in s.get("children", []):
                walk(child, depth + 2)

    walk(view["plan"], 1)
    return lines


def _stale_evidence(store: Any, session_id: str) -> dict[str, Any]:
    """What goal_get adds for an open Goal: each satisfied evidence criterion whose receipt no longer
    counts (a later write retired it, ...). Before, zuno goal showed such a criterion [x] with its
    receipt, while the model was told it was stale and complete refused it."""
    from zuno.tools.state import docstore, goal

    doc = docstore.read(store, goal.scope_of(session_id), goal.KIND)
    if doc.body is None or doc.body["status"] in goal.TERMINAL:
        return {}
    stale = [m for m in goal.unsatisfied(store, session_id, doc.body) if m["reason"] != "unsatisfied"]
    return {"stale_evidence": stale} if stale else {}


def _input_request(store: Any, session_id: str) -> dict[str, Any]:
    """The session's pending required-input request (goal_request_input): what the Goal waits for."""
    from zuno.tools.state import goal_input

    pending = goal_input.pending_for(store, session_id)
    return {"input_request": pending} if pending else {}


def _asked_at(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def _goal_text(view: dict[str, Any]) -> list[str]:
    g = view["goal"]
    pause = g.get("pause_reason") or {}
    why = pause.get("kind", "") + (f" — {pause['detail']}" if pause.get("detail") else "")
    status = g["status"] + (f" ({why})" if pause else "")
    lines = [f"Goal (revision {view['revision']}, {status}): {g['objective']}"]
    if g.get("abandon_reason"):
        lines.append(f"  abandoned: {g['abandon_reason']}")
    for c in g["criteria"]:
        ev = (
            f" — evidence {c['evidence']}"
            if c.get("evidence")
            else (" — requires evidence" if c["requires_evidence"] else "")
        )
        lines.append(f"  [{'x' if c['satisfied'] else ' '}] {c['id']} {c['text']}{ev}")
        for m in view.get("stale_evidence", []):
            if m["criterion"] == c["id"]:
                lines.append(f"      no longer counts ({m['reason']}): {m.get('detail') or ''}".rstrip())
    if g.get("input_answer"):
        asked = g["input_answer"].get("asked")
        to = f" ({g['input_answer']['request']})" if g["input_answer"].get("request") else ""
        lines.append(f"  your input{f' to {asked!r}' if asked else ''}{to}: {g['input_answer']['answer']}")
    req = view.get("input_request")
    if req is not None:
        lines.append(f"  required input {req['id']} (asked {_asked_at(req['asked_at'])}): {req['question']}")
    if g["status"] == "paused" and pause.get("kind") == "waiting_input":
        named = f" --request {req['id']}" if req is not None else ""
        lines.append(
            f"  it waits for your input: zuno goal resume --input 'your answer'{named}"
            f" (or /goal resume{named} your answer in zuno run)"
        )
    elif g["status"] == "paused":
        lines.append("  only you resume it: zuno goal resume (or /goal resume in zuno run)")
    return lines


def _todo_text(view: dict[str, Any]) -> list[str]:
    lines = [f"Todo (revision {view['revision']})"]
    for i in view["todos"]:
        owner = f" ({i['owner']})" if i.get("owner") else ""
        deps = f" after {', '.join(i['depends_on'])}" if i.get("depends_on") else ""
        lines.append(f"  {i['id']} [{i['status']}] {i['title']}{owner}{deps}")
    if not view["todos"]:  # every item removed (or an empty todo_write): say so, not a bare head line
        lines.append("  no items: the list is empty")
    return lines


def state_summary(store: Any, session_id: str) -> list[str]:
    """One line per state document the session has (what zuno show ends with): the Goal's status,
    the focused Plan's and the Todo list's progress. The commands print them whole."""
    from zuno.tools.state import api

    lines = []
    g = api.read_goal(store, session_id)
    if g["goal"] is not None:
        crit = g["goal"]["criteria"]
        pause = (g["goal"].get("pause_reason") or {}).get("kind")
        status = g["goal"]["status"] + (f" ({pause})" if pause else "")
        done = sum(1 for c in crit if c["satisfied"])
        head = f"goal (revision {g['revision']}, {status}): {g['goal']['objective']}"
        lines.append(f"{head} · {done}/{len(crit)} criteria")
    p = api.read_plan(store, session_id)
    if p["plan"] is not None:
        steps = p["plan"]["steps"]
        done = sum(1 for x in steps if x["status"] in ("completed", "superseded"))
        now = [x["id"] for x in steps if x["status"] == "in_progress"]
        lines.append(
            f"plan (revision {p['revision']}): {p['plan']['objective']} · {done}/{len(steps)} steps done"
            + (f" · in progress {', '.join(now)}" if now else "")
        )
    t = api.read_todo(store, session_id)
    if t["todos"]:
        done = sum(1 for x in t["todos"] if x["status"] in ("completed", "cancelled"))
        blocked = sum(1 for x in t["todos"] if x["status"] == "blocked")
        more = f" · {blocked} blocked" if blocked else ""
        lines.append(f"todo (revision {t['revision']}): {done}/{len(t['todos'])} done{more}")
    lines = [line.replace("\n", "\u2424") for line in lines]  # one line each, whatever a title holds
    if lines:
        lines = ["", f"── state now (zuno plan | goal | todo --session {session_id} print it whole)", *lines]
    return lines


def _run(kind: str, args: argparse.Namespace) -> int:
    from zuno.tools.state import api

    if getattr(args, "input", None) is not None or getattr(args, "request", None) is not None:
        return _fail("--input and --request go with resume: zuno goal resume --input 'your answer'.")

    root = Path(args.root).resolve()
    if args.session is not None:
        try:
            validate_session_id(args.session)
        except InvalidSessionId as e:
            return _fail(str(e))
    if not root.is_dir():
        return _fail(f"root {root} is not a directory. Pass an existing directory as the root (--root).")
    path = _db_path(args, root)
    problem = _unusable_store(path)
    if problem is not None:
        return _fail(problem)
    if not path.is_file():
        return _fail(f"there are no sessions in {path} (no store yet): nothing to show.")
    store = ReadOnlyStore(path)
    try:
        sid = args.session
        if sid is None:
            rows = store.query(
                "SELECT s.id FROM sessions s LEFT JOIN steps t ON t.session_id = s.id WHERE s.root = ? GROUP BY s.id"
                " ORDER BY MAX(COALESCE(t.started_at, s.created_at)) DESC, s.rowid DESC LIMIT 1",
                (str(root),),
            )
            if not rows:
                return _fail(f"there is no session of {root} in {path}; name one with --session.")
            sid = str(rows[0][0])
        elif not (found := store.query("SELECT root FROM sessions WHERE id = ?", (sid,))):
            return _fail(f"no session {sid!r} in {path}. Run 'zuno sessions' to list them.")
        elif str(found[0][0]) != str(root):
            return _fail(str(SessionOfAnotherWorkspace(sid, str(found[0][0]), str(root), path)))
        reader = {"plan": api.read_plan, "goal": api.read_goal, "todo": api.read_todo}[kind]
        view = reader(store, sid)  # type: ignore[arg-type]
        if kind == "goal":
            view = {**view, **_stale_evidence(store, sid), **_input_request(store, sid)}
    finally:
        store.close()
    if args.json:
        print_json({"session": sid, **view})
        return EXIT_OK
    field = {"plan": "plan", "goal": "goal", "todo": "todos"}[kind]
    if view[field] is None:
        print(f"session {sid}: no {kind} yet")
        return EXIT_OK
    from zuno.commands.terminal_markdown import visible_controls

    render = {"plan": _plan_text, "goal": _goal_text, "todo": _todo_text}[kind]
    print(f"session {sid}")
    # One line per entry: a newline or an escape sequence in a title is shown, never obeyed.
    print("\n".join(visible_controls(line.replace("\n", "\u2424")) for line in render(view)))
    return EXIT_OK


def add_parser(sub: Any) -> None:
    for kind, what in (("plan", "the Plan"), ("goal", "the Goal"), ("todo", "the Todo list")):
        p = sub.add_parser(kind, help=f"print {what} of a session (read-only)")
        add_common_arguments(p, session=False)
        which = p.add_mutually_exclusive_group()
        which.add_argument("--session", default=None, help="the session to show")
        which.add_argument(
            "--continue",
            "-c",
            dest="continue_latest",
            action="store_true",
            help="the workspace's most recent session (the default)",
        )
        p.add_argument("--json", action="store_true", help="print the state as JSON")
        if kind == "goal":  # the one write: the user resumes a paused Goal (commands/goal_resume.py)
            p.add_argument("op", nargs="?", choices=("resume",), help="resume: resume the paused Goal")
            p.add_argument(
                "--input",
                default=None,
                metavar="ANSWER",
                help="resume: the input a Goal paused waiting_input waits for (it resumes only with it)",
            )
            p.add_argument(
                "--request",
                default=None,
                metavar="GI_ID",
                help="resume --input: the required-input request (gi_…) the answer answers; refused if it is not "
                "the pending one",
            )
        p.set_defaults(func=lambda a, k=kind: _goal_op(a) if getattr(a, "op", None) else _run(k, a))


def _goal_op(args: argparse.Namespace) -> int:
    from zuno.commands.goal_resume import run

    return run(args)
