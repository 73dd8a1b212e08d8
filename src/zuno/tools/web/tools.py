"""Registration of the web family: webfetch and web_search (zuno), web_fetch (chord).

chord's ``web_search`` is provider-hosted (it needs a model pool) and comes with the agent
session work; it is not registered here.
"""

from __future__ import annotations

from zuno.surface import Registry
from zuno.tools.web.fetch_tool import ChordWebFetchTool, WebfetchTool
from zuno.tools.web.search_tool import WebSearchTool


def register(registry: Registry) -> None:
    registry.add("webfetch", WebfetchTool, profiles=("zuno",))
    registry.add("web_fetch", ChordWebFetchTool, profiles=("chord",))
    registry.add("web_search", WebSearchTool, profiles=("zuno",))
