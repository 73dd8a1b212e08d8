"""Brave Search API: ``GET /res/v1/web/search?q=..&count=..`` with ``X-Subscription-Token``.

The answer's ``web.results[]`` carry ``title``, ``url`` and ``description`` (with <strong>
highlighting and HTML entities, both removed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from zuno import limits
from zuno.connect.web_search.base import Endpoint, Hit, Requester, call, plain, text

DEFAULT_BASE_URL = "https://api.search.brave.com"
PATH = "/res/v1/web/search"


@dataclass
class BraveProvider:
    name: str
    endpoint: Endpoint
    base_url: str
    api_key: str
    timeout_s: float

    async def search(self, query: str, count: int, request: Requester) -> list[Hit]:
        url = f"{self.base_url}{PATH}?{urlencode({'q': query, 'count': min(count, 20)})}"
        data = await call(
            self.endpoint,
            request,
            url,
            headers={"Accept": "application/json", "X-Subscription-Token": self.api_key},
            timeout_s=self.timeout_s,
            max_bytes=limits.WEB_SEARCH_MAX_RESPONSE_BYTES,
        )
        web = data.get("web") if isinstance(data, dict) else None
        results = web.get("results") if isinstance(web, dict) else None
        hits = []
        for r in results if isinstance(results, list) else []:
            if isinstance(r, dict) and text(r.get("url")):
                hits.append(Hit(plain(r.get("title")), text(r.get("url")), plain(r.get("description"))))
        return hits
