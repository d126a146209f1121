"""The CDN purge hook: POSTs the tags an invalidation made stale to WOVEPAPER_PURGE_URL.

The body is `{"tags": ["paper:12", "researcher:7", "lists", ...]}`, the names responses carry in
`Surrogate-Key` / `Cache-Tag`; a small adapter at that URL turns it into the CDN's own purge call.
A failed purge is logged, never raised: the entries it missed expire with their `max-age`.
"""

from __future__ import annotations

import logging
from typing import Final

import httpx

log = logging.getLogger(__name__)

TIMEOUT_S: Final = 5.0
TAGS_PER_REQUEST: Final = 1000


class HttpPurge:
    def __init__(self, url: str, *, client: httpx.AsyncClient | None = None) -> None:
        self.url = url
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT_S)

    async def __call__(self, tags: list[str]) -> None:
        for start in range(0, len(tags), TAGS_PER_REQUEST):
            try:
                response = await self.client.post(self.url, json={"tags": tags[start : start + TAGS_PER_REQUEST]})
                response.raise_for_status()
            except httpx.HTTPError as exc:
                log.warning("CDN purge of %d tags failed: %s", len(tags), exc)
                return

    async def aclose(self) -> None:
        await self.client.aclose()
