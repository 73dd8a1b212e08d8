"""Words as the shell gives them to a program: the parser, a word's literal value when the
shell does not expand it, and where a node is (for a limitation's position and snippet)."""

from __future__ import annotations

import re
from functools import lru_cache

import tree_sitter
import tree_sitter_bash

SHELL_NAMES = frozenset({"bash", "sh", "zsh", "ksh", "ksh93", "mksh", "dash", "ash", "busybox", "fish", "yash"})
PWSH_NAMES = frozenset({"pwsh", "powershell", "pwsh.exe", "powershell.exe"})
GLOB_CHARS = frozenset("*?[")


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _text(src: bytes, node: tree_sitter.Node) -> str:
    return src[node.start_byte : node.end_byte].decode("utf-8", "surrogateescape")


_DQ_ESCAPES = re.compile(r'\\([\\"$`\n])')


def static_word(src: bytes, node: tree_sitter.Node) -> str | None:
    """The literal value of a word the shell does not expand, else None."""
    t = node.type
    if t == "word":
        raw = _text(src, node)
        if raw.startswith("~") or any(c in GLOB_CHARS for c in raw.replace("\\*", "").replace("\\?", "")):
            return None
        if "{" in raw and "," in raw:
            return None
        return re.sub(r"\\(.)", r"\1", raw)
    if t == "raw_string":
        raw = _text(src, node)
        return raw[1:-1]
    if t == "string":
        parts = []
        for c in node.named_children:
            if c.type != "string_content":
                return None
            parts.append(_DQ_ESCAPES.sub(r"\1", _text(src, c)))
        return "".join(parts)
    if t == "number":
        return _text(src, node)
    if t == "concatenation":
        parts = []
        for c in node.children:
            v = static_word(src, c)
            if v is None:
                return None
            parts.append(v)
        return "".join(parts)
    return None


def _where(node: tree_sitter.Node) -> str:
    row, col = node.start_point
    return f"{row + 1}:{col + 1}"


def _snippet(src: bytes, node: tree_sitter.Node, n: int = 80) -> str:
    s = " ".join(_text(src, node).split())
    return s if len(s) <= n else s[: n - 1] + "…"
