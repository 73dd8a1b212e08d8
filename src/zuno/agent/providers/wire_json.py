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

def dumps(value: Any) -> bytes:
    """The SDKs' own encoding: UTF-8, no ASCII escaping, compact separators, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def array(fragments: Sequence[bytes]) -> bytes:
    return b"[" + b",".join(fragments) + b"]"


def obj(fields: dict[str, Any]) -> bytes:
    """A JSON object from fields in order; a ``bytes`` value is an already serialised fragment."""
    return (
        b"{"
        + b",".join(dumps(k) + b":" + (v if isinstance(v, bytes) else dumps(v)) for k, v in fields.items())
        + b"}"
    )


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
