"""The CDN purge hook against a fake adapter: every chunk of tags is sent, a passing failure is retried, the
adapter can tell the API from strangers."""

from __future__ import annotations

import httpx
import orjson

from cdn.purge import PURGE_RETRY, TAGS_PER_REQUEST, HttpPurge
from tests.ingest.conftest import FakeClock

URL = "https://purge.example/hook"
TOKEN = "purge-token-4f1e9a"


def adapter(*statuses: int, retry_after: str | None = None) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    """A client whose purge adapter answers `statuses` in turn, then 204s; the requests it saw."""
    seen: list[httpx.Request] = []
    answers = list(statuses)

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status = answers.pop(0) if answers else 204
        if status == 0:
            raise httpx.ConnectError("refused", request=request)
        headers = {"retry-after": retry_after} if retry_after and status in (429, 503) else {}
        return httpx.Response(status, headers=headers)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer)), seen


def tags_of(request: httpx.Request) -> list[str]:
    tags: list[str] = orjson.loads(request.content)["tags"]
    return tags


async def test_a_passing_failure_is_retried_and_the_token_sent() -> None:
    client, seen = adapter(503, 0, retry_after="2")
    clock = FakeClock()
    purge = HttpPurge(URL, token=TOKEN, client=client, clock=clock)
    await purge(["paper:3", "lists"])
    await purge.aclose()
    assert [tags_of(r) for r in seen] == [["paper:3", "lists"]] * 3
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in seen)
    assert clock.sleeps[0] == 2.0 and len(clock.sleeps) == 2  # Retry-After as asked, then the backoff


async def test_a_chunk_that_fails_does_not_keep_the_others_from_their_purge() -> None:
    tags = [f"paper:{n}" for n in range(TAGS_PER_REQUEST + 5)]
    client, seen = adapter(400, *([503] * PURGE_RETRY.max_attempts))
    purge = HttpPurge(URL, client=client, clock=FakeClock())
    await purge(tags + tags)  # three chunks: refused, failing every attempt, delivered
    await purge.aclose()
    sent = [tags_of(r) for r in seen]
    assert len(sent) == 1 + PURGE_RETRY.max_attempts + 1
    assert sent[-1] == (tags + tags)[2 * TAGS_PER_REQUEST :]
    assert "authorization" not in seen[0].headers


async def test_an_api_purge_waits_until_the_replicas_have_the_write() -> None:
    """A correction's purge from an API process goes once the read replicas have replayed the write: the CDN's
    refetch is not answered from a replica without it."""
    import asyncio

    from cdn.purge import BackgroundPurge

    client, seen = adapter()
    caught_up = asyncio.Event()
    asked: list[int | None] = []

    async def replayed(position: int | None) -> None:
        asked.append(position)
        await caught_up.wait()

    purge = BackgroundPurge(HttpPurge(URL, client=client), replayed=replayed)
    await purge(["researcher:7"], 4242)
    await asyncio.sleep(0.05)
    assert asked == [4242] and seen == []
    caught_up.set()
    await purge.aclose()
    assert [tags_of(r) for r in seen] == [["researcher:7"]]
