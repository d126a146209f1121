"""OpenAlex: works by DOI and authors by id, through list filters (`doi:a|b|...`)."""

from __future__ import annotations

from collections.abc import Sequence

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

    async def works_by_doi(self, dois: Sequence[str]) -> list[openalex.OAWork]:
        """Works whose DOI is one of `dois`, FILTER_MAX per request."""
        out: list[openalex.OAWork] = []
        unique = list(dict.fromkeys(d.lower() for d in dois))
        for i in range(0, len(unique), FILTER_MAX):
            chunk = unique[i : i + FILTER_MAX]
            payload = await self.http.call(
                "GET",
                "/works",
                read_json,
                params={"filter": "doi:" + "|".join(chunk), "per-page": 200, "select": openalex.WORK_SELECT},
            )
            out.extend(w for w in map(openalex.parse_work, openalex.parse_results(payload)) if w)
        return out

    async def institutions(self, institution_ids: Sequence[str]) -> dict[str, InstitutionRecord]:
        """Institutions with their acronyms and other names, by OpenAlex id (I...)."""
        out: dict[str, InstitutionRecord] = {}
        unique = list(dict.fromkeys(institution_ids))
        for i in range(0, len(unique), FILTER_MAX):
            chunk = unique[i : i + FILTER_MAX]
            payload = await self.http.call(
                "GET",
                "/institutions",
                read_json,
                params={
                    "filter": "openalex:" + "|".join(chunk),
                    "per-page": 200,
                    "select": openalex.INSTITUTION_SELECT,
                },
            )
            for item in openalex.parse_results(payload):
                rec = openalex.institution_from(item)
                if rec and rec.openalex_id:
                    out[rec.openalex_id] = rec
        return out

    async def authors(self, author_ids: Sequence[str]) -> dict[str, ResearcherRecord]:
        """Authors' figures (works_count, cited_by_count, h-index, i10) by OpenAlex id."""
        out: dict[str, ResearcherRecord] = {}
        unique = list(dict.fromkeys(author_ids))
        for i in range(0, len(unique), FILTER_MAX):
            chunk = unique[i : i + FILTER_MAX]
            payload = await self.http.call(
                "GET",
                "/authors",
                read_json,
                params={"filter": "openalex:" + "|".join(chunk), "per-page": 200, "select": openalex.AUTHOR_SELECT},
            )
            for item in openalex.parse_results(payload):
                rec = openalex.researcher_from_author(item)
                if rec and rec.openalex_id:
                    out[rec.openalex_id] = rec
        return out
