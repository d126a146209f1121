"""arXiv OAI-PMH: Identify and ListRecords pages, parsed while they download."""

from __future__ import annotations

from datetime import date

import httpx

from ingest.clients.http import Clock, RetryPolicy, SourceClient
from ingest.parsers.oai import OAIPage, OAIPageParser, parse_identify

METADATA_PREFIX = "arXivRaw"


class ArxivOAIClient:
    """One connection, requests at least `delay_s` apart (arXiv's terms: one request every 3 s)."""

    def __init__(
        self,
        base_url: str,
        *,
        delay_s: float = 3.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.url = base_url.rstrip("/")
        self.http = SourceClient(
            "arxiv",
            base_url,
            min_interval_s=delay_s,
            transport=transport,
            clock=clock or Clock(),
            policy=policy or RetryPolicy(),
            max_connections=1,
            timeout_s=300.0,
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def identify(self) -> date | None:
        """The repository's earliestDatestamp."""

        async def handle(resp: httpx.Response) -> date | None:
            return parse_identify(await resp.aread())

        return await self.http.call("GET", self.url, handle, params={"verb": "Identify"})

    async def list_records(
        self,
        *,
        token: str | None = None,
        from_: date | None = None,
        until: date | None = None,
        set_spec: str | None = None,
        metadata_prefix: str = METADATA_PREFIX,
    ) -> OAIPage:
        """One ListRecords page: with a token only the token is sent (it carries the rest)."""
        params: dict[str, str]
        if token is not None:
            params = {"verb": "ListRecords", "resumptionToken": token}
        else:
            params = {"verb": "ListRecords", "metadataPrefix": metadata_prefix}
            if from_:
                params["from"] = from_.isoformat()
            if until:
                params["until"] = until.isoformat()
            if set_spec:
                params["set"] = set_spec

        async def handle(resp: httpx.Response) -> OAIPage:
            parser = OAIPageParser(str(resp.url))
            async for chunk in resp.aiter_bytes():
                parser.feed(chunk)
            return parser.close()

        # The exact base URL: a relative "" would add a trailing slash the server does not serve.
        return await self.http.call("GET", self.url, handle, params=params)
