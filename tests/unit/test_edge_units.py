"""The edge's pure parts: request parsing, id spellings, the rate rule, the byte-bounded document cache."""

from __future__ import annotations

import math

import pytest

from bounded import BoundedCache
from edge.cache_tags import CDN_TAG_BYTES, CdnPolicy
from edge.conditional import not_modified
from edge.entity_keys import entity_key, paper_key
from edge.errors import EdgeError
from edge.gcra import PERIOD_S, LocalLimiter, decide
from edge.request import parse_get, parse_post


def test_paper_spellings_name_one_arxiv_id() -> None:
    for spelling in (
        "2401.01234",
        "2401.01234v3",
        "arXiv:2401.01234",
        "https://arxiv.org/abs/2401.01234v2",
        "10.48550/arXiv.2401.01234",
        "2401.01234-any-title-words",
        " 2401.01234 ",
    ):
        assert paper_key(spelling) == "2401.01234", spelling
    assert paper_key("astro-ph-9901001-cosmic-rays") == "astro-ph/9901001"
    assert paper_key("not an id") is None


def test_entity_spellings() -> None:
    assert entity_key("researcher", "42") == entity_key("researcher", "42-ada-lovelace") == "researcher:42"
    assert entity_key("researcher", "S2:123") == "researcher:s2:123"
    assert entity_key("researcher", "https://orcid.org/0000-0002-1825-0097") == "researcher:orcid:0000-0002-1825-0097"
    assert entity_key("researcher", "nobody!") is None
    assert entity_key("institution", "Université  de Montréal") == entity_key("institution", "université de montréal")


def test_requests_parse_or_say_why() -> None:
    request = parse_post(b"application/json; charset=utf-8", b'{"query": "{ a }", "variables": {"x": 1}}')
    assert (request.query, request.variables, request.method) == ("{ a }", {"x": 1}, "POST")
    got = parse_get(b"documentId=sha256%3Aab&variables=%7B%22id%22%3A%221%22%7D")
    assert (got.document_id, got.variables, got.query) == ("sha256:ab", {"id": "1"}, None)
    for content_type, body, status in (
        (b"text/plain", b'{"query": "{ a }"}', 415),
        (b"application/json", b"[]", 400),
        (b"application/json", b'{"query": "{ a }", "operationName": 3}', 400),
        (b"application/json", b'{"query": "{ a }", "extensions": []}', 400),
        (b"application/json", b'{"query": "{ a }", "variables": {"a": ' + b'{"b": ' * 40 + b"1" + b"}" * 41, 400),
    ):
        with pytest.raises(EdgeError) as caught:
            parse_post(content_type, body)
        assert caught.value.status == status


def test_points_refill_continuously() -> None:
    now = [0.0]
    limiter = LocalLimiter(clock=lambda: now[0])
    assert limiter.charge("ip:a", 600, 1000).remaining == 400
    refused = limiter.charge("ip:a", 500, 1000)
    assert not refused.allowed and refused.remaining == 400
    assert refused.retry_after == 360  # 100 points refill in 360 s at 1000 points/hour
    now[0] += 360
    assert limiter.charge("ip:a", 500, 1000).allowed
    assert limiter.charge("ip:b", 1, 1000).remaining == 999  # every client its own budget
    full = limiter.charge("ip:a", 0, 1000)
    assert full.reset_at == 3960  # 1,100 points spent: 600 at 0 s and 500 at 360 s, 3.6 s each


def test_a_bounded_cache_holds_at_most_its_bytes_least_recently_used_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_bytes=8000)
    cache.put("large", 1, 1000)  # over an eighth of the bound with its overhead: never kept
    assert len(cache) == 0
    for i in range(30):
        cache.put(f"{i:03d}", i, 600)  # 800 bytes each with the overhead
    assert cache.bytes <= 8000 and len(cache) == 10
    assert cache.get("020") == 20  # used: the next one in pushes out 021 instead
    cache.put("new", 30, 600)
    assert cache.get("021") is None and cache.get("020") == 20 and cache.get("029") == 29


@pytest.mark.parametrize("limit", [3, 7, 700, 1000, 5000, 7000, 123_457])
def test_figures_count_the_points_spent_whatever_the_budget(limit: int) -> None:
    # Redis keeps the state in whole milliseconds, rounded up: 3,600,000 / limit is seldom whole.
    now = 1_764_547_200_000
    interval = PERIOD_S * 1000 / limit
    for spent in range(1, min(limit, 40) + 1):
        d = decide(allowed=True, points=1, limit=limit, now_ms=now, tat_ms=math.ceil(now + spent * interval))
        assert (d.used, d.remaining) == (spent, limit - spent)


def test_an_answer_with_more_tags_than_a_cdn_reads_is_kept_from_cdns() -> None:
    """A CDN ignores tags past its limit: such an answer, stored, could not be purged of a change to them."""
    policy = CdnPolicy(max_age_s=60, stale_while_revalidate_s=600)
    few = [f"paper:2611.{n:05d}" for n in range(100)]
    headers = dict(policy.headers(few, b'"e"'))
    assert headers[b"cache-control"] == b"public, max-age=60, stale-while-revalidate=600"
    assert headers[b"surrogate-key"].split() == [t.encode() for t in few]
    assert headers[b"cache-tag"].split(b",") == [t.encode() for t in few]
    many = [f"researcher:{n}" for n in range(CDN_TAG_BYTES // 12)]  # 14-17 bytes each with the space
    assert len(" ".join(many)) > CDN_TAG_BYTES
    assert dict(policy.headers(many, b'"e"')) == {
        b"cache-control": b"private, max-age=60, stale-while-revalidate=600",
        b"etag": b'"e"',
        b"vary": b"Accept",  # a browser keeps it: one representation per media type
    }
    assert headers[b"vary"] == b"Accept"


@pytest.mark.parametrize(
    ("if_none_match", "expected"),
    [
        (b'"abc"', True),
        (b'W/"abc"', True),  # weakened by a compressing proxy
        (b' "x" ,W/"abc" ', True),
        (b"*", True),
        (b'"abcd"', False),
        (b'W/"x", "y"', False),
        (b"", False),
    ],
)
def test_if_none_match_compares_weakly(if_none_match: bytes, expected: bool) -> None:
    assert not_modified(if_none_match, b'"abc"') is expected
    assert not_modified(if_none_match, b'W/"abc"') is expected
