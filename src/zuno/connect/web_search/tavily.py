"""Tavily's search API: ``POST /search`` with a JSON body and ``Authorization: Bearer``.

The answer's ``results[]`` carry ``title``, ``url`` and ``content``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from zuno import limits
from zuno.connect.web_search.base import Endpoint, Hit, Requester, call, text

DEFAULT_BASE_URL = "https://api.tavily.com"
PATH = "/search"


@dataclass
class TavilyProvider:
    name: str
    endpoint: Endpoint
    base_url: str
    api_key: str
    timeout_s: float

    async def search(self, query: str, count: int, request: Requester) -> list[Hit]:
        body = json.dumps({"query": query, "max_results": min(count, 20)}).encode("utf-8")
        data = await call(
            self.endpoint,
            request,
            f"{self.base_url}{PATH}",
            method="POST",
            headers={
                "Accept": "application/json",
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.api_key}",
            },
            content=body,
            timeout_s=self.timeout_s,
            max_bytes=limits.WEB_SEARCH_MAX_RESPONSE_BYTES,
        )
        results = data.get("results") if isinstance(data, dict) else None
        hits = []
        for r in results if isinstance(results, list) else []:
            if isinstance(r, dict) and text(r.get("url")):
                hits.append(Hit(text(r.get("title")), text(r.get("url")), text(r.get("content"))))
        return hits
