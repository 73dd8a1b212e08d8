"""webfetch (zuno), web_fetch (chord) and web_search (zuno): fetches that cannot be turned
against the machine they run on. See docs/web.md."""

from zuno.tools.web.tools import register

__all__ = ["register"]
