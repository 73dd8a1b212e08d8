"""SearXNG's JSON API: ``GET {base}/search?q=..&format=json`` (the instance must enable the
json format; a 403 then means it has not). No key; often self-hosted on loopback.

The answer's ``results[]`` carry ``title``, ``url`` and ``content``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from zuno import limits
from zuno.connect.web_search.base import Endpoint, Hit, Requester, SearchFailure, call, text

PATH = "/search"


@dataclass
class SearxngProvider:
    name: str
    endpoint: Endpoint
    base_url: str
    api_key: str | None
    timeout_s: float

    async def search(self, query: str, count: int, request: Requester) -> list[Hit]:
        url = f"{self.base_url}{PATH}?{urlencode({'q': query, 'format': 'json'})}"
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            data = await call(
                self.endpoint,
                request,
                url,
                headers=headers,
                timeout_s=self.timeout_s,
                max_bytes=limits.WEB_SEARCH_MAX_RESPONSE_BYTES,
            )
        except SearchFailure as f:
            if f.status == 403:
                raise SearchFailure(
                    self.endpoint, f.category, f.status, "Enable the json format in the instance's settings.yml."
                ) from None
            raise
        results = data.get("results") if isinstance(data, dict) else None
        hits = []
        for r in results if isinstance(results, list) else []:
            if isinstance(r, dict) and text(r.get("url")):
                hits.append(Hit(text(r.get("title")), text(r.get("url")), text(r.get("content"))))
        return hits[:count]
