"""API keys kept out of everything a request can leave behind: errors, log lines, the run's summary.

OpenAlex takes its key in the query string (`api_key=`), Semantic Scholar in a header (`x-api-key`). A URL in an
error message, an upstream body that echoes the request, or httpx's own request log would otherwise carry them.
Secrets are removed twice: by parameter name (whatever the value) and by value (wherever it appears).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

import httpx

MASK = "***"
# Query parameters and headers that carry credentials, by (lower-case) name.
SECRET_PARAMS = frozenset({"api_key", "apikey", "key", "token", "access_token", "password"})
SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})
_PARAM_RE = re.compile(r"(?i)\b(" + "|".join(sorted(SECRET_PARAMS)) + r")=[^&\s'\")>]*")
# A value this short could be a common word: replacing it everywhere would garble messages, and it is no secret.
_MIN_SECRET_LEN = 6


class Redactor:
    """Replaces known secret values (and secret parameters by name) with `***`."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        forms: set[str] = set()
        for s in secrets:
            if s and len(s) >= _MIN_SECRET_LEN:
                forms |= {s, quote(s, safe=""), quote_plus(s)}
        # Longest first, so a value never leaves the tail of a longer encoded form behind.
        self._forms = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def text(self, text: str) -> str:
        text = _PARAM_RE.sub(lambda m: f"{m.group(1)}={MASK}", text)
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def url(self, url: httpx.URL | str) -> str:
        return self.text(str(url))

    def exception(self, exc: BaseException) -> BaseException:
        """The same exception with its message (and `url`, where it has one) redacted, in place."""
        message = str(exc)
        cleaned = self.text(message)
        if cleaned != message:
            exc.args = (cleaned,)
        url = getattr(exc, "url", None)
        if isinstance(url, str):
            exc.url = self.text(url)  # type: ignore[attr-defined]
        return exc


def secrets_of(headers: dict[str, str], params: dict[str, str]) -> list[str]:
    """The credential values among a client's default headers and query parameters."""
    return [v for k, v in headers.items() if k.lower() in SECRET_HEADERS] + [
        v for k, v in params.items() if k.lower() in SECRET_PARAMS
    ]


def strip_credentials(request: httpx.Request) -> httpx.Request:
    """Remove credential headers and query parameters from a request (in place), e.g. before another host sees it."""
    for name in SECRET_HEADERS:
        request.headers.pop(name, None)
    for name, _ in list(request.url.params.multi_items()):
        if name.lower() in SECRET_PARAMS:
            request.url = request.url.copy_remove_param(name)
    return request


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    """Scheme, host and port all equal (RFC 6454): credentials may follow a redirect only within one origin."""
    return (a.scheme, a.host, a.port or _default_port(a.scheme)) == (
        b.scheme,
        b.host,
        b.port or _default_port(b.scheme),
    )


def _default_port(scheme: str) -> int | None:
    return {"http": 80, "https": 443}.get(scheme)


class RedactingFilter(logging.Filter):
    """A handler filter that redacts every record it passes: the message, its arguments and a formatted traceback."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redactor.text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            self.redactor.exception(record.exc_info[1])
            record.exc_text = None
        return True
