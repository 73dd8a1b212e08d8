"""Web search providers behind one interface: Brave Search, SearXNG and Tavily."""

from zuno.connect.web_search.base import Hit, Provider, Requester, SearchFailure
from zuno.connect.web_search.service import build_provider, filter_hits, search_batch

__all__ = ["Hit", "Provider", "Requester", "SearchFailure", "build_provider", "filter_hits", "search_batch"]
