"""Errors raised by the ingest.

The hierarchy::

    * IngestError
      x UpstreamError              - one upstream request failed for good (after its retries)
        - TransportFailure         - connection refused, reset or timed out
        - HTTPStatusFailure        - a status that retrying cannot fix (400, 401, 404, ...) or retries used up
        - MalformedResponse        - truncated XML, bad JSON, an HTML page where JSON was due
        - OAIError                 - an OAI-PMH <error code="..."> (sent with HTTP 200)
          - BadResumptionToken     - the token expired or is unknown: restart from the saved date
          - NoRecordsMatch         - nothing matches the request: for an incremental harvest, nothing new
        - BudgetExhausted          - the source's daily budget is spent: stop cleanly, keep committed work
      x CheckpointError            - a stored checkpoint that cannot be read

Callers catch `UpstreamError` per request or batch: committed work is never lost by one of them.
"""

from __future__ import annotations


class IngestError(Exception):
    """Base of every ingest error."""


class UpstreamError(IngestError):
    def __init__(self, source: str, message: str, *, url: str | None = None) -> None:
        self.source = source
        self.url = url
        super().__init__(f"{source}: {message}" + (f" ({url})" if url else ""))


class TransportFailure(UpstreamError):
    pass


class HTTPStatusFailure(UpstreamError):
    def __init__(self, source: str, status: int, message: str, *, url: str | None = None) -> None:
        self.status = status
        super().__init__(source, f"HTTP {status}: {message}", url=url)


class MalformedResponse(UpstreamError):
    pass


class OAIError(UpstreamError):
    def __init__(self, code: str, message: str, *, url: str | None = None) -> None:
        self.code = code
        super().__init__("arxiv", f"OAI-PMH error {code}: {message}", url=url)


class BadResumptionToken(OAIError):
    pass


class NoRecordsMatch(OAIError):
    pass


class BudgetExhausted(UpstreamError):
    def __init__(self, source: str, message: str, *, retry_after_s: float | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(source, message)


class CheckpointError(IngestError):
    pass


def oai_error(code: str, message: str, *, url: str | None = None) -> OAIError:
    """The OAIError subclass for an OAI-PMH error code."""
    cls = {"badResumptionToken": BadResumptionToken, "noRecordsMatch": NoRecordsMatch}.get(code, OAIError)
    return cls(code, message, url=url)
