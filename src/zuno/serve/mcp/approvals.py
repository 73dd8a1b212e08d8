"""Strict-mode approval over MCP: the question goes to the client.

- On a 2026-07-28 connection the server cannot send requests: the call answers with an
  ``InputRequiredResult`` carrying a form elicitation, and the client retries the call with the
  answer and the sealed ``requestState`` (bound to this tool call's name and arguments).
- On a legacy connection whose client declared ``elicitation``, an ``elicitation/create`` request.
- Otherwise nobody can answer: the call is blocked/denied with how to allow it.

Only an explicit accept with ``approve: true`` is consent; decline, cancel, a timeout or a
malformed answer is a refusal.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from zuno.permissions import ApprovalRequest

APPROVAL_KEY = "zuno_approval"
APPROVAL_TIMEOUT_S = 300.0
REQUEST_STATE_TTL_S = 600.0

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve this call",
            "description": "true runs the call once; anything else refuses it.",
        }
    },
    "required": ["approve"],
}


def approval_message(tool: str, subject: str | None, reason: str) -> str:
    what = f" on {subject}" if subject else ""
    return f"Zuno asks to run {tool}{what}: {reason}. Approve this one call?"


def consent(action: str | None, content: dict[str, Any] | None) -> bool:
    return action == "accept" and isinstance(content, dict) and content.get("approve") is True


@dataclass
class RequestApproval:
    """How the call of the current request is approved: a decision the client already sent
    (the InputRequiredResult round trip), or a way to ask it (elicitation/create)."""

    answer: bool | None = None
    ask: Callable[[ApprovalRequest], Awaitable[bool | None]] | None = None


CURRENT: ContextVar[RequestApproval | None] = ContextVar("zuno_mcp_approval", default=None)


class McpApprover:
    """The Approver port for ``zuno mcp``: ``--approve`` approves everything; otherwise the current
    request's client is asked (or has answered)."""

    def __init__(self, auto: bool = False) -> None:
        self.auto = auto

    async def approve(self, request: ApprovalRequest) -> bool | None:
        if self.auto:
            return True
        current = CURRENT.get()
        if current is None:
            return None
        if current.answer is not None:
            return current.answer
        if current.ask is not None:
            return await current.ask(request)
        return None


class RequestStateSeal:
    """Seals the state of an approval round trip: which call it approves, and until when. A state
    that was altered, is stale, or belongs to another call or client is refused."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    @staticmethod
    def call_digest(identity: str, name: str, arguments: Any) -> str:
        blob = json.dumps([identity, name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def seal(self, digest: str) -> str:
        body = json.dumps({"d": digest, "exp": time.time() + REQUEST_STATE_TTL_S}).encode()
        mac = hmac.new(self._key, body, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(body).decode() + "." + base64.urlsafe_b64encode(mac).decode()

    def check(self, token: str, digest: str) -> bool:
        try:
            b64_body, b64_mac = token.split(".", 1)
            body = base64.urlsafe_b64decode(b64_body)
            mac = base64.urlsafe_b64decode(b64_mac)
        except (ValueError, TypeError):
            return False
        if not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).digest()):
            return False
        try:
            data = json.loads(body)
        except ValueError:
            return False
        return data.get("d") == digest and float(data.get("exp", 0)) >= time.time()
