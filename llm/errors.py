"""Errors of the language-model client.

The hierarchy::

    * ModelError
      x ModelNotConfigured        - no endpoint or no model named (WOVEPAPER_LLM_API_URL, WOVEPAPER_LLM_MODEL)
      x ModelRequestFailed        - the endpoint failed for good, after the retries its failure allows
        - ModelTimeout            - no answer (or a silence inside a streamed one) for longer than the timeout
        - ModelRateLimited        - still 429 when the retries ran out, or asked to wait longer than allowed
        - MalformedModelResponse  - not the chat-completions wire format: bad JSON, an HTML page, no choices
        - AnswerBrokeOff          - a streamed answer stopped before its end (connection dropped, error chunk)

Messages say what happened upstream in one line; they never carry the API key (it is masked wherever an
upstream echoes it back).
"""

from __future__ import annotations


class ModelError(Exception):
    """Base of every language-model error."""


class ModelNotConfigured(ModelError):
    pass


class ModelRequestFailed(ModelError):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ModelTimeout(ModelRequestFailed):
    pass


class ModelRateLimited(ModelRequestFailed):
    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, status=429)


class MalformedModelResponse(ModelRequestFailed):
    pass


class AnswerBrokeOff(ModelRequestFailed):
    pass
