"""Name resolution: A and AAAA both asked, once per hop; the answer is validated as a whole.

A ``Resolver`` is injectable (tests answer from a table; a rebinding resolver answers
differently each time). ``SystemResolver`` asks the system's getaddrinfo for IPv4 and IPv6
separately and concurrently; one family failing is fine as long as the other answers.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Protocol

from zuno.tools.web.addresses import IPAddress, IPNetwork, allowed_by, refusal
from zuno.tools.web.errors import AddressRefused, ResolveError


class Resolver(Protocol):
    async def resolve(self, host: str) -> list[IPAddress]:
        """Every address of ``host`` (A and AAAA). Raise ResolveError when there is none."""


class SystemResolver:
    async def _family(self, host: str, family: int) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, None, family=family, type=socket.SOCK_STREAM)
        return [ipaddress.ip_address(info[4][0]) for info in infos]

    async def resolve(self, host: str) -> list[IPAddress]:
        answers = await asyncio.gather(
            self._family(host, socket.AF_INET), self._family(host, socket.AF_INET6), return_exceptions=True
        )
        found: list[IPAddress] = []
        errors: list[BaseException] = []
        for a in answers:
            if isinstance(a, BaseException):
                if not isinstance(a, OSError):
                    raise a
                errors.append(a)
            else:
                found.extend(x for x in a if x not in found)
        if found:
            return found
        temporary = any(getattr(e, "errno", None) == socket.EAI_AGAIN for e in errors)
        detail = next((str(getattr(e, "strerror", "") or e) for e in errors), "no address")
        raise ResolveError(f"{host} did not resolve ({detail})", transient=temporary)


@dataclass(frozen=True, slots=True)
class Validated:
    """The one validated answer of a hop: what the connection may dial, in this order."""

    host: str
    addresses: tuple[IPAddress, ...]
    # Addresses let through by webfetch.allow_private: (address, the entry that allowed it).
    widened: tuple[tuple[str, str], ...] = field(default=())


def validate_answer(
    host: str, answer: list[IPAddress], nets: list[IPNetwork], hosts: list[str], *, policy: bool = True
) -> Validated:
    """Refuse the whole answer when any address in it is not public (and not widened)."""
    if not answer:
        raise ResolveError(f"{host} resolved to no address (an empty answer)")
    if not policy:
        return Validated(host, tuple(answer))
    widened: list[tuple[str, str]] = []
    refused: list[str] = []
    host_allowed = host.lower() in hosts
    for ip in answer:
        why = refusal(ip)
        if why is None:
            continue
        if host_allowed:
            widened.append((str(ip), host.lower()))
            continue
        net = allowed_by(ip, nets)
        if net is not None:
            widened.append((str(ip), str(net)))
            continue
        refused.append(why)
    if refused:
        mixed = len(refused) < len(answer)
        lead = (
            f"{host} resolved to a mix of public and non-public addresses; the whole answer is refused"
            if mixed
            else f"{host} resolves only to non-public addresses"
        )
        raise AddressRefused(
            f"{lead}: {'; '.join(refused)}. To fetch an internal server on purpose, add its hostname or "
            "network to webfetch.allow_private."
        )
    return Validated(host, tuple(answer), tuple(widened))
