"""One shared HTTP client for an OpenAI-compatible chat-completions endpoint.

Any server that speaks `POST {base}/chat/completions` works: a hosted provider, vLLM, llama.cpp's server,
Ollama. Requests start at most `rps` per second but may run side by side; 429, 5xx, timeouts, dropped
connections and malformed answers are retried by the rules the ingest follows (retry_rules/:
Retry-After when sent, else exponential backoff with jitter; a requested wait longer than the policy allows
is a stop). A streamed answer is retried only until its first text has been handed on. Every request's
token usage is added to `usage` (the server's count, or an estimate when it sends none).

Optional parts of the request an endpoint refuses with a 400 naming them (OpenAI's reasoning models: `max_tokens`,
`temperature`) are given up at once and the request sent again (`Dialect`), once each for the client's life.

The API key is sent as `Authorization: Bearer`; it is masked in every message this client raises or logs,
also where an upstream echoes it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
import orjson

from llm.errors import (
    AnswerBrokeOff,
    MalformedModelResponse,
    ModelRateLimited,
    ModelRequestFailed,
    ModelTimeout,
)
from llm.thinking import LeadingThought, without_leading_thought
from llm.tokens import estimate_prompt_tokens, estimate_tokens
from llm.wire import (
    DONE,
    ChatMessage,
    Completion,
    Dialect,
    EventDecoder,
    Usage,
    describe_error_body,
    parse_chunk,
    parse_completion,
    refused_parameter,
    request_body,
)
from retry_rules import Clock, RetryPolicy, retry_after_seconds
from settings.language_model import REASONING_TOKENS, ModelConfig

log = logging.getLogger("llm")

COMPLETIONS_PATH = "chat/completions"
CONNECT_TIMEOUT_S = 10.0
MASK = "[redacted]"


@dataclass(frozen=True, slots=True)
class TextPart:
    """Text of a streamed answer, as it arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The last event of a streamed answer."""

    finish_reason: str | None
    usage: Usage


StreamEvent = TextPart | StreamEnd


@dataclass(slots=True)
class RequestStats:
    requests: int = 0
    retries: int = 0


class _Retry(Exception):
    """A failed attempt that the policy may retry, after `delay_s` when the upstream named one."""

    def __init__(self, failure: ModelRequestFailed, delay_s: float | None = None) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.delay_s = delay_s


class _Adapted(Exception):
    """The endpoint refused an optional part of the request, now given up: send it again at once."""


class ModelClient:
    """Chat completions, plain (`complete`) or streamed (`stream`), against one endpoint and model."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        rps: float = 2.0,
        timeout_s: float = 60.0,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 8,
        rng: Callable[[], float] = random.random,
        reasoning_effort: str | None = None,
        reasoning_tokens: int = REASONING_TOKENS,
    ) -> None:
        self.model = model
        self.dialect = Dialect()
        self.reasoning_effort = reasoning_effort
        self.reasoning_tokens = reasoning_tokens
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()
        self.clock = clock or Clock()
        self.rng = rng
        self.usage = Usage()
        self.stats = RequestStats()
        self._secret = api_key or None
        self._interval_s = 1.0 / rps
        self._next_start: float | None = None
        self._pace_lock = asyncio.Lock()
        headers = {"User-Agent": "wovepaper/0.1", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport,
            # A redirected POST is a misconfigured base URL, not something to follow with the key attached.
            follow_redirects=False,
        )

    @classmethod
    def from_config(cls, config: ModelConfig, **options: Any) -> ModelClient:
        """The client of a configured endpoint; `options` as for the constructor (policy, clock, transport)."""
        return cls(
            config.api_url,
            model=config.model,
            api_key=config.api_key,
            rps=config.rps,
            timeout_s=config.timeout_s,
            reasoning_effort=config.reasoning_effort,
            reasoning_tokens=config.reasoning_tokens,
            **options,
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> ModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- plain ------------------------------------------------------------------------------------------------

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One answer, whole. Raises ModelRequestFailed (and its kinds) once the retries are used up."""
        attempt = 0
        while True:
            body = self._body(messages, max_tokens, temperature, stream=False, response_format=response_format)
            await self._pace()
            self.stats.requests += 1
            try:
                completion = await self._complete_once(body)
            except _Adapted:
                continue
            except _Retry as retry:
                attempt = await self._after_failure(retry, attempt)
                continue
            usage = completion.usage
            if usage.estimated:  # the thought was generated too
                usage = Usage(
                    estimate_prompt_tokens(m.content for m in messages),
                    estimate_tokens(completion.text),
                    estimated=True,
                )
            completion = dataclasses.replace(completion, text=without_leading_thought(completion.text), usage=usage)
            self.usage += completion.usage
            return completion

    async def _complete_once(self, body: dict[str, Any]) -> Completion:
        try:
            # The read timeout bounds each silence; this bounds the whole answer.
            async with asyncio.timeout(self.timeout_s):
                resp = await self.http.post(COMPLETIONS_PATH, json=body)
        except (TimeoutError, httpx.TimeoutException):
            raise _Retry(ModelTimeout(f"no answer from the model within {self.timeout_s:g}s")) from None
        except httpx.TransportError as exc:
            raise _Retry(self._transport_failure(exc)) from None
        if not resp.is_success:
            self._status_failure(resp.status_code, resp.headers, resp.content, body)
        try:
            return parse_completion(orjson.loads(resp.content))
        except orjson.JSONDecodeError:
            what = describe_error_body(resp.content, resp.headers.get("content-type", ""))
            raise _Retry(MalformedModelResponse(self._mask(f"the completion is not JSON: {what}"))) from None
        except MalformedModelResponse as exc:
            raise _Retry(exc) from None

    # -- streamed ---------------------------------------------------------------------------------------------

    async def stream(
        self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float = 0.2
    ) -> AsyncGenerator[StreamEvent, None]:
        """The answer as it is generated: TextParts, then one StreamEnd.

        Closing the iterator (or cancelling its consumer) closes the upstream connection, which stops the
        generation. Retried only before any text was handed on; after that a failure is AnswerBrokeOff.
        """
        attempt = 0
        while True:
            body = self._body(messages, max_tokens, temperature, stream=True)
            await self._pace()
            self.stats.requests += 1
            emitted: list[str] = []
            try:
                async with contextlib.aclosing(self._stream_once(body, emitted)) as events:
                    async for event in events:
                        yield event
                        if isinstance(event, StreamEnd):
                            return
            except _Adapted:
                continue
            except _Retry as retry:
                if emitted:
                    raise AnswerBrokeOff(str(retry.failure), status=retry.failure.status) from None
                attempt = await self._after_failure(retry, attempt)
                continue
            return

    async def _stream_once(self, body: dict[str, Any], emitted: list[str]) -> AsyncGenerator[StreamEvent, None]:
        usage: Usage | None = None
        finish: str | None = None
        decoder = EventDecoder()
        thought = LeadingThought()
        generated: list[str] = []  # the thought too, for an estimate of the tokens
        try:
            async with self.http.stream("POST", COMPLETIONS_PATH, json=body) as resp:
                if not resp.is_success:
                    self._status_failure(resp.status_code, resp.headers, await resp.aread(), body)
                ended = False
                async for line in resp.aiter_lines():
                    data = decoder.feed(line)
                    if data is None:
                        continue
                    if data.strip() == DONE:
                        ended = True
                        break
                    try:
                        chunk = parse_chunk(data)
                    except AnswerBrokeOff as exc:
                        raise _Retry(AnswerBrokeOff(self._mask(str(exc)))) from None
                    except MalformedModelResponse as exc:
                        raise _Retry(exc) from None
                    if chunk.usage is not None:
                        usage = chunk.usage
                    finish = chunk.finish_reason or finish
                    generated.append(chunk.text)
                    if text := thought.feed(chunk.text):
                        emitted.append(text)
                        yield TextPart(text)
                if not ended and (decoder.flush() or "").strip() != DONE and finish is None:
                    raise _Retry(AnswerBrokeOff("the model's answer stopped before its end"))
                if text := thought.flush():
                    emitted.append(text)
                    yield TextPart(text)
        except (TimeoutError, httpx.TimeoutException):
            raise _Retry(ModelTimeout(f"the model was silent for more than {self.timeout_s:g}s")) from None
        except httpx.TransportError as exc:
            raise _Retry(self._transport_failure(exc)) from None
        if usage is None:
            usage = Usage(
                estimate_prompt_tokens(m["content"] for m in body["messages"]),
                estimate_tokens("".join(generated)),
                estimated=True,
            )
        self.usage += usage
        yield StreamEnd(finish, usage)

    # -- shared -----------------------------------------------------------------------------------------------

    def _body(
        self,
        messages: Sequence[ChatMessage],
        max_tokens: int,
        temperature: float,
        *,
        stream: bool,
        response_format: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        # A reasoning model counts its reasoning in the cap (OpenAI's `max_completion_tokens`): room for it, or
        # the reasoning would use up an answer's tokens and leave its text empty.
        reasons = self.reasoning_effort is not None or self.dialect.limit_field == "max_completion_tokens"
        return request_body(
            self.model,
            messages,
            max_tokens=max_tokens + (self.reasoning_tokens if reasons else 0),
            temperature=temperature,
            stream=stream,
            response_format=response_format,
            dialect=self.dialect,
            reasoning_effort=self.reasoning_effort,
        )

    async def _pace(self) -> None:
        """Start requests at most `rps` per second; they may overlap (a model answer takes seconds)."""
        async with self._pace_lock:
            now = self.clock.monotonic()
            start = now if self._next_start is None else max(now, self._next_start)
            self._next_start = start + self._interval_s
        if start > now:
            await self.clock.sleep(start - now)

    async def _after_failure(self, retry: _Retry, attempt: int) -> int:
        attempt += 1
        if attempt >= self.policy.max_attempts:
            raise retry.failure
        wait = retry.delay_s if retry.delay_s is not None else self.policy.backoff_s(attempt - 1, self.rng)
        self.stats.retries += 1
        log.warning("%s; retry %d/%d in %.1fs", retry.failure, attempt, self.policy.max_attempts - 1, wait)
        await self.clock.sleep(wait)
        return attempt

    def _status_failure(self, status: int, headers: httpx.Headers, body: bytes, sent: dict[str, Any]) -> NoReturn:
        what = self._mask(describe_error_body(body, headers.get("content-type", "")))
        # Given up only when the request carried it: a refusal naming what was not sent is the request's failure.
        param = refused_parameter(status, body)
        if param is not None and param in sent and self.dialect.give_up(param):
            log.warning("the model endpoint refuses `%s` (%s); sending the request without it from now on", param, what)
            raise _Adapted()
        delay = _retry_after(headers)
        if status == 429:
            failure: ModelRequestFailed = ModelRateLimited(
                f"rate limited by the model endpoint: {what}", retry_after_s=delay
            )
        else:
            failure = ModelRequestFailed(f"the model endpoint answered HTTP {status}: {what}", status=status)
        if status not in self.policy.retry_statuses:
            raise failure
        if delay is not None and delay > self.policy.max_retry_after_s:
            raise ModelRateLimited(
                f"the model endpoint asks to wait {delay:.0f}s (HTTP {status}); not waiting", retry_after_s=delay
            )
        raise _Retry(failure, delay)

    def _transport_failure(self, exc: httpx.TransportError) -> ModelRequestFailed:
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            return AnswerBrokeOff(self._mask(f"the connection to the model dropped: {type(exc).__name__}"))
        return ModelRequestFailed(self._mask(f"cannot reach the model endpoint: {type(exc).__name__}: {exc}"))

    def _mask(self, text: str) -> str:
        return text.replace(self._secret, MASK) if self._secret else text


def _retry_after(headers: httpx.Headers) -> float | None:
    """`retry-after-ms` (OpenAI's precise form) or `Retry-After`."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    return retry_after_seconds(headers.get("retry-after"))
