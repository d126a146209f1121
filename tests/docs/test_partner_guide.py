"""Every request the partner's guide shows is sent to the app serving the demo data, in the guide's order, and the
answer must be the one the guide shows (tests/docs/exchanges.py says how a documented answer is read)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.docs.exchanges import Exchange, Message, Values, exchanges

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "partners" / "guide.md"


async def send(client: httpx.AsyncClient, request: Message, values: Values) -> httpx.Response:
    method, target, _ = values.fill(request.start).split(" ", 2)
    headers = [(name, values.fill(value)) for name, value in request.headers]
    body = values.fill(request.body).encode() if request.body else None
    return await client.request(method, target, headers=headers, content=body)


async def run(client: httpx.AsyncClient, examples: list[Exchange], values: Values) -> list[str]:
    problems = []
    for number, example in enumerate(examples, start=1):
        response = await send(client, example.request, values)
        found = values.match_response(example.response, response.status_code, dict(response.headers), response.text)
        problems += [f"example {number} ({example.section}: {example.request.start}): {p}" for p in found]
    return problems


def test_the_guide_shows_each_topic_a_partner_needs() -> None:
    text = GUIDE.read_text()
    sections = {example.section for example in exchanges(text)}
    for topic in (
        "API keys",
        "Rate limits and query cost",
        "Persisted documents and GET",
        "Caching: ETag and If-None-Match",
        "Errors",
        "Paging",
        "The changes feed",
        "RSS and Atom feeds",
    ):
        assert any(section.startswith(topic) for section in sections), f"no example under a heading {topic!r}"


async def test_every_example_answers_as_documented(
    guide_client: httpx.AsyncClient, partner_key: str, one_point_key: str
) -> None:
    examples = exchanges(GUIDE.read_text())
    assert len(examples) >= 15
    problems = await run(guide_client, examples, Values({"api-key": partner_key, "one-point-key": one_point_key}))
    assert not problems, "the guide and the API disagree:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("documented", "answered"),
    [
        ('{"data": {"paper": {"title": "…"}}}', '{"data": {"paper": null}}'),
        ('{"data": {"totalCount": 3}}', '{"data": {"totalCount": 4}}'),
        ('{"data": {"a": 1}}', '{"data": {"a": 1, "b": 2}}'),
        ('{"data": {"a": 1, "…": "…"}}', '{"data": {"b": 2}}'),
        ('{"list": [1, "…"]}', '{"list": []}'),
        ('{"list": [1]}', '{"list": [1, 2]}'),
        ('{"code": "BAD_USER_INPUT"}', '{"code": "NOT_FOUND"}'),
    ],
)
def test_a_drifted_answer_is_caught(documented: str, answered: str) -> None:
    """What the guide's check would report if the API changed under the guide."""
    message = Message("HTTP/1.1 200 OK", [], documented)
    assert Values().match_response(message, 200, {}, answered)


def test_captured_values_must_repeat_and_headers_must_be_there() -> None:
    values = Values()
    etag = Message("HTTP/1.1 200 OK", [("ETag", "<etag-one>"), ("Cache-Control", "public, …")], "")
    assert values.match_response(etag, 200, {"etag": '"abc"', "cache-control": "public, max-age=60"}, "") == []
    assert values.known["etag-one"] == '"abc"'
    assert values.match_response(etag, 200, {"etag": '"xyz"', "cache-control": "public, max-age=60"}, "")
    assert values.match_response(etag, 200, {"etag": '"abc"'}, "")
    assert values.match_response(etag, 304, {"etag": '"abc"', "cache-control": "public"}, "")


def test_each_curl_command_is_one_of_the_tested_requests() -> None:
    """A curl line shown for trying the API sends what a tested exchange sends."""
    text = GUIDE.read_text()
    requests = [example.request for example in exchanges(text)]
    commands = re.findall(r"^```sh\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    curls = [c for c in commands if c.lstrip().startswith("curl ")]
    assert curls
    for command in curls:
        words = shlex.split(command.replace("\\\n", " "))
        headers = [tuple(part.strip() for part in words[i + 1].split(":", 1)) for i, w in enumerate(words) if w == "-H"]
        body = next(words[i + 1] for i, w in enumerate(words) if w == "-d")
        path = urlsplit(next(w for w in words if w.startswith("http"))).path
        assert any(
            request.start.startswith(f"POST {path} ")
            and set(headers) <= set(request.headers)
            and json.loads(request.body) == json.loads(body)
            for request in requests
        ), command
