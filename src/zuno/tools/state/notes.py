"""notes: logical documents for the current session and Agent — never a host path.

A scope (session + agent) holds at most ``NOTES_MAX_DOCUMENTS`` documents of at most
``NOTES_MAX_DOCUMENT_BYTES`` each and ``NOTES_MAX_TOTAL_BYTES`` in all. Both writes (append_to_file,
write_file) carry the exact ``expected_revision`` of the document: 0 only to create it. The trusted
call id, the request digest and the revision make a repeated delivery idempotent (the stored
result is returned, nothing is applied twice); a stale concurrent write is refused naming the
current revision. The three reads are ReadOnly / Safe / ParallelSafe; the writes SideEffecting /
Never / Exclusive; an absent or unknown action fails closed as SideEffecting.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, ClassVar, Literal

from pydantic import Field, RootModel, field_validator

from zuno import family_migrations, limits
from zuno.declarations import Declarations
from zuno.tool import ToolArgs, ToolContext, ToolOutput
from zuno.tools.state.actions import MUTATION, READ, ActionTool, action_union, inner
from zuno.tools.state.docstore import StateRefusal, canonical, digest
from zuno.tools.state.plan import agent_of

MIGRATIONS = family_migrations.STATE_NOTES  # (the SQL: zuno.family_migrations)

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*$")


def _check_name(v: str) -> str:
    if (
        len(v.encode()) > limits.NOTES_MAX_NAME_BYTES
        or not _NAME.match(v)
        or any(p in (".", "..") for p in v.split("/"))
    ):
        raise ValueError(
            "a note name is a logical name such as 'plan/ideas.md': letters, digits, '.', '_', '-' and '/' "
            f"between segments, at most {limits.NOTES_MAX_NAME_BYTES} bytes, no '.' or '..' segment, "
            "not a host path"
        )
    return v


class _Named(ToolArgs):
    name: str = Field(description="A logical document name (not a path on disk), e.g. 'findings.md'.")

    @field_validator("name")
    @classmethod
    def _valid(cls, v: str) -> str:
        return _check_name(v)


class ListFiles(ToolArgs):
    action: Literal["list_files_by_prefix"]
    prefix: str = ""


class ReadFile(_Named):
    action: Literal["read_file"]


class SearchContents(ToolArgs):
    action: Literal["search_contents"]
    query: str = Field(min_length=1, max_length=1000, description="A literal, case-insensitive substring.")
    prefix: str = ""


class AppendToFile(_Named):
    action: Literal["append_to_file"]
    content: str
    expected_revision: int = Field(ge=0, description="The document's exact revision; 0 only to create it.")


class WriteFile(_Named):
    action: Literal["write_file"]
    content: str
    expected_revision: int = Field(ge=0, description="The document's exact revision; 0 only to create it.")


ACTIONS = ["list_files_by_prefix", "read_file", "search_contents", "append_to_file", "write_file"]


class NotesArgs(RootModel[action_union(ListFiles, ReadFile, SearchContents, AppendToFile, WriteFile)]):  # type: ignore[misc]
    pass


def _scope(session_id: str, agent: str) -> str:
    return f"notes:{session_id}:{agent}"


def write(store: Any, session_id: str, agent: str, call_id: str, a: Any) -> tuple[dict[str, Any], bool]:
    """Apply one write atomically; returns (result, replayed). Raises StateRefusal."""
    req = digest(["notes", a.model_dump(mode="json")])
    scope = _scope(session_id, agent)
    with store.transaction() as db:
        prior = db.execute(
            "SELECT request_digest, base_revision, result FROM work_state_deliveries WHERE scope = ? AND kind = ?"
            " AND call_id = ?",
            (scope, "notes", call_id),
        ).fetchone()
        if prior is not None:
            if prior[0] == req and prior[1] == a.expected_revision:
                return json.loads(prior[2]), True
            raise StateRefusal(
                "ChangedDelivery",
                f"call id {call_id!r} was already delivered with a different request.",
                "Send a new call (a new call id) for a different change.",
                callId=call_id,
            )
        row = db.execute(
            "SELECT revision, content FROM state_notes WHERE session_id = ? AND agent = ? AND name = ?",
            (session_id, agent, a.name),
        ).fetchone()
        current = int(row[0]) if row else 0
        if a.expected_revision != current:
            what = f"document {a.name!r} " + (
                f"is at revision {current}" if row else "does not exist (create it with 0)"
            )
            raise StateRefusal(
                "StaleRevision",
                f"expected_revision {a.expected_revision} is stale: {what}.",
                "Read the document (read_file), rebuild the change from it and send its revision."
                if row
                else "Send expected_revision 0 to create it.",
                resource=f"note {a.name}",
                expectedRevision=a.expected_revision,
                currentRevision=current,
            )
        content = (row[1] if row else "") + a.content if a.action == "append_to_file" else a.content
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > limits.NOTES_MAX_DOCUMENT_BYTES:
            raise StateRefusal(
                "NoteTooLarge",
                f"document {a.name!r} would be {size} bytes; a document holds at most "
                f"{limits.NOTES_MAX_DOCUMENT_BYTES} bytes (256 KiB).",
                "Keep the note shorter, or split it into several documents.",
                size=size,
                limit=limits.NOTES_MAX_DOCUMENT_BYTES,
            )
        count, total = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM state_notes WHERE session_id = ? AND agent = ? AND name != ?",
            (session_id, agent, a.name),
        ).fetchone()
        if row is None and count + 1 > limits.NOTES_MAX_DOCUMENTS:
            raise StateRefusal(
                "TooManyNotes",
                f"this scope already holds {count} documents, the most it may hold ({limits.NOTES_MAX_DOCUMENTS}).",
                "Write into an existing document instead.",
                limit=limits.NOTES_MAX_DOCUMENTS,
            )
        if total + size > limits.NOTES_MAX_TOTAL_BYTES:
            raise StateRefusal(
                "NotesFull",
                f"the scope's documents would hold {total + size} bytes; at most "
                f"{limits.NOTES_MAX_TOTAL_BYTES} (1 MiB) in all.",
                "Shorten or rewrite existing documents.",
                size=total + size,
                limit=limits.NOTES_MAX_TOTAL_BYTES,
            )
        revision = current + 1
        db.execute(
            "INSERT INTO state_notes (session_id, agent, name, revision, content, size, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, agent, name) DO UPDATE SET"
            " revision = excluded.revision, content = excluded.content, size = excluded.size,"
            " updated_at = excluded.updated_at",
            (session_id, agent, a.name, revision, content, size, time.time()),
        )
        result = {"name": a.name, "revision": revision, "bytes": size, "action": a.action}
        db.execute(
            "INSERT INTO work_state_deliveries (scope, kind, call_id, request_digest, base_revision, result, at)"
            " VALUES (?, 'notes', ?, ?, ?, ?, ?)",
            (scope, call_id, req, a.expected_revision, canonical(result), time.time()),
        )
    return result, False


def _docs(store: Any, session_id: str, agent: str, prefix: str) -> list[Any]:
    return [
        r
        for r in store.query(
            "SELECT name, revision, size, content FROM state_notes WHERE session_id = ? AND agent = ? ORDER BY name",
            (session_id, agent),
        )
        if r["name"].startswith(prefix)
    ]


class NotesTool(ActionTool):
    name = "notes"
    description = (
        "Logical documents for this session and agent (not files on disk). action is required: "
        "list_files_by_prefix, read_file, search_contents (literal, case-insensitive), append_to_file, write_file. "
        "Both writes carry the document's exact expected_revision (0 only to create it). At most 100 documents, "
        "256 KiB each, 1 MiB in all."
    )
    Args = NotesArgs
    declarations = MUTATION  # mixed: see action_declarations; an absent or unknown action fails closed
    action_declarations: ClassVar[dict[str, Declarations]] = {
        "list_files_by_prefix": READ,
        "read_file": READ,
        "search_contents": READ,
        "append_to_file": MUTATION,
        "write_file": MUTATION,
    }
    ACTIONS: ClassVar[list[str]] = ACTIONS

    async def run(self, ctx: ToolContext, args: Any) -> ToolOutput:
        a = inner(args)
        agent = agent_of(ctx)
        sid = ctx.session_id
        if a.action in ("append_to_file", "write_file"):
            try:
                result, replayed = write(ctx.store, sid, agent, ctx.call_id, a)
            except StateRefusal as r:
                return r.to_output()
            verb = "appended to" if a.action == "append_to_file" else "wrote"
            return ToolOutput(
                text=f"[notes: {verb} {a.name!r}, revision {result['revision']}, {result['bytes']} bytes"
                + (" · repeated delivery, applied once]" if replayed else "]"),
                metadata={"note": result, "replayed": replayed},
            )
        if a.action == "list_files_by_prefix":
            docs = _docs(ctx.store, sid, agent, a.prefix)
            listing = [{"name": r["name"], "revision": r["revision"], "bytes": r["size"]} for r in docs]
            return ToolOutput(
                text=json.dumps({"documents": listing}, ensure_ascii=False, indent=1), metadata={"count": len(listing)}
            )
        if a.action == "read_file":
            rows = _docs(ctx.store, sid, agent, a.name)
            row = next((r for r in rows if r["name"] == a.name), None)
            if row is None:
                return StateRefusal(
                    "NotFound",
                    f"there is no document {a.name!r}.",
                    "List the documents, or create it with write_file and expected_revision 0.",
                    currentRevision=0,
                ).to_output()
            return ToolOutput(
                text=f"[note {a.name!r} · revision {row['revision']}]\n{row['content']}",
                metadata={"note": {"name": a.name, "revision": row["revision"], "bytes": row["size"]}},
            )
        needle = a.query.casefold()
        hits: list[dict[str, Any]] = []
        truncated = False
        for r in _docs(ctx.store, sid, agent, a.prefix):
            for n, line in enumerate(r["content"].splitlines(), 1):
                if needle in line.casefold():
                    if len(hits) >= limits.STATE_SEARCH_MAX_HITS:
                        truncated = True
                        break
                    hits.append({"name": r["name"], "line": n, "text": line[:500]})
        text = "\n".join(f"{h['name']}:{h['line']}: {h['text']}" for h in hits) or "(no matches)"
        if truncated:
            text += f"\n[truncated at {limits.STATE_SEARCH_MAX_HITS} matches]"
        return ToolOutput(text=text, metadata={"matches": len(hits), "truncated": truncated})
