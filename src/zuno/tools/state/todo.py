"""todo_get / todo_update (zuno) and todo_write (chord): one durable Todo list per session.

Items have host-assigned ids (``t1``…), a title, a status, an owner and ``depends_on`` (ids of
items that must be completed first). todo_update follows the Plan's revision rules; Chord's
todo_write sends the whole visible list at once and writes the same document (an item it names
by id keeps that id, an item without one gets a new id).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, RootModel

from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.state import docstore, fits
from zuno.tools.state.actions import (
    MUTATION,
    READ,
    ActionTool,
    Owner,
    Text,
    action_union,
    inner,
    mutate_for_call,
    mutation_output,
)
from zuno.tools.state.docstore import Doc, StateRefusal, check_revision, named, named_all
from zuno.tools.state.plan import agent_of, scope_of

KIND = "todo"
TodoStatus = Literal["pending", "in_progress", "blocked", "completed", "cancelled"]
TERMINAL = frozenset({"completed", "cancelled"})
TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"in_progress", "blocked", "completed", "cancelled"}),
    "in_progress": frozenset({"pending", "blocked", "completed", "cancelled"}),
    "blocked": frozenset({"pending", "in_progress", "cancelled"}),
    "completed": frozenset(),
    "cancelled": frozenset(),
}
MAX_TODOS = 200


def _few_ids(value: list[str]) -> list[str]:
    if len(value) > MAX_TODOS:
        raise ValueError(f"names {len(value)} ids; a list holds at most {MAX_TODOS} items")
    return value


# depends_on: ids of items of the same list, so no more of them than the list may hold.
Ids = Annotated[list[str], AfterValidator(_few_ids)]


class NewTodo(ToolArgs):
    title: Text = Field(min_length=1, max_length=1000)
    status: TodoStatus = "pending"
    owner: Owner | None = None
    depends_on: Ids = Field(default_factory=list, description="Ids to complete first")
    notes: str | None = Field(None, max_length=4000)


class TodoPatch(ToolArgs):
    id: str
    title: Text | None = Field(None, min_length=1, max_length=1000)
    status: TodoStatus | None = None
    owner: Owner | None = None
    depends_on: Ids | None = None
    notes: str | None = Field(None, max_length=4000)


class Add(ToolArgs):
    """Add items (the first add creates the list: expected_revision may then be omitted)."""

    action: Literal["add"]
    items: list[NewTodo] = Field(min_length=1, max_length=MAX_TODOS)
    expected_revision: int | None = Field(None, ge=0)


class Patch(ToolArgs):
    """Change only the named item ids."""

    action: Literal["patch"]
    expected_revision: int = Field(ge=1)
    items: list[TodoPatch] = Field(min_length=1, max_length=MAX_TODOS)


class Remove(ToolArgs):
    """Remove items no other item depends on."""

    action: Literal["remove"]
    expected_revision: int = Field(ge=1)
    ids: list[str] = Field(min_length=1)


ACTIONS = ["add", "patch", "remove"]


class TodoUpdateArgs(RootModel[action_union(Add, Patch, Remove)]):  # type: ignore[misc]
    pass


class WriteItem(ToolArgs):
    content: Text = Field(min_length=1, max_length=1000)
    status: TodoStatus = "pending"
    id: str | None = Field(None, description="Keep an existing item's id; omit for a new item.")
    depends_on: Ids = Field(default_factory=list)
    owner: Owner | None = None


class TodoWriteArgs(ToolArgs):
    todos: list[WriteItem] = Field(max_length=MAX_TODOS)


def _empty() -> dict[str, Any]:
    return {"items": [], "next": 0}


def _transition(item: dict[str, Any], new: str) -> None:
    old = item["status"]
    if new != old and new not in TRANSITIONS[old]:
        raise StateRefusal(
            "InvalidTransition",
            f"todo {item['id']} is {old}" + (" (terminal)" if old in TERMINAL else "") + f"; it cannot become {new}.",
            "Leave a terminal item as it is; add a new item for further work."
            if old in TERMINAL
            else f"Use one of: {', '.join(sorted(TRANSITIONS[old]))}.",
            todoId=item["id"],
            status=old,
            requested=new,
        )
    item["status"] = new


def _validate_graph(items: list[dict[str, Any]]) -> None:
    by_id = {i["id"]: i for i in items}
    for i in items:
        for d in i["depends_on"]:
            if d not in by_id:
                raise StateRefusal(
                    "UnknownDependency",
                    f"todo {i['id']} depends on {named(d)}, which does not exist.",
                    # Not "todo_get": chord has only todo_write, whose result shows the ids too.
                    "Depend only on ids the list holds, as the last Todo result showed them.",
                    todoId=i["id"],
                    dependency=named(d),
                )
            if d == i["id"]:
                raise StateRefusal("DependencyCycle", f"todo {d} depends on itself.", "Remove the self-dependency.")
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cycle = [*path[path.index(n) :], n]
            raise StateRefusal(
                "DependencyCycle",
                "the dependencies form a cycle: " + " -> ".join(cycle) + ".",
                "Break the cycle.",
                cycle=cycle,
            )
        state[n] = 1
        for d in by_id[n]["depends_on"]:
            visit(d, [*path, n])
        state[n] = 2

    for i in items:
        visit(i["id"], [])
    for i in items:
        if i["status"] in ("in_progress", "completed"):
            open_deps = [d for d in i["depends_on"] if by_id[d]["status"] != "completed"]
            if open_deps:
                raise StateRefusal(
                    "DependenciesOpen",
                    f"todo {i['id']} cannot be {i['status']}: it depends on {', '.join(open_deps)}, not completed yet.",
                    "Complete the dependencies first, or change depends_on.",
                    todoId=i["id"],
                    openDependencies=open_deps,
                )


def _adopt(item: dict[str, Any], agent: str) -> None:
    if item["status"] == "in_progress" and not item.get("owner"):
        item["owner"] = agent


def _at_most(doc: Doc, agent: str) -> Doc:
    """The list as large as status changes alone could make it: every open item in_progress (the
    longest status) and owned (in_progress adopts an unowned item for ``agent``)."""
    body = json.loads(json.dumps(doc.body))
    for item in body["items"]:
        if item["status"] not in TERMINAL:
            item["status"] = "in_progress"
            item["owner"] = item.get("owner") or agent
    return Doc(fits.REVISION_ALLOWANCE, body)


def _measure(doc: Doc, agent: str) -> tuple[int, int]:
    return fits.measure(render_view(_at_most(doc, agent)))


def _fit(doc: Doc, body: dict[str, Any], agent: str, budget: tuple[int, int] | None) -> None:
    """The list as it would now be still fits the output limits (zuno.tools.state.fits)."""
    fits.check(
        "TodosTooLarge",
        "the Todo list",
        _measure(Doc(doc.revision + 1, body), agent),
        _measure(doc, agent) if doc.body is not None else None,
        budget or fits.budget(),
        "Keep titles and notes shorter, remove finished items, or fold small items into one.",
        " (counting every open item as in_progress and owned, as it may yet be)",
    )


def apply_update(
    doc: Doc, a: Any, agent: str, budget: tuple[int, int] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    body, result = _apply_update(doc, a, agent)
    _fit(doc, body, agent, budget)
    return body, result


def _apply_update(doc: Doc, a: Any, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    check_revision(
        doc,
        a.expected_revision,
        "Todo list",
        "todo_get",
        creating=a.action == "add" and doc.revision == 0,
        create_action="add",
    )
    body = json.loads(json.dumps(doc.body)) if doc.body is not None else _empty()
    items: list[dict[str, Any]] = body["items"]
    changed: list[str] = []
    if a.action == "add":
        if len(items) + len(a.items) > MAX_TODOS:
            raise StateRefusal(
                "TooManyTodos",
                f"the list holds {len(items)} items and this add brings {len(a.items)}, {len(items) + len(a.items)} "
                f"in all; a list holds at most {MAX_TODOS} (MAX_TODOS).",
                "Remove finished items first (action remove), or fold small items into one.",
                items=len(items),
                adding=len(a.items),
                limit=MAX_TODOS,
            )
        for t in a.items:
            body["next"] += 1
            item = {
                "id": f"t{body['next']}",
                "title": t.title,
                "status": t.status,
                "owner": t.owner,
                "depends_on": list(t.depends_on),
                "notes": t.notes,
            }
            _adopt(item, agent)
            items.append(item)
            changed.append(item["id"])
    elif a.action == "patch":
        by_id = {i["id"]: i for i in items}
        sent = [p.id for p in a.items]
        twice = sorted({n for n in sent if sent.count(n) > 1})
        if twice:
            raise StateRefusal(
                "DuplicateTodo",
                f"todo {named_all(twice)} is named twice in one patch.",
                "Name each item once, with every field it should change.",
                todoIds=[named(t) for t in twice[:10]],
            )
        for p in a.items:
            item = by_id.get(p.id)
            if item is None:
                raise StateRefusal(
                    "UnknownTodo",
                    f"there is no todo {named(p.id)}.",
                    "Use an id todo_get returned.",
                    todoId=named(p.id),
                )
            if item["status"] in TERMINAL and any(
                getattr(p, k) is not None for k in ("title", "owner", "depends_on", "notes")
            ):
                raise StateRefusal(
                    "TerminalTodo",
                    f"todo {p.id} is {item['status']} (terminal) and cannot be edited.",
                    "Add a new item for further work.",
                    todoId=p.id,
                    status=item["status"],
                )
            if p.status is not None:
                _transition(item, p.status)
            for k in ("title", "owner", "depends_on", "notes"):
                v = getattr(p, k)
                if v is not None:
                    item[k] = list(v) if k == "depends_on" else v
            _adopt(item, agent)
            changed.append(p.id)
    else:
        ids = set(a.ids)
        unknown = sorted(ids - {i["id"] for i in items})
        if unknown:
            raise StateRefusal("UnknownTodo", f"there is no todo {named_all(unknown)}.", "Use ids todo_get returned.")
        needed = sorted({i["id"] for i in items if i["id"] not in ids and ids & set(i["depends_on"])})
        if needed:
            raise StateRefusal(
                "StillDependedOn",
                f"{', '.join(needed)} {'depends' if len(needed) == 1 else 'depend'} on an item being removed.",
                "Change their depends_on first.",
                dependents=needed,
            )
        body["items"] = items = [i for i in items if i["id"] not in ids]
        changed = sorted(ids)
    _validate_graph(items)
    return body, {"action": a.action, "items": changed}


def apply_write(
    doc: Doc, a: TodoWriteArgs, agent: str, budget: tuple[int, int] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    body, result = _apply_write(doc, a, agent)
    _fit(doc, body, agent, budget)
    return body, result


def _apply_write(doc: Doc, a: TodoWriteArgs, agent: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Chord's whole-list write: the list becomes exactly what was sent."""
    body = json.loads(json.dumps(doc.body)) if doc.body is not None else _empty()
    old = {i["id"]: i for i in body["items"]}
    # An item sent without an id (how models used to other harnesses send the list: content and
    # status only) is the existing item of the same text, the first one not named otherwise: the
    # same list sent again is the same list, and a completed item stays completed.
    kept = {w.id for w in a.todos if w.id is not None}
    by_title: dict[str, list[str]] = {}
    for i in body["items"]:
        if i["id"] not in kept:
            by_title.setdefault(i["title"], []).append(i["id"])
    new_items: list[dict[str, Any]] = []
    # An id the list does not hold is the model's own name for the item (models used to other
    # harnesses number their items "1", "2"…): matched by text like an item without id, and a
    # depends_on of the same write naming it means that item.
    alias: dict[str, str] = {}
    for w in a.todos:
        sent = w.id
        if (w.id is None or w.id not in old) and by_title.get(w.content):
            w = w.model_copy(update={"id": by_title[w.content].pop(0)})
        if w.id is not None and w.id in old:
            item = dict(old[w.id])
            _transition(item, w.status)  # the same transition table as todo_update
            item.update(title=w.content, depends_on=list(w.depends_on))
            if w.owner is not None:
                item["owner"] = w.owner
        else:
            body["next"] += 1
            item = {
                "id": f"t{body['next']}",
                "title": w.content,
                "status": w.status,
                "owner": w.owner,
                "depends_on": list(w.depends_on),
                "notes": None,
            }
        _adopt(item, agent)
        new_items.append(item)
        if sent is not None and sent not in old:
            alias.setdefault(sent, item["id"])
    for item in new_items:
        item["depends_on"] = [alias.get(d, d) for d in item["depends_on"]]
    ids = [i["id"] for i in new_items]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise StateRefusal("DuplicateTodo", f"todo id {named_all(dup)} appears twice.", "Send each item once.")
    body["items"] = new_items
    _validate_graph(new_items)
    return body, {"action": "write", "items": ids}


def view(doc: Doc) -> dict[str, Any]:
    if doc.body is None:
        return {"todos": None, "revision": 0}
    items = []
    for i in doc.body["items"]:
        items.append({k: v for k, v in i.items() if v not in (None, [])})
    return {"revision": doc.revision, "todos": items}


def runnable(doc: Doc, agent: str) -> list[dict[str, Any]]:
    if doc.body is None:
        return []
    by_id = {i["id"]: i for i in doc.body["items"]}
    out = []
    for i in doc.body["items"]:
        if i["status"] not in ("pending", "in_progress") or i.get("owner") != agent:
            continue
        if all(by_id[d]["status"] == "completed" for d in i["depends_on"] if d in by_id):
            out.append(i)
    return out


def fingerprint(doc: Doc) -> str:
    return docstore.digest({"kind": KIND, "revision": doc.revision, "body": doc.body})


def render_view(doc: Doc) -> str:
    """``view(doc)`` as JSON text, one item a line (a newline in a title or notes is escaped): a
    list of N items is N + 2 lines."""
    data = view(doc)
    if not data["todos"]:
        return fits.j(data)
    items = data["todos"]
    lines = [fits.j({"revision": data["revision"]})[:-1] + ', "todos": [']
    lines += [" " + fits.j(item) + ("," if n < len(items) - 1 else "") for n, item in enumerate(items)]
    lines.append("]}")
    return "\n".join(lines)


_render = render_view


class TodoGetTool(ActionTool):
    name = "todo_get"
    description = (
        "The durable Todo list (ids, titles, statuses, owners, dependencies) and its revision; todos null before "
        "the first add."
    )
    Args = ToolArgs
    declarations = READ

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        doc = docstore.read(ctx.store, scope_of(ctx.session_id), KIND)
        return ToolOutput(
            text=_render(doc), metadata={"revision": doc.revision, "progressFingerprint": fingerprint(doc)}
        )


class TodoUpdateTool(ActionTool):
    name = "todo_update"
    description = (
        "Change the durable Todo list. add: new items (ids assigned); patch: only the named ids; remove: items "
        "nothing depends on. expected_revision: todo_get's (the first add omits it). completed and cancelled are "
        "terminal; in_progress or completed only once its dependencies are completed."
    )
    Args = TodoUpdateArgs
    declarations = MUTATION
    ACTIONS: ClassVar[list[str]] = ACTIONS

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        a = inner(args)
        agent = agent_of(ctx)

        def render(result: dict[str, Any], replayed: bool, doc: Doc) -> ToolOutput:
            return mutation_output(f"todo {result['action']}", result, replayed, _render(doc))

        budget = fits.of_config(ctx)
        return mutate_for_call(
            ctx, args, scope_of(ctx.session_id), KIND, lambda d: apply_update(d, a, agent, budget), render
        )


class TodoWriteTool(ActionTool):
    name = "todo_write"
    description = (
        "Write the visible TODO list of the current task, whole: send every item (content, status: pending, "
        "in_progress, blocked, completed or cancelled; keep an item's id to keep it). The list becomes exactly "
        "what you send."
    )
    Args = TodoWriteArgs
    declarations = MUTATION

    async def run(self, ctx: ToolContext, args: TodoWriteArgs) -> ToolOutput:
        agent = agent_of(ctx)

        def render(result: dict[str, Any], replayed: bool, doc: Doc) -> ToolOutput:
            return ToolOutput(
                text=f"[todo list written: revision {result['revision']}"
                + (" · nothing changed: the list already said this" if result.get("unchanged") else "")
                + "]\n"
                + _render(doc),
                metadata={"revision": result["revision"], "replayed": replayed, "invalidatesContext": True},
            )

        budget = fits.of_config(ctx)
        return mutate_for_call(
            ctx, args, scope_of(ctx.session_id), KIND, lambda d: apply_write(d, args, agent, budget), render
        )
