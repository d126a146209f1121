"""OpenAlex: works by DOI and authors by id, through list filters (`doi:a|b|...`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx

from db.records import InstitutionRecord, ResearcherRecord
from ingest.clients.http import Clock, RetryPolicy, SourceClient, read_json
from ingest.parsers import openalex

FILTER_MAX = 100


def budget_spent(resp: httpx.Response) -> str | None:
    """A 429 with no budget left is a daily limit: stop, do not retry in a loop."""
    if resp.status_code != 429:
        return None
    for header in ("x-ratelimit-remaining-usd", "x-ratelimit-remaining"):
        value = resp.headers.get(header)
        try:
            if value is not None and float(value) <= 0:
                return f"daily budget exhausted ({header}: {value}); resets at midnight UTC"
        except ValueError:
            continue
    return None


class OpenAlexClient:
    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        mailto: str | None = None,
        rps: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        params = {k: v for k, v in (("api_key", api_key), ("mailto", mailto)) if v}
        self.http = SourceClient(
            "openalex",
            base_url,
            min_interval_s=1.0 / rps,
            params=params,
            transport=transport,
            clock=clock or Clock(),
            policy=policy or RetryPolicy(),
            budget_check=budget_spent,
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _filtered(self, path: str, key: str, values: Sequence[str], select: str) -> AsyncIterator[Any]:
        """The results of `path?filter=key:a|b|...`, FILTER_MAX values per request, each value asked once."""
        unique = list(dict.fromkeys(values))
        for i in range(0, len(unique), FILTER_MAX):
            chunk = unique[i : i + FILTER_MAX]
            payload = await self.http.call(
                "GET",
                path,
                read_json,
                params={"filter": f"{key}:" + "|".join(chunk), "per-page": 200, "select": select},
            )
            for item in openalex.parse_results(payload):
                yield item

    async def works_by_doi(self, dois: Sequence[str]) -> list[openalex.OAWork]:
        """Works whose DOI is one of `dois`, FILTER_MAX per request."""
        found = self._filtered("/works", "doi", [d.lower() for d in dois], openalex.WORK_SELECT)
        return [w async for item in found if (w := openalex.parse_work(item))]

    async def institutions(self, institution_ids: Sequence[str]) -> dict[str, InstitutionRecord]:
        """Institutions with their acronyms and other names, by OpenAlex id (I...)."""
        found = self._filtered("/institutions", "openalex", institution_ids, openalex.INSTITUTION_SELECT)
        return {r.openalex_id: r async for item in found if (r := openalex.institution_from(item)) and r.openalex_id}

    async def authors(self, author_ids: Sequence[str]) -> dict[str, ResearcherRecord]:
        """Authors' figures (works_count, cited_by_count, h-index, i10) by OpenAlex id."""
        found = self._filtered("/authors", "openalex", author_ids, openalex.AUTHOR_SELECT)
        return {
            r.openalex_id: r async for item in found if (r := openalex.researcher_from_author(item)) and r.openalex_id
        }
