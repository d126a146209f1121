"""One httpx.AsyncClient per source, with pacing, retries, backoff and Retry-After.

Retries are a small loop here rather than tenacity/stamina: the rules are source-specific
(Retry-After as seconds or a date, a spent daily budget that must stop the run instead of
waiting, a malformed body that is fetched again) and every attempt is counted for the run's
summary. Time is injected (`Clock`) so tests never sleep. The rules themselves (statuses,
backoff, Retry-After) are shared with the language-model client: retry_rules/.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import orjson

from ingest.clients.redact import RedactingFilter, Redactor, same_origin, secrets_of, strip_credentials
from ingest.errors import BudgetExhausted, HTTPStatusFailure, MalformedResponse, TransportFailure, UpstreamError
from retry_rules import Clock, RetryPolicy, retry_after_seconds

log = logging.getLogger("ingest.http")
_HTTP_LOGGERS = ("httpx", "httpcore")
T = TypeVar("T")
Handler = Callable[[httpx.Response], Awaitable[T]]
BudgetCheck = Callable[[httpx.Response], str | None]

__all__ = ["Clock", "RequestStats", "RetryPolicy", "SourceClient", "read_json", "retry_after_seconds"]


@dataclass(slots=True)
class RequestStats:
    requests: int = 0
    retries: int = 0


def _snippet(resp: httpx.Response) -> str:
    ctype = resp.headers.get("content-type", "")
    try:
        text = resp.text
    except (httpx.ResponseNotRead, UnicodeDecodeError):
        return ctype or "unreadable body"
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        return "an HTML page instead of data"
    return " ".join(text.split())[:200]


@dataclass
class SourceClient:
    """The one shared HTTP client of a source: requests are paced `min_interval_s` apart."""

    source: str
    base_url: str
    min_interval_s: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    clock: Clock = field(default_factory=Clock)
    transport: httpx.AsyncBaseTransport | None = None
    budget_check: BudgetCheck | None = None
    max_connections: int = 4
    timeout_s: float = 60.0
    rng: Callable[[], float] = random.random
    stats: RequestStats = field(default_factory=RequestStats)
    max_redirects: int = 5

    def __post_init__(self) -> None:
        self.http = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"User-Agent": "wovepaper-ingest/0.1", **self.headers},
            params=dict(self.params),
            timeout=httpx.Timeout(self.timeout_s),
            limits=httpx.Limits(max_connections=self.max_connections, max_keepalive_connections=self.max_connections),
            transport=self.transport,
            # Redirects are followed by `_send`, which keeps the credentials within their origin.
            follow_redirects=False,
        )
        self.redactor = Redactor(secrets_of(dict(self.headers), dict(self.params)))
        # httpx logs every request's URL (INFO): with the key in it, unless redacted where httpx logs it.
        self._log_filter = RedactingFilter(self.redactor) if self.redactor else None
        if self._log_filter is not None:
            for name in _HTTP_LOGGERS:
                logging.getLogger(name).addFilter(self._log_filter)
        self._last_start: float | None = None
        self._lock = asyncio.Lock()

    async def aclose(self) -> None:
        await self.http.aclose()
        if self._log_filter is not None:
            for name in _HTTP_LOGGERS:
                logging.getLogger(name).removeFilter(self._log_filter)

    async def __aenter__(self) -> SourceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _backoff(self, attempt: int) -> float:
        return self.policy.backoff_s(attempt, self.rng)

    async def _pace(self) -> None:
        if self._last_start is not None and self.min_interval_s > 0:
            wait = self._last_start + self.min_interval_s - self.clock.monotonic()
            if wait > 0:
                await self.clock.sleep(wait)
        self._last_start = self.clock.monotonic()

    async def call(
        self,
        method: str,
        url: str,
        handler: Handler[T],
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
    ) -> T:
        """Send with retries; `handler` reads the streamed 2xx response and may raise MalformedResponse.

        Retried: transport errors, 408/425/429/5xx (Retry-After honoured, else exponential backoff
        with jitter) and malformed bodies. Raised: HTTPStatusFailure for other statuses or when
        attempts run out, TransportFailure, MalformedResponse, and BudgetExhausted at once; every one with
        the client's credentials redacted from its message and URL.
        """
        try:
            return await self._call(method, url, handler, params=params, json=json)
        except UpstreamError as exc:
            self.redactor.exception(exc)
            raise

    async def _call(
        self, method: str, url: str, handler: Handler[T], *, params: Mapping[str, Any] | None, json: Any
    ) -> T:
        async with self._lock:  # one request at a time per source: politeness and pacing hold
            attempt = 0
            while True:
                await self._pace()
                self.stats.requests += 1
                delay: float | None = None
                failure: UpstreamError
                try:
                    resp = await self._send(method, url, params=params, json=json)
                    try:
                        if resp.is_success:
                            try:
                                return await handler(resp)
                            except MalformedResponse as exc:
                                failure = exc
                        else:
                            await resp.aread()
                            failure = self._status_failure(resp, str(resp.url))
                            retryable = resp.status_code in self.policy.retry_statuses
                            if isinstance(failure, BudgetExhausted) or not retryable:
                                raise failure
                            delay = retry_after_seconds(resp.headers.get("retry-after"))
                            if delay is not None and delay > self.policy.max_retry_after_s:
                                raise BudgetExhausted(
                                    self.source, f"asked to wait {delay:.0f}s; stopping", retry_after_s=delay
                                )
                    finally:
                        await resp.aclose()
                except httpx.TransportError as exc:
                    failure = TransportFailure(self.source, f"{type(exc).__name__}: {exc}", url=url)
                attempt += 1
                if attempt >= self.policy.max_attempts:
                    raise failure
                wait = delay if delay is not None else self._backoff(attempt - 1)
                self.stats.retries += 1
                self.redactor.exception(failure)
                log.warning("%s; retry %d/%d in %.1fs", failure, attempt, self.policy.max_attempts - 1, wait)
                await self.clock.sleep(wait)
                # The pause itself satisfies the pacing interval.
                self._last_start = self.clock.monotonic() - self.min_interval_s

    async def _send(self, method: str, url: str, *, params: Mapping[str, Any] | None, json: Any) -> httpx.Response:
        """Send, following up to `max_redirects` redirects; the response is streamed (the caller closes it).

        httpx would forward headers such as `x-api-key` to whatever host a redirect names (it strips only
        `Authorization`): a redirect that leaves the request's origin drops every credential first.
        """
        request = self.http.build_request(method, url, params=params, json=json)
        origin = request.url
        for _ in range(self.max_redirects + 1):
            resp = await self.http.send(request, stream=True)
            nxt = resp.next_request
            if nxt is None:
                return resp
            await resp.aclose()
            if not same_origin(nxt.url, origin):
                if self.redactor:
                    log.warning(
                        "%s: redirected to another origin (%s://%s); its credentials are not sent there",
                        self.source,
                        nxt.url.scheme,
                        nxt.url.netloc.decode(),
                    )
                strip_credentials(nxt)
                origin = nxt.url  # stripped for good: a redirect back does not bring them back
            request = nxt
        # A redirect loop does not end by retrying.
        raise HTTPStatusFailure(self.source, resp.status_code, f"more than {self.max_redirects} redirects", url=url)

    def _status_failure(self, resp: httpx.Response, url: str) -> UpstreamError:
        if self.budget_check is not None and (msg := self.budget_check(resp)):
            return BudgetExhausted(self.source, msg, retry_after_s=retry_after_seconds(resp.headers.get("retry-after")))
        return HTTPStatusFailure(self.source, resp.status_code, _snippet(resp), url=url)


async def read_json(resp: httpx.Response) -> Any:
    """The body as JSON; an HTML error page or broken JSON is a MalformedResponse."""
    body = await resp.aread()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        what = "an HTML page" if body.lstrip()[:1] == b"<" else "invalid JSON"
        raise MalformedResponse("http", f"{what} instead of JSON ({exc})", url=str(resp.url)) from None
