"""The model client against the fake OpenAI-compatible server: wire format, retries, streaming, secrecy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from llm import (
    AnswerBrokeOff,
    ChatMessage,
    MalformedModelResponse,
    ModelClient,
    ModelRateLimited,
    ModelRequestFailed,
    ModelTimeout,
    StreamEnd,
    TextPart,
    json_schema_format,
)
from retry_rules import RetryPolicy
from tests.fake_model import (
    FakeModel,
    fake_model,
    hang,
    malformed_json,
    rate_limited,
    reasoning_model,
    refused,
    reply,
    status,
)
from tests.ingest.conftest import FakeClock

KEY = "sk-test-6f1c2d9e8b7a4c3d2e1f0a9b8c7d6e5f"
ASK = [ChatMessage("system", "Answer briefly."), ChatMessage("user", "What is a transformer?")]


@pytest.fixture
async def model() -> AsyncIterator[FakeModel]:
    async with fake_model() as server:
        yield server


def client(model: FakeModel, clock: FakeClock | None = None, **kw: object) -> ModelClient:
    options: dict[str, object] = {"model": "fake-1", "api_key": KEY, "rps": 1000.0, "timeout_s": 5.0}
    options.update(kw)
    return ModelClient(model.base_url, clock=clock or FakeClock(), **options)  # type: ignore[arg-type]


async def collect(c: ModelClient, **kw: int) -> tuple[str, StreamEnd]:
    text = ""
    end = None
    async for event in c.stream(ASK, max_tokens=kw.get("max_tokens", 100)):
        if isinstance(event, TextPart):
            text += event.text
        else:
            end = event
    assert end is not None
    return text, end


async def test_a_completion_in_the_openai_wire_format(model: FakeModel) -> None:
    model.then(reply("Attention, stacked.", usage=(42, 7)))
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    async with client(model) as c:
        answer = await c.complete(ASK, max_tokens=50, response_format=json_schema_format("thing", schema))
        assert answer.text == "Attention, stacked."
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.estimated) == (42, 7, False)
        assert c.usage.total_tokens == 49
    sent = model.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "fake-1"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is a transformer?"},
    ]
    assert sent.body["max_tokens"] == 50 and sent.body["stream"] is False
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "thing", "schema": schema, "strict": True},
    }


async def test_no_key_no_authorization_header(model: FakeModel) -> None:
    async with client(model, api_key=None) as c:
        await c.complete(ASK, max_tokens=10)
    assert "authorization" not in model.requests[0].headers


async def test_a_streamed_answer_arrives_in_pieces_with_its_usage(model: FakeModel) -> None:
    model.then(reply("Attention is all you need.", usage=(30, 9)))
    async with client(model) as c:
        parts = [e async for e in c.stream(ASK, max_tokens=100)]
        assert c.usage.total_tokens == 39
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    assert len(texts) > 1 and "".join(texts) == "Attention is all you need."
    assert parts[-1] == StreamEnd("stop", parts[-1].usage) and parts[-1].usage.total_tokens == 39
    assert model.requests[0].body["stream"] is True
    assert model.requests[0].body["stream_options"] == {"include_usage": True}


async def test_usage_is_estimated_when_the_server_sends_none(model: FakeModel) -> None:
    model.then(reply("x" * 40, usage=None), reply("y" * 80, usage=None))
    async with client(model) as c:
        answer = await c.complete(ASK, max_tokens=10)
        assert answer.usage.estimated and answer.usage.completion_tokens == 10 and answer.usage.prompt_tokens > 0
        _, end = await collect(c)
        assert end.usage.estimated and end.usage.completion_tokens == 20


async def test_a_reasoning_models_refusals_are_learnt_once_and_its_reasoning_given_room(model: FakeModel) -> None:
    model.responder = reasoning_model(lambda received: reply("Reasoned.", usage=(50, 900)))
    async with client(model, reasoning_tokens=1000) as c:
        answer = await c.complete(ASK, max_tokens=50)
        text, end = await collect(c)
        assert answer.text == text == "Reasoned." and end.usage.completion_tokens == 900
        assert c.stats.retries == 0 and c.usage.total_tokens == 1900
    refused_max, refused_temperature, completed, streamed = (r.body for r in model.requests)
    assert refused_max["max_tokens"] == 50 and refused_temperature["max_completion_tokens"] == 1050
    assert "max_tokens" not in completed and "temperature" not in completed
    assert completed["max_completion_tokens"] == 1050
    # Learnt for the client's life: the stream asks right the first time.
    assert streamed["stream"] and streamed["max_completion_tokens"] == 1100 and "temperature" not in streamed


async def test_an_effort_is_sent_as_set_and_gives_the_reasoning_room(model: FakeModel) -> None:
    async with client(model, reasoning_effort="low", reasoning_tokens=500) as c:
        await c.complete(ASK, max_tokens=50)
    assert model.requests[0].body["reasoning_effort"] == "low" and model.requests[0].body["max_tokens"] == 550


async def test_without_stream_options_the_usage_is_estimated(model: FakeModel) -> None:
    model.then(refused("stream_options"), reply("Streamed without usage.", usage=None))
    async with client(model) as c:
        text, end = await collect(c)
    assert text == "Streamed without usage." and end.usage.estimated and end.usage.completion_tokens > 0
    assert "stream_options" in model.requests[0].body and "stream_options" not in model.requests[1].body


async def test_without_structured_outputs_the_schema_goes_into_the_first_message(model: FakeModel) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    model.then(refused("response_format"), reply('{"a": "b"}'))
    async with client(model) as c:
        answer = await c.complete(ASK, max_tokens=50, response_format=json_schema_format("thing", schema))
    assert answer.text == '{"a": "b"}'
    first, second = (r.body for r in model.requests)
    assert first["response_format"]["type"] == "json_schema" and "response_format" not in second
    system, user = second["messages"]
    assert system["role"] == "system" and system["content"].startswith("Answer briefly.\n\n")
    assert system["content"].endswith(
        'follows this JSON Schema:\n{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}'
    )
    assert user == first["messages"][1]


async def test_other_refusals_and_a_refusal_repeated_are_not_sent_again(model: FakeModel) -> None:
    messages = {"message": "Invalid 'messages[1].role': 'robot'.", "type": "invalid_request_error", "param": "messages"}
    model.then(status(400, {"error": messages}))
    async with client(model) as c:
        with pytest.raises(ModelRequestFailed, match="HTTP 400"):
            await c.complete(ASK, max_tokens=10)
        assert len(model.requests) == 1
        # An endpoint that refuses the cap under both names: given up once, then the refusal stands.
        model.then(refused("max_tokens"), refused("max_tokens"))
        with pytest.raises(ModelRequestFailed, match="max_tokens"):
            await c.complete(ASK, max_tokens=10)
    assert len(model.requests) == 3


async def test_a_thought_sent_in_the_text_is_not_passed_on(model: FakeModel) -> None:
    thought = "<think>\nThey ask about attention. Cite nothing yet.\n</think>\n\n"
    model.then(reply(thought + "Attention, stacked.", usage=None), reply(thought + "Attention, streamed.", usage=None))
    async with client(model) as c:
        answer = await c.complete(ASK, max_tokens=100)
        text, end = await collect(c)
    assert answer.text == "Attention, stacked." and text == "Attention, streamed."
    # The thought was generated, and is counted in the estimate.
    assert answer.usage.completion_tokens == end.usage.completion_tokens > len("Attention, streamed.") // 4 + 5


async def test_429_with_retry_after_waits_as_told(model: FakeModel) -> None:
    clock = FakeClock()
    model.then(rate_limited("7"), reply("ok"))
    async with client(model, clock) as c:
        assert (await c.complete(ASK, max_tokens=10)).text == "ok"
        assert c.stats.retries == 1
    assert clock.sleeps == [7.0]


async def test_429_without_retry_after_backs_off_exponentially(model: FakeModel) -> None:
    clock = FakeClock()
    model.then(rate_limited(), rate_limited(), rate_limited(), reply("ok"))
    policy = RetryPolicy(base_delay_s=1.0, max_attempts=5)
    async with client(model, clock, policy=policy, rng=lambda: 1.0) as c:
        assert (await c.complete(ASK, max_tokens=10)).text == "ok"
    assert clock.sleeps == [1.0, 2.0, 4.0]


async def test_a_wait_longer_than_the_policy_allows_is_a_stop(model: FakeModel) -> None:
    model.then(rate_limited("86400"))
    async with client(model) as c:
        with pytest.raises(ModelRateLimited) as info:
            await c.complete(ASK, max_tokens=10)
    assert info.value.retry_after_s == 86400 and len(model.requests) == 1


async def test_rate_limited_until_the_attempts_run_out(model: FakeModel) -> None:
    model.then(rate_limited("1"), rate_limited("1"))
    async with client(model, policy=RetryPolicy(max_attempts=2)) as c:
        with pytest.raises(ModelRateLimited):
            await c.complete(ASK, max_tokens=10)


async def test_5xx_is_retried_and_4xx_is_not(model: FakeModel) -> None:
    model.then(status(503, {"error": {"message": "overloaded"}}), reply("ok"))
    async with client(model) as c:
        assert (await c.complete(ASK, max_tokens=10)).text == "ok"
    model.then(status(400, {"error": {"message": "response_format json_schema is not supported"}}))
    async with client(model) as c:
        with pytest.raises(ModelRequestFailed) as info:
            await c.complete(ASK, max_tokens=10)
    assert info.value.status == 400 and "json_schema is not supported" in str(info.value)
    assert len(model.requests) == 3


async def test_malformed_json_is_fetched_again_then_reported(model: FakeModel) -> None:
    model.then(malformed_json(), reply("ok"))
    async with client(model) as c:
        assert (await c.complete(ASK, max_tokens=10)).text == "ok"
    model.then(malformed_json(), malformed_json())
    async with client(model, policy=RetryPolicy(max_attempts=2)) as c:
        with pytest.raises(MalformedModelResponse):
            await c.complete(ASK, max_tokens=10)


async def test_an_html_page_is_named_as_such(model: FakeModel) -> None:
    model.then(status(502, b"<!DOCTYPE html><html><body>Bad gateway</body></html>"))
    async with client(model, policy=RetryPolicy(max_attempts=1)) as c:
        with pytest.raises(ModelRequestFailed, match="HTTP 502: an HTML page"):
            await c.complete(ASK, max_tokens=10)


async def test_a_stream_dropped_before_any_text_is_retried(model: FakeModel) -> None:
    model.then(reply("never seen", drop_after=0), reply("second try"))
    async with client(model) as c:
        text, _ = await collect(c)
    assert text == "second try" and len(model.requests) == 2


async def test_a_stream_dropped_mid_answer_is_an_answer_that_broke_off(model: FakeModel) -> None:
    model.then(reply("a long answer that stops", drop_after=2))
    seen: list[str] = []
    async with client(model) as c:
        with pytest.raises(AnswerBrokeOff):
            async for event in c.stream(ASK, max_tokens=100):
                if isinstance(event, TextPart):
                    seen.append(event.text)
    assert "".join(seen) == "a long answer that stops"[:14] and len(model.requests) == 1


async def test_a_stream_without_its_end_broke_off(model: FakeModel) -> None:
    model.then(reply("half an answer", finish=None, done=False))
    async with client(model) as c:
        with pytest.raises(AnswerBrokeOff):
            await collect(c)


async def test_a_slow_first_token_within_the_timeout_is_waited_for(model: FakeModel) -> None:
    model.then(reply("late but fine", first_delay_s=0.3))
    async with client(model, timeout_s=10.0) as c:
        text, _ = await collect(c)
    assert text == "late but fine"


async def test_silence_past_the_timeout_is_a_timeout(model: FakeModel) -> None:
    model.then(hang(), hang())
    async with client(model, timeout_s=0.3, policy=RetryPolicy(max_attempts=2)) as c:
        with pytest.raises(ModelTimeout):
            await c.complete(ASK, max_tokens=10)
    assert len(model.requests) == 2


async def test_closing_a_stream_hangs_up_on_the_model(model: FakeModel) -> None:
    model.then(reply("word " * 200, pieces=["word "] * 200, interval_s=0.05))
    async with client(model) as c:
        stream = c.stream(ASK, max_tokens=500)
        first = await anext(stream)
        assert isinstance(first, TextPart)
        await stream.aclose()
        await asyncio.wait_for(model.requests[0].hung_up.wait(), timeout=10)
    assert not model.requests[0].completed


async def test_requests_start_at_most_rps_per_second(model: FakeModel) -> None:
    clock = FakeClock()
    async with client(model, clock, rps=2.0) as c:
        await asyncio.gather(*(c.complete(ASK, max_tokens=5) for _ in range(3)))
    # Three starts half a second apart: the last one a second after the first (the fake clock adds up sleeps).
    assert len(clock.sleeps) == 2 and clock.now == 1001.0


@pytest.mark.parametrize(
    "behaviour",
    [
        status(500, {"error": {"message": f"internal error while using key {KEY}"}}),
        status(500, f"<html><body>Invalid key {KEY}</body></html>".encode()),
        status(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}),
        hang(),
    ],
    ids=["500-echoing-the-key", "html-with-the-key", "401-echoing-the-key", "timeout"],
)
async def test_the_key_never_appears_in_an_error_or_a_log(
    model: FakeModel, behaviour: object, caplog: pytest.LogCaptureFixture
) -> None:
    model.then(behaviour, behaviour)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG)
    async with client(model, timeout_s=0.3, policy=RetryPolicy(max_attempts=2)) as c:
        with pytest.raises(ModelRequestFailed) as info:
            await c.complete(ASK, max_tokens=10)
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    assert KEY not in caplog.text
    assert model.requests[0].headers["authorization"] == f"Bearer {KEY}"
