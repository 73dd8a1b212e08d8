"""Request bodies serialised part by part, each immutable part once.

A turn's history only grows between compactions, and its messages and tool specs are immutable
objects the transcript keeps: serialising the whole body again for every request (and letting an
SDK walk it again) costs time that grows with every step. An adapter builds its body here from
JSON fragments: a message's wire form is serialised the first time it is sent and reused after,
the tool schemas once per surface, and only the per-request fields (the system text, limits) are
serialised each time. The bytes are exactly ``json.dumps`` of the same dict body (the tests check
it against the adapter's dict body and the SDK's own parameter transform).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

_WIRE_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode  # built once


def dumps(value: Any) -> bytes:
    """The SDKs' own encoding: UTF-8, no ASCII escaping, compact separators, no NaN."""
    return _WIRE_JSON(value).encode()


_KEYS: dict[str, bytes] = {}  # a body's field names, serialised once


class Items:
    """A JSON array's items, serialised, joined by commas as they are appended (in place: a grown
    history costs only its new items). ``parts()`` gives the array's pieces for ``body``."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.count = 0

    def add(self, fragment: bytes) -> None:
        if self.count:
            self.buf += b","
        self.buf += fragment
        self.count += 1


class Pieces(list[bytes | bytearray]):
    """A serialised value in pieces, joined only once, into the whole body."""


def array(*runs: Items | bytes | None) -> Pieces:
    """One JSON array made of runs of items (an ``Items``, one serialised item, or None for
    nothing), in pieces."""
    out = Pieces([b"["])
    for r in runs:
        if r is None:
            continue
        piece = r.buf if isinstance(r, Items) else r
        if not piece:
            continue
        if len(out) > 1:
            out.append(b",")
        out.append(piece)
    out.append(b"]")
    return out


def body(fields: dict[str, Any]) -> bytes:
    """A JSON object from fields in order, joined once: a ``bytes`` value is an already serialised
    fragment, ``Pieces`` the pieces of one (``array``); anything else is serialised here."""
    out: list[bytes | bytearray] = [b"{"]
    for k, v in fields.items():
        if len(out) > 1:
            out.append(b",")
        key = _KEYS.get(k)
        if key is None:
            key = _KEYS[k] = dumps(k) + b":"
        out.append(key)
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, Pieces):
            out.extend(v)
        else:
            out.append(dumps(v))
    out.append(b"}")
    return b"".join(out)


class Parts:
    """Derived values of immutable objects (their serialised wire forms), made once per object.
    Keyed by identity with the object kept alive beside its value, so an id is never reused
    while its entry exists; entries of objects no longer sent are dropped by ``sweep``."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[object, Any]] = {}

    def of(self, obj: object, make: Callable[[Any], T]) -> T:
        hit = self._seen.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]  # type: ignore[no-any-return]
        value = make(obj)
        self._seen[id(obj)] = (obj, value)
        return value

    def sweep(self, live: Sequence[object]) -> None:
        """Forget what is no longer sent (after a compaction), once the cache has grown well past
        what the last request held."""
        if len(self._seen) > 2 * len(live) + 64:
            keep = {id(o) for o in live}
            self._seen = {k: v for k, v in self._seen.items() if k in keep}


class Once:
    """One cached value for the last key seen (the tool schemas of the current surface): the key's
    items are compared by identity first, then by equality, so an unchanged surface costs one
    pass over it."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._value: Any = None

    def get(self, key: tuple[object, ...], make: Callable[[], T]) -> T:
        k = self._key
        if k is not None and len(k) == len(key) and all(a is b or a == b for a, b in zip(k, key, strict=True)):
            return self._value  # type: ignore[no-any-return]
        self._value = make()
        self._key = key
        return self._value  # type: ignore[no-any-return]


class Grown:
    """What the last request's messages were, so that the next one, which usually only appends to
    them, resumes the work instead of redoing it. ``common(messages)`` is the count of leading
    messages that are the last request's messages (all of them, or 0), compared in one C pass by
    identity, then equality."""

    def __init__(self) -> None:
        self._last: tuple[object, ...] = ()
        self.state: Any = None

    def common(self, messages: tuple[object, ...]) -> int:
        n = len(self._last)
        if self.state is not None and n <= len(messages) and messages[:n] == self._last:
            return n
        return 0

    def keep(self, messages: tuple[object, ...], state: Any) -> None:
        self._last, self.state = messages, state
