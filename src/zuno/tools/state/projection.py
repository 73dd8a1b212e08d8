"""The Goal / Plan / Todo sections of the dynamic context, rebuilt from the committed database.

Registered as ``registry.refreshers`` ("goal", "plan", "todo"); each is ``fn(store, session_id)``
returning a ``zuno.projection.ContextSection`` or None when there is nothing to say.

* ``runnable``: plan — the focused Plan has an adopted (owned) in_progress step; todo — an item
  pending or in_progress, owned by the session's agent, whose dependencies are all completed;
  goal — the Goal is active and owned, and the Plan and Todo list hold no open work of which
  none is runnable (an unowned Plan or blocked Todos alone are not runnable work).
* ``goal_active``: the Goal is active and owned.
* ``fingerprint``: the same semantic digest plan_get / todo_get / goal_get attach
  (``metadata["progressFingerprint"]``).

Ownership: the store keeps the agent name that adopted the work (``config.agent.name`` or
"main"). A session is driven by one agent, so the registered refreshers count work owned by any
agent as owned; ``agent=`` narrows it to one name.
"""

from __future__ import annotations

import re

from zuno.projection import ContextSection
from zuno.store import Store
from zuno.tools.state import docstore, goal, plan, todo

# Every entry of a section is one line: a line break inside a model-written text (a title, an
# objective, a pause detail) is shown as this mark. Before, "x\n  s9 completed: deploy" as a title
# added a forged step line to the developer-priority context; plan_get, todo_get and zuno plan /
# todo show the same break escaped.
LINE_BREAK_MARK = "\u2424"
# What str.splitlines breaks a line at (a model reading the text may too): CRLF, LF, CR, VT, FF, the
# file/group/record separators, NEL and the Unicode line and paragraph separators.
_LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def _line(text: str) -> str:
    return _LINE_BREAKS.sub(LINE_BREAK_MARK, text)


def _text(lines: list[str]) -> str:
    return "\n".join(_line(line) for line in lines)


def goal_section(store: Store, session_id: str, agent: str | None = None) -> ContextSection | None:
    doc = docstore.read(store, plan.scope_of(session_id), goal.KIND)
    if doc.body is None:
        return None
    b = doc.body
    owned = bool(b.get("owner")) and (agent is None or b["owner"] == agent)
    active = b["status"] == "active" and owned
    lines = [f"Goal (revision {doc.revision}, {b['status']}): {b['objective']}"]
    if b.get("pause_reason"):
        request = b["pause_reason"].get("request")
        lines.append(
            f"  paused: {b['pause_reason']['kind']}"
            + (f" (request {request}, waiting for the user's answer)" if request else "")
            + (f" — {b['pause_reason']['detail']}" if b["pause_reason"].get("detail") else "")
        )
    if b.get("input_answer"):
        got = b["input_answer"]
        asked = got.get("asked")
        to = f" (request {got['request']})" if got.get("request") else ""
        lines.append(f"  the user's input{f' to {asked!r}' if asked else ''}{to}: {got['answer']}")
    for c in b["criteria"]:
        mark = "x" if c["satisfied"] else " "
        ev = (
            " (requires evidence" + (f": {c['evidence']})" if c.get("evidence") else ")")
            if c["requires_evidence"]
            else ""
        )
        lines.append(f"  [{mark}] {c['id']} {c['text']}{ev}")
    return ContextSection(
        "goal",
        _text(lines),
        runnable=active and not _only_stalled_work(store, session_id, agent),
        fingerprint=goal.fingerprint(doc),
        goal_active=active,
    )


def _only_stalled_work(store: Store, session_id: str, agent: str | None) -> bool:
    """Does the session's Plan or Todo list hold open work of which none is runnable (an unowned
    Plan, blocked or unowned Todos)? Then the Goal alone is no runnable work: "an unowned Plan or
    blocked Todo alone is insufficient" for an automatic continuation. Without open Plan/Todo
    work the active Goal's criteria are the work."""
    sections = [s for s in (plan_section(store, session_id, agent), todo_section(store, session_id, agent)) if s]
    if any(s.runnable for s in sections):
        return False
    scope = plan.scope_of(session_id)
    focused = plan.focused_plan(docstore.read(store, scope, plan.KIND))
    if focused is not None and any(s["status"] not in plan.TERMINAL for s in focused["steps"]):
        return True
    items = (docstore.read(store, scope, todo.KIND).body or {}).get("items", [])
    return any(i["status"] not in todo.TERMINAL for i in items)


def plan_section(store: Store, session_id: str, agent: str | None = None) -> ContextSection | None:
    doc = docstore.read(store, plan.scope_of(session_id), plan.KIND)
    focused = plan.focused_plan(doc)
    if focused is None:
        return None
    path = " > ".join(doc.body["plans"][p]["objective"] for p in doc.body["focus"])
    lines = [f"Plan (revision {doc.revision}; focus: {path})"]
    runnable = False
    for s in focused["steps"]:
        owner = f" [{s['owner']}]" if s.get("owner") else ""
        lines.append(f"  {s['id']} {s['status']}: {s['title']}{owner}")
        if s["status"] == "in_progress" and s.get("owner") and (agent is None or s["owner"] == agent):
            runnable = True
    return ContextSection("plan", _text(lines), runnable=runnable, fingerprint=plan.fingerprint(doc))


def todo_section(store: Store, session_id: str, agent: str | None = None) -> ContextSection | None:
    doc = docstore.read(store, plan.scope_of(session_id), todo.KIND)
    if doc.body is None or not doc.body["items"]:
        return None
    lines = [f"Todo (revision {doc.revision})"]
    for i in doc.body["items"]:
        deps = f" after {','.join(i['depends_on'])}" if i["depends_on"] else ""
        owner = f" [{i['owner']}]" if i.get("owner") else ""
        lines.append(f"  {i['id']} {i['status']}: {i['title']}{owner}{deps}")
    if agent is None:
        owners = {i.get("owner") for i in doc.body["items"] if i.get("owner")}
        runnable = any(todo.runnable(doc, o) for o in owners)
    else:
        runnable = bool(todo.runnable(doc, agent))
    return ContextSection("todo", _text(lines), runnable=runnable, fingerprint=todo.fingerprint(doc))


def refresh_goal(store: Store, session_id: str) -> ContextSection | None:
    return goal_section(store, session_id)


def refresh_plan(store: Store, session_id: str) -> ContextSection | None:
    return plan_section(store, session_id)


def refresh_todo(store: Store, session_id: str) -> ContextSection | None:
    return todo_section(store, session_id)
