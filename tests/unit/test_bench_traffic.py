"""The traffic benchmark's own parts: the open-loop schedule, the Zipf draws, the shares, the fake upstreams' formats.

A benchmark that measured latency from when a request actually left (as closed-loop tools do) would hide exactly the
queueing it is there to show; one whose fake upstreams drifted from the real formats would measure an ingest that
never runs in production. These tests hold both to what the benchmark claims.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import random
from collections import Counter

import pytest

from bench.loadgen import Client, Record, TransportError, arrival_times, encode_request, open_loop, zipf_rank
from bench.site_mix import DEFAULT_SHARES, VIEWER_PREFIX, Site, parse_shares, search_terms
from bench.traffic import API_APP, INGEST_APP, Backends, lag_quantile
from bench.traffic_ingest import World
from ingest.locks import run_name
from ingest.parsers.oai import parse_page
from ingest.parsers.openalex import parse_results, parse_work
from ingest.parsers.s2 import parse_paper_batch, researcher_from_author


async def _stalling_server(stall_s: float) -> tuple[asyncio.Server, int]:
    """An HTTP/1.1 server answering one request at a time; the first answer takes `stall_s`."""
    first = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                if not first.is_set():
                    first.set()
                    await asyncio.sleep(stall_s)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_latency_counts_from_the_intended_send_time_so_queueing_behind_a_stall_shows() -> None:
    stall = 0.6
    server, port = await _stalling_server(stall)
    client = Client("127.0.0.1", port, max_connections=1)
    raw = encode_request("GET", "/", client.authority)

    async def job() -> str:
        response = await client.request(raw)
        return "ok" if response.status == 200 else f"HTTP_{response.status}"

    # Ten requests every 50 ms; the first holds the only connection for 0.6 s, so the others wait behind it. Their
    # latency from when they were due must include that wait: at least what was left of the stall at their time.
    due = [i * 0.05 for i in range(10)]
    records: dict[str, Record] = {}
    async with server:
        await open_loop(iter([(t, "c", job) for t in due]), records, grace_s=10)
        client.close()
        await asyncio.sleep(0.05)  # the server sees the connection close before it stops
    record = records["c"]
    assert record.outcomes == {"ok": 10}
    assert record.sent == 10
    # Completion order equals the schedule's (one connection); each waited at least until the stall ended.
    for at, latency_ms in zip(due, record.latencies_ms, strict=True):
        assert latency_ms >= (stall - at) * 1000 - 5, (at, latency_ms)
    summary = record.summary()
    assert summary["p99_ms"] >= (stall - 0.05) * 1000 - 5
    # Each is placed in the run by when it was due, not when it ended.
    assert record.due_s == pytest.approx(due, abs=0.001)


def test_the_timeline_places_each_request_by_when_it_was_due() -> None:
    record = Record()
    for due_s, latency_ms, outcome in [(0.5, 10.0, "hit"), (9.9, 30.0, "not_modified"), (10.0, 2000.0, "TIMEOUT"),
                                       (25.0, 5.0, "ok")]:  # fmt: skip
        record.add(latency_ms, outcome, 0.0, due_s=due_s)
    merged = Record()
    merged.merge(record)
    assert merged.timeline(10.0) == [
        {"from_s": 0.0, "sent": 2, "errors": 0, "hits": 1, "p50_ms": 20.0, "p99_ms": 29.8},
        {"from_s": 10.0, "sent": 1, "errors": 1, "hits": 0, "p50_ms": 2000.0, "p99_ms": 2000.0},
        {"from_s": 20.0, "sent": 1, "errors": 0, "hits": 0, "p50_ms": 5.0, "p99_ms": 5.0},
    ]
    assert merged.summary()["hits"] == 1 and merged.errors == 1
    assert Record().timeline(10.0) == []


async def _closing_server(answers_per_connection: int) -> tuple[asyncio.Server, int, list[int]]:
    """An HTTP/1.1 server that answers this many requests on a connection, then closes it as the next one arrives
    (an idle timeout firing as a request is on its way). Returns the server, its port, and the requests each
    connection answered."""
    answered: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered.append(0)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                if answered[-1] == answers_per_connection:
                    break
                answered[-1] += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], answered


async def test_a_reused_connection_closed_before_answering_is_retried_once_on_a_new_one() -> None:
    server, port, answered = await _closing_server(1)
    client = Client("127.0.0.1", port, max_connections=1)
    raw = encode_request("GET", "/", client.authority)
    async with server:
        statuses = [(await client.request(raw)).status for _ in range(3)]
        client.close()
    assert statuses == [200, 200, 200]
    assert answered == [1, 1, 1]  # each reused connection failed unanswered; its request went out again


async def test_a_new_connection_closed_before_answering_is_a_transport_error() -> None:
    server, port, _ = await _closing_server(0)
    client = Client("127.0.0.1", port, max_connections=1)
    async with server:
        with pytest.raises(TransportError):
            await client.request(encode_request("GET", "/", client.authority))
        client.close()


async def test_a_connection_idle_too_long_is_not_reused() -> None:
    server, port, answered = await _closing_server(10)
    client = Client("127.0.0.1", port, max_connections=1, idle_s=0.1)
    raw = encode_request("GET", "/", client.authority)
    async with server:
        await client.request(raw)
        await client.request(raw)  # at once: the same connection
        await asyncio.sleep(0.15)
        await client.request(raw)  # idle too long: a new one
        client.close()
        await asyncio.sleep(0.05)
    assert answered == [2, 1]


def test_arrival_times_keep_the_rate_and_stay_within_the_duration() -> None:
    times = list(arrival_times(200.0, 10.0, random.Random(1)))
    assert 1_800 < len(times) < 2_200
    assert times == sorted(times) and 0 < times[0] and times[-1] < 10.0
    even = list(arrival_times(100.0, 1.0, random.Random(1), poisson=False))
    assert len(even) == 99 and even[1] - even[0] == pytest.approx(0.01)


def test_zipf_ranks_favour_the_head_and_reach_the_tail() -> None:
    rng = random.Random(7)
    n = 1_000_000
    ranks = [zipf_rank(rng, n, 1.0) for _ in range(100_000)]
    assert min(ranks) >= 1 and max(ranks) <= n
    counts = Counter(ranks)
    # P(rank 1) under Zipf(1) over a million is about 1 / ln(1e6), 7%; the top 1,000 take about half.
    assert 0.04 < counts[1] / len(ranks) < 0.10
    assert 0.4 < sum(1 for r in ranks if r <= 1_000) / len(ranks) < 0.6
    assert sum(1 for r in ranks if r > 100_000) > 5_000  # the long tail: cold pages
    flatter = [zipf_rank(rng, n, 0.5) for _ in range(10_000)]
    assert sum(1 for r in flatter if r > 100_000) > sum(1 for r in ranks[:10_000] if r > 100_000)
    assert zipf_rank(rng, 1, 1.0) == 1


def test_shares_override_the_defaults_and_are_normalised() -> None:
    shares = parse_shares("PaperPage=0.5,Chat=0")
    assert "Chat" not in shares
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["PaperPage"] > shares["ResearcherPage"]
    assert parse_shares(None).keys() == DEFAULT_SHARES.keys()
    with pytest.raises(ValueError, match="unknown class"):
        parse_shares("Nope=1")


def test_each_signed_in_reader_comes_from_an_address_of_its_own() -> None:
    """Rate limits are per address: readers sent from one would be refused as one client."""
    readers = [f"{VIEWER_PREFIX}{i}" for i in range(1, 100_001)]
    addresses = [Site._reader_address(r) for r in readers]
    assert len(set(addresses)) == len(readers)
    assert all(ipaddress.ip_address(a).version == 4 for a in addresses[::997])
    assert Site._reader_address(readers[41]) == Site._reader_address(f"{VIEWER_PREFIX}42")


def test_search_terms_are_words_and_pairs_most_frequent_first() -> None:
    terms = search_terms(["Graph Neural Networks for Molecules", "Neural Networks in Vision", "Quantum Graphs"])
    assert terms[0] in ("networks", "neural", "neural networks")
    assert "neural networks" in terms and "for" not in terms


def _world() -> World:
    people = [
        ["Jana Müller", "1000001", "A5000000001", "0000-0002-1825-0097", 40, 900, 12, 45, 1000, 13, 20],
        ["Wei Zhang", "1000002", None, None, 3, 10, 2, None, None, None, None],
    ]
    institutions = [["I1000000001", "05gq02987", "Brown University", "US", "education"]]
    revised = [["hep-th/9901001", "A Title", "An abstract.", ["hep-th"], "10.1016/j.x.1999.01.001", "Phys. X 1 (1999)",
                ["1999-01-04T10:00:00+00:00"], [["Jana Müller", "1000001"], ["Someone Else", ""]]]]  # fmt: skip
    return World({"records": 6, "seed": 3, "first": 1, "people": people, "institutions": institutions,
                  "revised": revised})  # fmt: skip


def test_the_fake_upstreams_answer_in_formats_the_ingest_parses() -> None:
    world = _world()
    assert len(world.papers) == 6
    page = parse_page(world.pages()[0])
    assert [r.arxiv_id for r in page.records] == [p.arxiv_id for p in world.papers]
    revised = next(r for r in page.records if r.arxiv_id == "hep-th/9901001")
    assert revised.version == 2 and [a.name for a in revised.authors] == ["Jana Müller", "Someone Else"]
    # A new version keeps its DOI and journal reference, as arXiv's records do (dropping them would change what
    # its authors' careers count).
    assert (revised.doi, revised.journal_ref) == ("10.1016/j.x.1999.01.001", "Phys. X 1 (1999)")
    new = next(r for r in page.records if r.arxiv_id == "2612.00001")
    assert new.categories and new.abstract and new.title

    ids = [p.arxiv_id for p in world.papers]
    s2 = parse_paper_batch(ids, json.loads(json.dumps([world.s2_paper(i) for i in ids])))
    assert set(s2) == set(ids)
    assert s2["hep-th/9901001"].authors[0].author_id == "1000001"
    # A researcher the archive knows keeps the figures stored for them: the enrichment does not list their
    # whole career again.
    known = researcher_from_author(world.s2_author("1000001"))
    assert known is not None and (known.s2_paper_count, known.s2_citation_count, known.s2_h_index) == (40, 900, 12)

    status, _, body = world.openalex("/works", {"filter": "doi:" + "|".join(f"10.48550/arxiv.{i}" for i in ids)})
    works = [w for w in map(parse_work, parse_results(json.loads(body))) if w is not None]
    assert status == 200 and len(works) == len(ids)
    status, _, body = world.openalex("/authors", {"filter": "openalex:A5000000001"})
    assert status == 200 and json.loads(body)["results"][0]["display_name"] == "Jana Müller"


def test_backend_cpu_is_told_apart_by_application_and_counts_the_ingest_runs_by_their_names() -> None:
    """The ingest's connections carry the stage, host and process in their name; the API's pool is `wovepaper`."""
    backends = Backends(conn=None)  # type: ignore[arg-type]  # only the sampled figures are read
    names = {1: API_APP, 2: run_name("arxiv"), 3: run_name("enrich"), 4: "psql"}
    for pid, name in names.items():
        backends.app[pid], backends.first[pid], backends.last[pid] = name, 1.0, 1.0 + pid
    assert backends.seconds(API_APP) == 1.0
    assert backends.seconds(INGEST_APP) == 2.0 + 3.0
    assert asyncio.iscoroutinefunction(Backends.run)  # the sampler the run starts


def test_the_loop_lag_quantiles_come_from_the_buckets_counted_between_two_scrapes() -> None:
    inf = float("inf")
    before = {0.001: 10.0, 0.01: 20.0, 0.1: 20.0, inf: 20.0}
    # Since then: 90 samples under 1 ms, 9 between 1 and 10 ms, 1 between 10 and 100 ms.
    after = {0.001: 100.0, 0.01: 29.0 + 90, 0.1: 30.0 + 90, inf: 30.0 + 90}
    assert lag_quantile(before, after, 0.5) == pytest.approx(0.5 * 0.001 / 0.9 * 1000, abs=0.01)
    assert lag_quantile(before, after, 0.99) == pytest.approx(10.0)  # the 99th of 100: the top of the second bucket
    assert lag_quantile(before, after, 1.0) == pytest.approx(100.0)  # the one slow sample's bucket, its upper bound
    assert lag_quantile(after, after, 0.99) is None  # nothing observed in between
    # Beyond the last finite bound: that bound, as histogram_quantile answers.
    assert lag_quantile({}, {0.001: 0.0, 0.01: 0.0, 0.1: 0.0, inf: 4.0}, 0.5) == pytest.approx(100.0)
