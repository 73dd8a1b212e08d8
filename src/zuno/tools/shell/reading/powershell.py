"""PowerShell: a quote-aware lexical reading of statements and pipes (no grammar is installed),
for the one construct that weakens its status: a native command piped into another."""

from __future__ import annotations

import re

from zuno.tools.shell.policy import Limitation
from zuno.tools.shell.reading.model import Analysis

_PWSH_ALIASES = frozenset(
    {
        "%",
        "?",
        "foreach",
        "foreach-object",
        "where",
        "where-object",
        "select",
        "sort",
        "group",
        "measure",
        "tee",
        "out-null",
        "out-file",
        "out-string",
        "echo",
        "write",
        "ft",
        "fl",
        "gc",
        "gci",
        "ls",
        "dir",
        "cat",
        "sls",
        "select-string",
    }
)


def _pwsh_split(text: str, seps: tuple[str, ...]) -> list[tuple[str, int, str | None]]:
    """Split outside quotes, braces and parentheses. Returns (part, offset, separator-after)."""
    out: list[tuple[str, int, str | None]] = []
    depth = 0
    quote: str | None = None
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "`" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c == "`":
            i += 2
            continue
        elif c == "#" and depth == 0:
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth = max(0, depth - 1)
        elif depth == 0:
            for s in seps:
                if text.startswith(s, i):
                    out.append((text[start:i], start, s))
                    i += len(s)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    out.append((text[start:], start, None))
    return out


def _pwsh_is_native(stage: str) -> bool:
    s = stage.strip()
    if not s:
        return False
    if s.startswith("&") or s.startswith("."):
        return True
    first = s.split()[0]
    if first[0] in "$([@{'\"":
        return False
    low = first.lower()
    if low in _PWSH_ALIASES or re.fullmatch(r"[a-z]+-[a-z][a-z0-9]*", low):
        return False
    return True


def analyze_pwsh(command: str) -> Analysis:
    out = Analysis()

    def pos(off: int) -> str:
        line = command.count("\n", 0, off) + 1
        col = off - (command.rfind("\n", 0, off) + 1) + 1
        return f"{line}:{col}"

    for stmt, off, _sep in _pwsh_split(command, ("\n", ";")):
        if not stmt.strip():
            continue
        out.statements.append(" ".join(stmt.split())[:200])
        chain = _pwsh_split(stmt, ("||", "&&"))
        for part, poff, sep in chain:
            if sep == "||":
                out.limitations.append(
                    Limitation(
                        "or-fallback",
                        "a `||` fallback runs when the command before it fails and replaces the failure",
                        "drop the `|| …` fallback, or end it with `exit 1`",
                        pos(off + poff),
                        " ".join(stmt.split())[:80],
                    )
                )
            stages = [s for s in _pwsh_split(part, ("|",)) if s[2] != "||"]
            natives = [s for s in stages if _pwsh_is_native(s[0])]
            if len(stages) > 1 and len(natives) >= 2:
                out.limitations.append(
                    Limitation(
                        "pwsh-native-pipe",
                        "one native command piped into another leaves $LASTEXITCODE holding the second one's "
                        "code alone",
                        "run the first native command on its own and check $LASTEXITCODE before piping its output",
                        pos(off + poff + natives[0][1]),
                        " ".join(part.split())[:80],
                    )
                )
    return out
