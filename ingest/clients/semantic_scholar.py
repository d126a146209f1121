"""Semantic Scholar Graph API: paper and author batches, and an author's papers page by page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from db.records import ResearcherRecord, WorkRecord
from ingest.clients.http import Clock, RetryPolicy, SourceClient, read_json
from ingest.parsers import s2

PAPER_BATCH_MAX = 500
AUTHOR_BATCH_MAX = 1000
AUTHOR_PAPERS_PAGE = 1000


class SemanticScholarClient:
    """S2 answers 429 without Retry-After: the shared client backs off exponentially with jitter."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        rps: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.http = SourceClient(
            "s2",
            base_url,
            min_interval_s=1.0 / rps,
            headers={"x-api-key": api_key} if api_key else {},
            transport=transport,
            clock=clock or Clock(),
            policy=policy or RetryPolicy(),
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def papers_by_arxiv_id(self, arxiv_ids: Sequence[str]) -> dict[str, s2.S2Paper]:
        """POST /paper/batch with `ARXIV:<id>` ids, PAPER_BATCH_MAX at a time."""
        out: dict[str, s2.S2Paper] = {}
        for i in range(0, len(arxiv_ids), PAPER_BATCH_MAX):
            chunk = list(arxiv_ids[i : i + PAPER_BATCH_MAX])
            payload = await self.http.call(
                "POST",
                "/paper/batch",
                read_json,
                params={"fields": s2.PAPER_FIELDS},
                json={"ids": [f"ARXIV:{a}" for a in chunk]},
            )
            out.update(s2.parse_paper_batch(chunk, payload))
        return out

    async def authors(self, author_ids: Sequence[str]) -> dict[str, ResearcherRecord]:
        """POST /author/batch, AUTHOR_BATCH_MAX at a time: {asked id: record}; unknown ids are left out. The answer
        comes in request order; a record whose id is not the one asked for is the author S2 merged it into."""
        out: dict[str, ResearcherRecord] = {}
        for i in range(0, len(author_ids), AUTHOR_BATCH_MAX):
            chunk = list(author_ids[i : i + AUTHOR_BATCH_MAX])
            payload: Any = await self.http.call(
                "POST", "/author/batch", read_json, params={"fields": s2.AUTHOR_FIELDS}, json={"ids": chunk}
            )
            if not isinstance(payload, list):
                continue
            # Out of step with the request, the answer's own ids are all there is to go by.
            asked_ids = chunk if len(payload) == len(chunk) else [None] * len(payload)
            for asked, item in zip(asked_ids, payload, strict=True):
                rec = s2.researcher_from_author(item)
                if rec and rec.s2_author_id:
                    out[asked or rec.s2_author_id] = rec
        return out

    async def author_works(self, author_id: str) -> list[WorkRecord]:
        """Every paper of an author (GET /author/{id}/papers), following `next` until it is absent."""
        works: list[WorkRecord] = []
        offset: int | None = 0
        while offset is not None:
            payload = await self.http.call(
                "GET",
                f"/author/{author_id}/papers",
                read_json,
                params={"fields": s2.WORK_FIELDS, "offset": offset, "limit": AUTHOR_PAPERS_PAGE},
            )
            page, nxt = s2.parse_author_papers_page(payload)
            works.extend(page)
            offset = nxt if nxt is not None and nxt > offset else None
        return works
