"""task_context and history read the agent loop's transcript (agent_items) when it exists. The
table is created here with the loop's own DDL (branch wt/loop, migration 0002_agent), as the
merged store will have it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import zuno
from zuno.tools.state.sources import lookup_message, source_digest

from statehelp import body, call

AGENT_ITEMS = """
CREATE TABLE IF NOT EXISTS agent_items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    turn INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_result', 'notice', 'compaction')),
    msg_id TEXT, call_id TEXT, request_id INTEGER, step INTEGER, call_seq INTEGER, digest TEXT,
    data TEXT NOT NULL,
    at REAL NOT NULL
)
"""


def _item(rt: zuno.Runtime, sid: str, kind: str, data: dict, msg_id: str | None = None) -> None:
    time.sleep(0.002)  # distinct times: items are ordered by them across stores
    rt.store.execute(
        "INSERT INTO agent_items (session_id, turn, kind, msg_id, data, at) VALUES (?, 1, ?, ?, ?, ?)",
        (sid, kind, msg_id, json.dumps(data), time.time()),
    )


async def test_sources_and_history_from_the_agent_transcript(workspace: Path) -> None:
    cfg = {"continuity": {"enabled": True}, "tools": {"task_context": True}}
    async with zuno.Runtime(root=workspace, config_overrides=cfg) as rt, rt.session() as s:
        await call(s, "plan_get")  # opens the session row
        rt.store.execute(AGENT_ITEMS)
        _item(
            rt,
            s.id,
            "user",
            {"text": "repair it", "images": [{"media_type": "image/png", "data_b64": "QUJD"}]},
            msg_id="msg_u1",
        )
        _item(
            rt,
            s.id,
            "assistant",
            {
                "text": "looking",
                "tool_calls": [],
                "opaque": [{"type": "reasoning", "encrypted_content": "OPAQUE-REASONING"}],
            },
        )
        _item(rt, s.id, "notice", {"text": "[zuno notice: RUNTIME-NOTICE]", "source": "jobs"})
        _item(rt, s.id, "compaction", {"summary": "COMPACTED-SUMMARY", "upto_seq": 2, "n": 1})
        _item(rt, s.id, "user", {"text": "and test it"}, msg_id="msg_u2")
        rec = await call(
            s,
            "task_context",
            {
                "action": "replace",
                "objective": "repair",
                "task_kind": "delivery",
                "source_message_ids": ["msg_u1", "msg_u2"],
            },
        )
        assert rec.outcome == "ok", rec.text
        d1 = source_digest(lookup_message(rt.store, s.id, "msg_u1"))
        # the image bytes are covered: changing them makes the source stale
        rt.store.execute(
            "UPDATE agent_items SET data = ? WHERE msg_id = 'msg_u1'",
            (json.dumps({"text": "repair it", "images": [{"media_type": "image/png", "data_b64": "WFla"}]}),),
        )
        assert source_digest(lookup_message(rt.store, s.id, "msg_u1")) != d1
        got = body(await call(s, "task_context", {"action": "get"}))["task_context"]["sources"]
        assert [x["state"] for x in got] == ["stale", "current"]
        wins = json.loads((await call(s, "history", {"action": "list_windows"})).text.split("\n", 1)[1])["windows"]
        assert len(wins) == 2  # the transcript's compaction marker delimits
        texts = []
        for w in (0, 1):
            listing = await call(s, "history", {"action": "list_items", "window": w})
            texts.append(listing.text)
            for line in listing.text.splitlines()[2:]:
                texts.append((await call(s, "history", {"action": "read_item", "item_id": line.split()[0]})).text)
        text = "\n".join(texts)
        assert "repair it" in text and "looking" in text and "and test it" in text
        for hidden in ("OPAQUE-REASONING", "RUNTIME-NOTICE", "COMPACTED-SUMMARY", "QUJD", "WFla"):
            assert hidden not in text
