"""The sealed state of an approval round trip: bound to the call, single use, tamper-evident."""

from __future__ import annotations

from zuno.serve.mcp.approvals import RequestStateSeal, consent


def test_a_state_approves_only_its_own_call_once() -> None:
    seal = RequestStateSeal()
    digest = seal.call_digest("client-a", "write", {"path": "x", "content": "y"})
    other = seal.call_digest("client-b", "write", {"path": "x", "content": "y"})
    token = seal.seal(digest)
    assert not seal.check(token, other)  # another client's (or another call's) state
    body, mac = token.split(".")
    assert not seal.check(body[:-2] + "AA." + mac, digest)  # altered
    assert not RequestStateSeal().check(token, digest)  # another server's key
    assert seal.check(token, digest)
    assert not seal.check(token, digest)  # replayed


def test_only_an_explicit_accept_with_approve_true_is_consent() -> None:
    assert consent("accept", {"approve": True})
    for action, content in [("accept", {"approve": False}), ("accept", {}), ("accept", None), ("decline", None),
                            ("cancel", None), ("accept", {"approve": "true"}), (None, None)]:  # fmt: skip
        assert not consent(action, content)
