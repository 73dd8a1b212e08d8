"""memory_read / memory_update: bounded memory scoped per workspace root and agent.

Appear only when ``memory.enabled``. An update applies at once unless ``memory.review_policy`` is
"review": then it is stored as a proposal that waits for an explicit accept
(:func:`accept_proposal`, by a person or the host — never by the model) and changes nothing
until then. The bounds (limits.py): ``MEMORY_MAX_ENTRIES`` entries of ``MEMORY_MAX_ENTRY_BYTES``
each, ``MEMORY_MAX_TOTAL_BYTES`` in all, ``MEMORY_MAX_PENDING_PROPOSALS`` waiting proposals.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import Any, ClassVar, Literal

from pydantic import Field, RootModel, field_validator

from zuno import family_migrations, limits
from zuno.store import Store
from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.state import fits
from zuno.tools.state.actions import MUTATION, READ, ActionTool, Text, action_union, inner
from zuno.tools.state.docstore import StateRefusal, named
from zuno.tools.state.plan import agent_of

MIGRATIONS = family_migrations.STATE_MEMORY  # (the SQL: zuno.family_migrations)

# fullmatch, not match with "$": "$" also matches before a trailing newline, so "k\n" was a key.
_KEY = re.compile(r"[A-Za-z0-9_.\-/]{1,100}")


class _Keyed(ToolArgs):
    key: str = Field(description="A short name for the memory, e.g. 'test-command'.")

    @field_validator("key")
    @classmethod
    def _valid(cls, v: str) -> str:
        if not _KEY.fullmatch(v):
            raise ValueError(
                "a memory key is 1-100 characters of ASCII letters, digits, '.', '_', '-' and '/' (memory_read lists "
                "the keys there are)"
            )
        return v


class Set(_Keyed):
    action: Literal["set"]
    # Text: content of only whitespace is no fact to remember (it was stored, and shown as '   ').
    content: Text = Field(min_length=1)


class Delete(_Keyed):
    action: Literal["delete"]


class MemoryUpdateArgs(RootModel[action_union(Set, Delete)]):  # type: ignore[misc]
    pass


class MemoryReadArgs(ToolArgs):
    key: str | None = Field(None, description="One entry; omit to list every entry.")


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def entries(store: Store, root: str, agent: str) -> list[dict[str, Any]]:
    rows = store.query(
        "SELECT key, content, size, revision FROM state_memory WHERE root = ? AND agent = ? ORDER BY key", (root, agent)
    )
    return [dict(r) for r in rows]


def read_text(listed: list[dict[str, Any]], pending: int) -> str:
    """What memory_read returns for these entries (and this many waiting proposals)."""
    data: dict[str, Any] = {"memory": [{k: e[k] for k in ("key", "revision", "content")} for e in listed]}
    if pending:
        data["pending_proposals"] = pending
    return json.dumps(data, ensure_ascii=False, indent=1)


def _fit(db: Any, root: str, agent: str, key: str, content: str, budget: tuple[int, int] | None) -> None:
    """memory_read of every entry, with this one set, still fits the output limits
    (zuno.tools.state.fits) — counted with the most waiting proposals and revisions of ten digits."""
    rows = db.execute(
        "SELECT key, content FROM state_memory WHERE root = ? AND agent = ? ORDER BY key", (root, agent)
    ).fetchall()
    now = {r["key"]: r["content"] for r in rows}

    def measured(values: dict[str, str]) -> tuple[int, int]:
        listed = [{"key": k, "revision": fits.REVISION_ALLOWANCE, "content": v} for k, v in sorted(values.items())]
        return fits.measure(read_text(listed, limits.MEMORY_MAX_PENDING_PROPOSALS))

    fits.check(
        "MemoryFull",
        "memory_read of every entry",
        measured({**now, key: content}),
        measured(now) if now else None,
        budget or fits.budget(),
        "Delete, merge or shorten entries first: memory is for durable facts, not transcripts.",
    )


def _apply(
    db: Any, root: str, agent: str, op: str, key: str, content: str | None, budget: tuple[int, int] | None = None
) -> dict[str, Any]:
    row = db.execute(
        "SELECT revision, content FROM state_memory WHERE root = ? AND agent = ? AND key = ?", (root, agent, key)
    ).fetchone()
    if op == "set" and row is not None and row["content"] == content:
        # Set to what it already holds: no new revision (as a state document's unchanged body keeps
        # its revision), so a model confirming a fact does not look like a change of it.
        return {"key": key, "revision": int(row["revision"]), "bytes": _size(content), "unchanged": True}
    if op == "delete":
        if row is None:
            raise StateRefusal(
                "NotFound", f"there is no memory {key!r}.", "Read the memory first (memory_read)." + _mp_hint(key)
            )
        db.execute("DELETE FROM state_memory WHERE root = ? AND agent = ? AND key = ?", (root, agent, key))
        return {"key": key, "deleted": True}
    assert content is not None
    size = _size(content)
    if size > limits.MEMORY_MAX_ENTRY_BYTES:
        raise StateRefusal(
            "MemoryTooLarge",
            f"memory {key!r} would be {size} bytes; an entry holds at most {limits.MEMORY_MAX_ENTRY_BYTES}.",
            "Keep it shorter: memory is for durable facts, not transcripts.",
            size=size,
            limit=limits.MEMORY_MAX_ENTRY_BYTES,
        )
    count, total = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM state_memory WHERE root = ? AND agent = ? AND key != ?",
        (root, agent, key),
    ).fetchone()
    if row is None and count + 1 > limits.MEMORY_MAX_ENTRIES:
        raise StateRefusal(
            "MemoryFull",
            f"memory already holds {count} entries, the most it may hold ({limits.MEMORY_MAX_ENTRIES}).",
            "Delete or merge entries first.",
            limit=limits.MEMORY_MAX_ENTRIES,
        )
    if total + size > limits.MEMORY_MAX_TOTAL_BYTES:
        raise StateRefusal(
            "MemoryFull",
            f"memory would hold {total + size} bytes; at most {limits.MEMORY_MAX_TOTAL_BYTES} in all.",
            "Delete or shorten entries first.",
            size=total + size,
            limit=limits.MEMORY_MAX_TOTAL_BYTES,
        )
    _fit(db, root, agent, key, content, budget)
    revision = (int(row[0]) if row else 0) + 1
    db.execute(
        "INSERT INTO state_memory (root, agent, key, content, size, revision, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (root, agent, key) DO UPDATE SET content = excluded.content, size = excluded.size,"
        " revision = excluded.revision, updated_at = excluded.updated_at",
        (root, agent, key, content, size, revision, time.time()),
    )
    return {"key": key, "revision": revision, "bytes": size}


def _entry_revision(db: Any, root: str, agent: str, key: str) -> int:
    row = db.execute(
        "SELECT revision FROM state_memory WHERE root = ? AND agent = ? AND key = ?", (root, agent, key)
    ).fetchone()
    return int(row[0]) if row else 0


def _pending_for_key(db: Any, root: str, agent: str, key: str) -> list[Any]:
    return db.execute(
        "SELECT id, op, content FROM state_memory_proposals WHERE root = ? AND agent = ? AND key = ?"
        " AND status = 'pending' ORDER BY created_at, id",
        (root, agent, key),
    ).fetchall()


def propose_change(
    store: Store, root: str, agent: str, op: str, key: str, content: str | None, session_id: str, call_id: str
) -> dict[str, Any]:
    """Store a proposal that waits for an explicit accept. Returns ``{"id", "status": "pending",
    "existing": bool, "sameKey": [ids]}``: ``existing`` when an identical proposal (same op, key and
    content) already waits — its id is returned, no second one is made — and ``sameKey`` the other
    pending proposals for this key, which an accept of any one of them supersedes. A ``set`` to the
    content the entry already holds proposes nothing: ``{"id": None, "status": "unchanged",
    "revision": the entry's, "sameKey": [ids]}``."""
    if content is not None and _size(content) > limits.MEMORY_MAX_ENTRY_BYTES:
        raise StateRefusal(
            "MemoryTooLarge",
            f"memory {key!r} would be {_size(content)} bytes; an entry holds at most {limits.MEMORY_MAX_ENTRY_BYTES}.",
            "Keep it shorter.",
            size=_size(content),
            limit=limits.MEMORY_MAX_ENTRY_BYTES,
        )
    with store.transaction() as db:
        same_key = _pending_for_key(db, root, agent, key)
        held = db.execute(
            "SELECT revision, content FROM state_memory WHERE root = ? AND agent = ? AND key = ?", (root, agent, key)
        ).fetchone()
        if op == "set" and held is not None and held["content"] == content:
            # Nothing to decide: accepting it would change nothing. No proposal is made (none held a
            # place among the MEMORY_MAX_PENDING_PROPOSALS only to be accepted as a no-op).
            return {
                "id": None, "status": "unchanged", "existing": False, "revision": int(held["revision"]),
                "sameKey": [r["id"] for r in same_key],
            }
        if op == "delete" and not same_key and _entry_revision(db, root, agent, key) == 0:
            # Nothing holds or proposes the key: before, it waited as a proposal no accept could ever
            # apply, holding one of the MEMORY_MAX_PENDING_PROPOSALS places until a person rejected it.
            raise StateRefusal(
                "NotFound",
                f"there is no memory {key!r} to delete; nothing was proposed.",
                "Read the memory first (memory_read) and delete only a key it lists." + _mp_hint(key),
                key=key,
            )
        for row in same_key:
            if row["op"] == op and row["content"] == content:
                others = [r["id"] for r in same_key if r["id"] != row["id"]]
                return {"id": row["id"], "status": "pending", "existing": True, "sameKey": others}
        (pending,) = db.execute(
            "SELECT COUNT(*) FROM state_memory_proposals WHERE root = ? AND agent = ? AND status = 'pending'",
            (root, agent),
        ).fetchone()
        if pending >= limits.MEMORY_MAX_PENDING_PROPOSALS:
            raise StateRefusal(
                "TooManyProposals",
                f"{pending} memory proposals already wait for review (at most {limits.MEMORY_MAX_PENDING_PROPOSALS}).",
                "Wait until they are accepted or rejected.",
                limit=limits.MEMORY_MAX_PENDING_PROPOSALS,
            )
        pid = "mp_" + secrets.token_hex(8)
        db.execute(
            "INSERT INTO state_memory_proposals (id, root, agent, op, key, content, status, session_id, call_id,"
            " created_at, base_revision)"
            " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
            (pid, root, agent, op, key, content, session_id, call_id, time.time(),
             _entry_revision(db, root, agent, key)),
        )
    return {"id": pid, "status": "pending", "existing": False, "sameKey": [r["id"] for r in same_key]}


def propose(
    store: Store, root: str, agent: str, op: str, key: str, content: str | None, session_id: str, call_id: str
) -> str | None:
    """The id of the proposal that waits for this change (``propose_change``); None when the entry
    already holds it (nothing to propose)."""
    made = propose_change(store, root, agent, op, key, content, session_id, call_id)
    return None if made["id"] is None else str(made["id"])


def proposals(store: Store, root: str, agent: str | None = None, status: str = "pending") -> list[dict[str, Any]]:
    sql = "SELECT * FROM state_memory_proposals WHERE root = ? AND status = ?"
    params: tuple[Any, ...] = (root, status)
    if agent is not None:
        sql += " AND agent = ?"
        params += (agent,)
    return [dict(r) for r in store.query(sql + " ORDER BY created_at, id", params)]


_LIST_PENDING = "Run 'zuno memory' to list the pending ones."


def not_pending(proposal_id: str, p: Any, root: str | None = None) -> StateRefusal:
    if p is None or (root is not None and p["root"] != root):
        # Another workspace's proposal (a shared store: ZUNO_DB, --db) is, to this one, no proposal:
        # neither its existence nor its key or status is told, and it cannot be decided from here.
        return StateRefusal(
            "NotPending", f"there is no memory proposal {proposal_id}.", _LIST_PENDING, proposal=proposal_id
        )
    facts: dict[str, Any] = {"proposal": proposal_id, "status": p["status"], "key": p["key"]}
    if p["status"] == "superseded":
        facts["supersededBy"] = p["superseded_by"]
        return StateRefusal(
            "NotPending",
            f"memory proposal {proposal_id} is not pending: it was superseded by {p['superseded_by']}, the proposal "
            f"for the same key {p['key']!r} that was accepted.",
            "Nothing is left to decide for it. " + _LIST_PENDING,
            **facts,
        )
    return StateRefusal(
        "NotPending", f"memory proposal {proposal_id} is not pending: it was already {p['status']}.", _LIST_PENDING,
        **facts,
    )


def accept_proposal(
    store: Store, proposal_id: str, budget: tuple[int, int] | None = None, root: str | None = None
) -> dict[str, Any]:
    """Apply a pending proposal (the explicit accept). ``root``: the workspace deciding; a proposal
    of another workspace is refused as no proposal (None: any, for the host). Every other pending proposal for the same
    key is then superseded (``result["superseded"]`` lists them): one accept decides the key. Raises
    StateRefusal when it is not pending, when the entry changed since it was proposed
    (``StaleProposal``), or when it no longer fits the bounds (then it stays pending)."""
    with store.transaction() as db:
        p = db.execute("SELECT * FROM state_memory_proposals WHERE id = ?", (proposal_id,)).fetchone()
        if p is None or p["status"] != "pending" or (root is not None and p["root"] != root):
            raise not_pending(proposal_id, p, root)
        now_revision = _entry_revision(db, p["root"], p["agent"], p["key"])
        base = p["base_revision"]
        if base is not None and base != now_revision:
            raise StateRefusal(
                "StaleProposal",
                f"memory {p['key']!r} changed since proposal {proposal_id} was made (revision {base} then, "
                f"{now_revision} now); accepting it would overwrite that change unseen.",
                f"Reject it (zuno memory reject {proposal_id}) and let the agent propose again from the memory as "
                "it is now.",
                proposal=proposal_id,
                key=p["key"],
                baseRevision=base,
                currentRevision=now_revision,
            )
        result = _apply(db, p["root"], p["agent"], p["op"], p["key"], p["content"], budget)
        now = time.time()
        db.execute(
            "UPDATE state_memory_proposals SET status = 'accepted', decided_at = ? WHERE id = ?", (now, proposal_id)
        )
        others = [r["id"] for r in _pending_for_key(db, p["root"], p["agent"], p["key"])]
        db.executemany(
            "UPDATE state_memory_proposals SET status = 'superseded', superseded_by = ?, decided_at = ?"
            " WHERE id = ? AND status = 'pending'",
            [(proposal_id, now, o) for o in others],
        )
    return {**result, "superseded": others}


def reject_proposal(store: Store, proposal_id: str, root: str | None = None) -> None:
    """Reject a pending proposal; ``root`` as for :func:`accept_proposal`."""
    with store.transaction() as db:
        cur = db.execute(
            "UPDATE state_memory_proposals SET status = 'rejected', decided_at = ? WHERE id = ? AND status = 'pending'"
            " AND (? IS NULL OR root = ?)",
            (time.time(), proposal_id, root, root),
        )
        if cur.rowcount != 1:
            p = db.execute("SELECT * FROM state_memory_proposals WHERE id = ?", (proposal_id,)).fetchone()
            raise not_pending(proposal_id, p, root)


# What a model sends when it tries to act on a proposal (mp_…) it was told of: an argument naming
# it, a decision as the action. No tool decides a proposal; the advice says who does, and how.
_PROPOSAL_ARGUMENTS = frozenset({"id", "proposal", "proposal_id", "proposalid", "mp_id"})
_DECISIONS = frozenset({"accept", "approve", "confirm", "reject", "decline", "deny", "withdraw", "cancel"})
PROPOSAL_ADVICE = (
    "A memory proposal (mp_…) is decided by the user, never by a tool: memory_update only proposes "
    "(action set or delete, by key), and the user runs 'zuno memory accept MP_ID' or 'zuno memory reject "
    "MP_ID'. Every pending proposal still waits as it was."
)


def _mp_hint(key: str) -> str:
    """PROPOSAL_ADVICE after a refusal of a key that looks like a proposal id (mp_…), else nothing."""
    return f" {PROPOSAL_ADVICE}" if key[:3].casefold() == "mp_" else ""


def proposal_advice(arguments: Any) -> str | None:
    """PROPOSAL_ADVICE when these raw arguments look like an attempt to name or decide a proposal."""
    if not isinstance(arguments, dict):
        return None
    names = {str(k).casefold() for k in arguments}
    action, key = arguments.get("action"), arguments.get("key")
    if (
        names & _PROPOSAL_ARGUMENTS
        or (isinstance(action, str) and action.casefold() in _DECISIONS)
        or (isinstance(key, str) and key[:3].casefold() == "mp_")
    ):
        return PROPOSAL_ADVICE
    return None


def _proposal_named(store: Store, root: str, key: str) -> Any:
    """The proposal of this workspace whose id is ``key`` (a model sent a proposal id as a key), or None."""
    if key[:3].casefold() != "mp_":
        return None
    rows = store.query("SELECT id, key, status FROM state_memory_proposals WHERE id = ? AND root = ?", (key, root))
    return rows[0] if rows else None


def _proposal_as_key(p: Any) -> StateRefusal:
    return StateRefusal(
        "ProposalIdNotKey",
        f"{p['id']} is the id of a memory proposal ({p['status']}, for key {p['key']!r}), not a memory key.",
        PROPOSAL_ADVICE + f" To read or change the entry itself, use its key {p['key']!r}.",
        proposal=p["id"],
        status=p["status"],
        key=p["key"],
    )


def _bad_key(key: str) -> StateRefusal:
    why = "is empty" if key == "" else "is not a memory key"
    return StateRefusal(
        "InvalidKey",
        f"key {named(key)!r} {why}: a memory key is 1-100 characters of ASCII letters, digits, '.', '_', '-' "
        "and '/'.",
        "Omit key to list every entry, or send a key memory_read lists."
        + _mp_hint(key),
        key=named(key),
    )


class MemoryReadTool(ActionTool):
    name = "memory_read"
    description = (
        "Read this workspace's bounded memory for the current agent: every entry (key, revision, content), or one "
        "by key. Memory holds durable facts across sessions (how to run the tests, a preference the user stated)."
    )
    Args = MemoryReadArgs
    declarations = READ

    def invalid_arguments_advice(self, arguments: Any) -> str | None:
        return proposal_advice(arguments)

    async def run(self, ctx: ToolContext, args: MemoryReadArgs) -> ToolOutput:
        all_entries = entries(ctx.store, str(ctx.root), agent_of(ctx))
        if args.key is not None:
            if not _KEY.fullmatch(args.key):  # before: "there is no memory ''", the problem unnamed
                return _bad_key(args.key).to_output()
            all_entries = [e for e in all_entries if e["key"] == args.key]
            if not all_entries:
                p = _proposal_named(ctx.store, str(ctx.root), args.key)
                if p is not None:
                    return _proposal_as_key(p).to_output()
                return StateRefusal(
                    "NotFound", f"there is no memory {named(args.key)!r}.", "List the memory (omit key)."
                ).to_output()
        pending = len(proposals(ctx.store, str(ctx.root), agent_of(ctx)))
        return ToolOutput(text=read_text(all_entries, pending), metadata={"entries": len(all_entries)})


class MemoryUpdateTool(ActionTool):
    name = "memory_update"
    description = (
        "Change this workspace's bounded memory for the current agent. action is required: set (key, content) or "
        "delete (key). Applies at once, unless a review policy is configured: then it is a proposal that waits "
        "for the user's explicit accept."
    )
    Args = MemoryUpdateArgs
    declarations = MUTATION
    ACTIONS: ClassVar[list[str]] = ["set", "delete"]

    def invalid_arguments_advice(self, arguments: Any) -> str | None:
        return proposal_advice(arguments)

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        a = inner(args)
        root, agent = str(ctx.root), agent_of(ctx)
        content = getattr(a, "content", None)
        named_proposal = _proposal_named(ctx.store, root, a.key)
        if named_proposal is not None:  # set or delete "by" a proposal id: never an entry of that name
            return _proposal_as_key(named_proposal).to_output()
        try:
            if ctx.config.memory.review_policy == "review":
                made = propose_change(ctx.store, root, agent, a.action, a.key, content, ctx.session_id, ctx.call_id)
                pid, same_key = made["id"], made["sameKey"]
                if made["status"] == "unchanged":
                    return _unchanged_output(a.key, made["revision"], same_key)
                text = (
                    f"[memory: the same change already waits as proposal {pid}; no second one was made"
                    if made["existing"]
                    else f"[memory: proposal {pid} ({a.action} {a.key!r}) waits for an explicit accept"
                )
                text += "; nothing changed yet"
                if same_key:
                    text += (
                        f". Also waiting for {a.key!r}: {', '.join(same_key)}; the user accepts at most one of "
                        "them (accepting one supersedes the others)"
                    )
                return ToolOutput(
                    text=text + "]",
                    metadata={"memoryProposal": {"id": pid, "status": "pending", "existing": made["existing"],
                                                 "sameKey": same_key}},
                )
            with ctx.store.transaction() as db:
                result = _apply(db, root, agent, a.action, a.key, content, fits.of_config(ctx))
        except StateRefusal as r:
            return r.to_output()
        if result.get("unchanged"):
            return _unchanged_output(a.key, result["revision"], [], result)
        what = "deleted" if result.get("deleted") else f"set, revision {result['revision']}"
        return ToolOutput(text=f"[memory {a.key!r} {what}]", metadata={"memory": result})


def _unchanged_output(key: str, revision: int, same_key: list[str], result: dict[str, Any] | None = None) -> ToolOutput:
    """memory_update set to the content the entry already holds: nothing written, nothing proposed."""
    text = f"[memory {key!r} unchanged: it already holds exactly this content (revision {revision}); nothing was "
    text += "written and nothing proposed"
    if same_key:
        text += f". Still waiting for {key!r}: {', '.join(same_key)} (the user decides them)"
    memory = result or {"key": key, "revision": revision, "unchanged": True}
    return ToolOutput(text=text + "]", metadata={"memory": memory, "unchanged": True})
