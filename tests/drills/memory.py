"""Floods of requests each carrying a distinct large variable, against a served worker, with its resident memory
read before and after: shared by the memory drill in the suite (a few seconds per kind) and bench/memory.py
(1,000 requests per kind, for bench/RESULTS.md).

Each kind reaches the worker through another door: a POSTed document, the site's persisted document by `documentId`
(POST and GET), an automatic persisted query's hash, an undeclared variable, `nodes(ids:)` with a huge id list, a
distinct document whose page of papers PostgreSQL writes whole (a statement made for each) or the executor answers
(a leaf reader written for each), and requests refused with 429 (a spent budget). What a kind sends is distinct in
every request, so nothing the worker remembers of one request can be reused by the next: a cache keyed by what
clients send grows by every request."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import hashlib
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

from tests.drills.load import operation_text

# The site's documents, as the site sends them.
PAPER_PAGE = operation_text("PaperPage")
PAPER_LIST = operation_text("PaperList")
PAPER_PAGE_ID = "sha256:" + hashlib.sha256(PAPER_PAGE.encode()).hexdigest()
# Not a site document: reached by its APQ hash once registered (its variable is read by the cost measure).
APQ_DOCUMENT = "query FloodPapers($first: Int) { papers(first: $first) { totalCount } }"
APQ_HASH = hashlib.sha256(APQ_DOCUMENT.encode()).hexdigest()
NODES_DOCUMENT = "query FloodNodes($ids: [ID!]!) { nodes(ids: $ids) { id } }"
# Every field a page's papers can have written by PostgreSQL (resolvers/written.py), with authors.
WRITTEN_FIELDS = (
    "id databaseId arxivId version slug title abstract authorsText categories primaryCategory published updated "
    "absUrl pdfUrl doi journalRef comments license withdrawn modifiedAt citedByCount summary topics paperType "
    "researchField novelty significanceScore analysed analysedAt analysisModel __typename "
    "authors { position name affiliation isCollaboration researcher { id databaseId slug name claimed } "
    "institutions { id databaseId slug rorId name country } }"
)

KINDS = (
    "post",
    "persisted-post",
    "persisted-get",
    "apq",
    "undeclared",
    "nodes",
    "selections",
    "selections-rows",
    "refused-429",
)
# The kinds a worker with a spent budget is flooded with (the others need a budget to spend).
SPENT_BUDGET_KINDS = frozenset({"refused-429"})

# The bytes of the large variable: padding behind the request's number.
VARIABLE_BYTES = 900_000
# The variable of a GET: as large as a URL uvicorn's parser reads (it answers 400 to one of 900 KB).
GET_VARIABLE_BYTES = 60_000


def rss_kb(pid: int) -> int:
    """The process's resident set (VmRSS), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def _distinct(i: int, size: int) -> str:
    head = f"flood-{i:08d}-"
    return head + "x" * max(0, size - len(head))


@functools.cache
def _shared_ids(count: int) -> bytes:
    """`count` ids as JSON list items, the same in every request (a distinct one goes in front)."""
    return b",".join(b'"UGFwZXI6x%07d"' % j for j in range(count))


def _ids_body(i: int, size: int) -> bytes:
    """A `nodes(ids:)` request whose list takes about `size` bytes of JSON: its first id is the request's own."""
    shared = _shared_ids(max(1, size // 20))
    return b'{"query":%s,"variables":{"ids":["UGFwZXI6%08d",%s]}}' % (orjson.dumps(NODES_DOCUMENT), i, shared)


def _post(body: object) -> tuple[str, str, bytes]:
    return "POST", "/graphql", orjson.dumps(body)


def request_for(kind: str, i: int, size: int) -> tuple[str, str, bytes]:
    """(method, target, body) of request `i` of a flood of `kind`, its large variable `size` bytes."""
    big = _distinct(i, size)
    if kind == "post":
        # The site's document POSTed as text: the response cache keys it, the cost measure reads `first`.
        return _post({"query": PAPER_LIST, "variables": {"first": big}})
    if kind == "persisted-post":
        return _post({"documentId": PAPER_PAGE_ID, "variables": {"id": big}})
    if kind == "persisted-get":
        # In the query string: uvicorn's parser refuses a URL of 900 KB whatever the application would do.
        variables = orjson.dumps({"id": big[:GET_VARIABLE_BYTES]}).decode()
        query = urllib.parse.urlencode({"documentId": PAPER_PAGE_ID, "variables": variables})
        return "GET", f"/graphql?{query}", b""
    if kind == "apq":
        extensions = {"persistedQuery": {"version": 1, "sha256Hash": APQ_HASH}}
        return _post({"extensions": extensions, "variables": {"first": big}})
    if kind == "undeclared":
        return _post({"query": PAPER_PAGE, "variables": {"id": "2401.00001", "pad": big}})
    if kind in ("selections", "selections-rows"):
        # A distinct document each time, its page of papers written whole (a new statement per document), or with a
        # directive on `nodes`, read as rows and answered by the executor's plans (a new leaf reader per document).
        aliases = " ".join(f"f{i}x{j}: title" for j in range(14))
        nodes = "nodes" if kind == "selections" else "nodes @include(if: true)"
        document = f"query Flood{i} {{ papers(first: 20) {{ {nodes} {{ {aliases} {WRITTEN_FIELDS} }} }} }}"
        return _post({"query": document})
    if kind in ("nodes", "refused-429"):
        return "POST", "/graphql", _ids_body(i, size)
    raise ValueError(kind)


@dataclass
class Answer:
    status: int
    body: bytes
    closed: bool  # the server said `Connection: close`


class RawConnection:
    """HTTP/1.1 over a socket: a target of any length (httpx refuses URLs past 64 KB), keep-alive, reopened when the
    server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def ask(self, method: str, target: str, body: bytes, timeout_s: float = 120) -> Answer:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        reader, writer = self.streams
        head = [f"{method} {target} HTTP/1.1", f"host: {self.host}", f"content-length: {len(body)}"]
        if method == "POST":
            head.append("content-type: application/json")
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            answer = await asyncio.wait_for(_read_answer(reader), timeout_s)
        except BaseException:
            await self.close()
            raise
        if answer.closed:
            await self.close()
        return answer

    async def close(self) -> None:
        streams, self.streams = self.streams, None
        if streams is not None:
            streams[1].close()
            with contextlib.suppress(OSError):
                await streams[1].wait_closed()


async def _read_answer(reader: asyncio.StreamReader) -> Answer:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(status, body, headers.get("connection", "").lower() == "close")


def outcome(answer: Answer) -> str:
    """`<status> <first error code>`, or `<status> data`."""
    try:
        body = orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        return f"{answer.status} -"
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        return f"{answer.status} {(errors[0].get('extensions') or {}).get('code')}"
    return f"{answer.status} data"


async def prepare(client: httpx.AsyncClient) -> None:
    """Registers the APQ document, so that its hash runs it."""
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": APQ_HASH}}
    response = await client.post("/graphql", json={"query": APQ_DOCUMENT, "extensions": extensions})
    assert response.status_code == 200, response.text[:300]


async def spend_budget(client: httpx.AsyncClient) -> None:
    """Spends the client's budget (a worker run with a small one), so that what follows is refused with 429."""
    for _ in range(100):
        response = await client.post("/graphql", json={"query": "{ papers(first: 100) { totalCount } }"})
        if response.status_code == 429:
            return
    raise AssertionError("the budget was not spent: is the worker's anonymous budget small?")


@dataclass
class Flood:
    kind: str
    requests: int
    seconds: float
    rss_before_kb: int
    rss_after_kb: int
    outcomes: Counter[str]

    @property
    def growth_mb(self) -> float:
        return (self.rss_after_kb - self.rss_before_kb) / 1024


async def flood(
    url: str,
    pid: int,
    kind: str,
    *,
    requests: int,
    size: int = VARIABLE_BYTES,
    concurrency: int = 8,
    seconds: float | None = None,
    first: int = 0,
    settle_s: float = 0.5,
) -> Flood:
    """`requests` requests of `kind` to the server at `url` (fewer if `seconds` pass first), over `concurrency`
    connections, numbered from `first` (numbers are never reused on one worker); the worker's RSS before, and
    after it settled for `settle_s`."""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    gc.collect()
    before = rss_kb(pid)
    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    numbers = iter(range(first, first + requests))
    deadline = started + seconds if seconds is not None else None

    async def worker() -> None:
        conn = RawConnection(host, port)
        try:
            for i in numbers:
                if deadline is not None and time.monotonic() > deadline:
                    return
                method, target, body = request_for(kind, i, size)
                try:
                    answer = await conn.ask(method, target, body)
                except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                    outcomes[f"no answer ({type(exc).__name__})"] += 1
                    continue
                outcomes[outcome(answer)] += 1
        finally:
            await conn.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await asyncio.sleep(settle_s)
    return Flood(kind, sum(outcomes.values()), elapsed, before, rss_kb(pid), outcomes)


def table(floods: list[Flood], title: Callable[[Flood], str] = lambda f: f.kind) -> str:
    """The floods as a Markdown table."""
    lines = [
        "| kind | requests | seconds | RSS before (MB) | RSS after (MB) | growth (MB) | answers |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for f in floods:
        answers = ", ".join(f"{k} x{v}" for k, v in f.outcomes.most_common())
        lines.append(
            f"| {title(f)} | {f.requests} | {f.seconds:.1f} | {f.rss_before_kb / 1024:.0f} | "
            f"{f.rss_after_kb / 1024:.0f} | {f.growth_mb:+.1f} | {answers} |"
        )
    return "\n".join(lines)
