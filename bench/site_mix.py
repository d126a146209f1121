"""The site's traffic as the API's origin sees it: which requests, in which proportions, for which entities.

Classes (the defaults are shares of the requests that reach the API, behind the site's CDN):

| class | share | what |
| --- | ---: | --- |
| ResearcherPage | 0.18 | a researcher's page, server-rendered: a persisted GET (`documentId`), anonymous |
| PaperPage | 0.24 | a paper's page, the same way |
| InstitutionPage | 0.03 | an institution's page |
| PaperList | 0.08 | a category's list, page 1 mostly (1 + a geometric number, at most 10) |
| LatestPapers | 0.04 | the home page's newest papers (one URL: nearly always a hit) |
| ResolvePath | 0.12 | the route lookup every page makes first (`/papers/<slug>`, `/researchers/<id>-<slug>`) |
| Search | 0.08 | the browser's keyword search (`Origin` set), page 1 mostly; `--hybrid-share` of them HYBRID |
| Autocomplete | 0.12 | the browser's search box: a prefix of 2 to 10 letters of a researcher's name |
| ViewerFeed | 0.05 | a signed-in reader's feed: POST with `Authorization: Bearer <JWT>`, never cached |
| Follow | 0.01 | FollowResearcher / UnfollowResearcher by a signed-in reader |
| Chat | 0.002 | a question to the papers (`POST /chat`, streamed), answered by the fake model at once |
| Crawler | 0.048 | crawlers walking the paper sitemap: a SitemapPage chunk, then each of its papers (cold) |

Entities are drawn Zipf-like by popularity rank (researchers and institutions by papers, papers by citations,
categories by papers, search terms and names by their rank in a sample), so that caches see a realistic hit rate;
`--zipf` sets the exponent. Pages are anonymous persisted GETs from many visitors' addresses (`X-Forwarded-For`
from loopback, which the API trusts by default); a signed-in reader's requests come from the reader's own address
(rate limits are per address: readers sharing one would be limited as one). The client plays the CDN: once it
holds an answer's `ETag`, a later request for the same URL is a revalidation (`If-None-Match`) with probability
`--revalidate`, else a plain GET (another edge location's miss).

Every answer is checked where it is cheap: the status, no GraphQL `errors`, the entity asked for (its id in the
answer), and for pages their `modifiedAt`, kept (with the time the request left) for `truth.py`'s check against
the database after the run.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg
import jwt
import orjson

from bench.loadgen import ANSWERED, Client, Job, Outcome, Response, encode_request, zipf_rank
from edge.persisted import build_manifest

ROOT = Path(__file__).resolve().parent.parent
OPERATIONS = ROOT / "frontend_contract" / "operations"
SITE_ORIGIN = "https://www.wovepaper.com"

DEFAULT_SHARES: dict[str, float] = {
    "ResearcherPage": 0.18,
    "PaperPage": 0.24,
    "InstitutionPage": 0.03,
    "PaperList": 0.08,
    "LatestPapers": 0.04,
    "ResolvePath": 0.12,
    "Search": 0.08,
    "Autocomplete": 0.12,
    "ViewerFeed": 0.05,
    "Follow": 0.01,
    "Chat": 0.002,
    "Crawler": 0.048,
}
PAGE_CLASSES = ("ResearcherPage", "PaperPage", "InstitutionPage", "PaperList", "LatestPapers", "ResolvePath")
SITEMAP_CHUNK = 10_000  # the site's sitemap chunk size (SitemapPage's default)
CDN_ENTRIES = 500_000  # ETags the simulated CDN remembers (least recently used dropped)
VIEWER_PREFIX = "traffic-reader-"


def parse_shares(text: str | None) -> dict[str, float]:
    """`PaperPage=0.3,Chat=0` over the defaults, normalised to sum 1."""
    shares = dict(DEFAULT_SHARES)
    for part in filter(None, (text or "").split(",")):
        name, _, value = part.partition("=")
        if name.strip() not in shares:
            raise ValueError(f"unknown class {name.strip()!r}; classes: {', '.join(shares)}")
        shares[name.strip()] = float(value)
    total = sum(shares.values())
    if total <= 0 or any(v < 0 for v in shares.values()):
        raise ValueError("shares must be >= 0 and not all 0")
    return {k: v / total for k, v in shares.items() if v > 0}


# ------------------------------------------------------------------------------------------------- the universe

# Popularity ranks: the i-th most prolific researcher, the i-th most cited paper, ... (ties by id).
_RANKED = {
    "researcher": "SELECT r, id, slug, name FROM (SELECT id, id || '-' || name_slug AS slug, name, row_number() OVER "
    "(ORDER BY paper_count DESC, id) AS r FROM researchers) x WHERE r = any($1::bigint[])",
    "paper": "SELECT r, id, arxiv_id, slug, title FROM (SELECT id, arxiv_id, slug, title, row_number() OVER "
    "(ORDER BY cited_by_count DESC NULLS LAST, id) AS r FROM papers WHERE NOT withdrawn) x WHERE r = any($1::bigint[])",
    "institution": "SELECT r, id FROM (SELECT id, row_number() OVER (ORDER BY paper_count DESC, id) AS r "
    "FROM institutions) x WHERE r = any($1::bigint[])",
}


@dataclass
class Universe:
    """What the requests name: counts to draw ranks from, and the rows of the ranks drawn (fetched in bulk)."""

    researchers: int
    papers: int
    institutions: int
    max_paper_id: int
    categories: list[str]  # most papers first
    terms: list[str]  # search terms, most common first
    viewers: list[str]
    researcher_rows: dict[int, tuple[int, str, str]] = field(default_factory=dict)  # rank -> (id, slug, name)
    paper_rows: dict[int, tuple[int, str, str, str]] = field(default_factory=dict)  # rank -> (id, arxiv, slug, title)
    institution_ids: dict[int, int] = field(default_factory=dict)  # rank -> id
    paper_by_id: dict[int, str] = field(default_factory=dict)  # database id -> arXiv id (the crawlers' walks)


async def load_universe(conn: asyncpg.Connection, viewers: int, seed: int) -> Universe:
    counts = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM researchers) AS r, (SELECT count(*) FROM papers WHERE NOT withdrawn) AS p,"
        " (SELECT count(*) FROM institutions) AS i, (SELECT coalesce(max(id), 0) FROM papers) AS m"
    )
    categories = [
        r["c"]
        for r in await conn.fetch(
            "SELECT primary_category AS c FROM papers TABLESAMPLE SYSTEM (2) REPEATABLE ($1) "
            "GROUP BY 1 ORDER BY count(*) DESC, 1",
            seed,
        )
    ]
    titles = await conn.fetch("SELECT title FROM papers TABLESAMPLE SYSTEM (1) REPEATABLE ($1) LIMIT 4000", seed)
    return Universe(
        researchers=counts["r"],
        papers=counts["p"],
        institutions=counts["i"],
        max_paper_id=counts["m"],
        categories=categories,
        terms=search_terms([r["title"] for r in titles]),
        viewers=[f"{VIEWER_PREFIX}{i}" for i in range(1, viewers + 1)],
    )


_WORD = re.compile(r"[A-Za-z][a-z]{3,}")
_STOP = frozenset("with from their these those which into over under about through between using based".split())


def search_terms(titles: list[str]) -> list[str]:
    """Queries readers type: one title word, or two adjacent ones, most frequent first."""
    counts: dict[str, int] = {}
    for title in titles:
        words = [w.lower() for w in _WORD.findall(title) if w.lower() not in _STOP]
        for i, w in enumerate(words):
            counts[w] = counts.get(w, 0) + 1
            if i + 1 < len(words):
                pair = f"{w} {words[i + 1]}"
                counts[pair] = counts.get(pair, 0) + 1
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:5000] or ["quantum"]


async def fetch_rows(conn: asyncpg.Connection, u: Universe, wanted: dict[str, set[int]]) -> None:
    """The rows of every rank (and crawled paper id) the schedule names, in one statement per kind."""
    if wanted["researcher"]:
        rows = await conn.fetch(_RANKED["researcher"], list(wanted["researcher"]))
        u.researcher_rows = {r["r"]: (r["id"], r["slug"], r["name"]) for r in rows}
    if wanted["paper"]:
        rows = await conn.fetch(_RANKED["paper"], list(wanted["paper"]))
        u.paper_rows = {r["r"]: (r["id"], r["arxiv_id"], r["slug"], r["title"]) for r in rows}
    if wanted["institution"]:
        rows = await conn.fetch(_RANKED["institution"], list(wanted["institution"]))
        u.institution_ids = {r["r"]: r["id"] for r in rows}
    if wanted["crawl"]:
        rows = await conn.fetch(
            "SELECT id, arxiv_id FROM papers WHERE id = any($1::bigint[]) AND NOT withdrawn", list(wanted["crawl"])
        )
        u.paper_by_id = {r["id"]: r["arxiv_id"] for r in rows}


async def seed_viewers(conn: asyncpg.Connection, viewers: int, seed: int) -> None:
    """Signed-in readers `traffic-reader-N`, each following 1 to 30 researchers (popular ones more often) and a
    quarter of them an institution. Their follows are drawn again from the seed at every run: the Follow class adds
    more than it removes, so readers kept from earlier runs would follow more each time and their feeds cost more."""
    async with conn.transaction():
        await conn.execute("SELECT setseed($1)", (seed % 1000) / 1000)
        await conn.execute(
            "INSERT INTO viewers (id) SELECT $1 || g FROM generate_series(1, $2::int) g ON CONFLICT DO NOTHING",
            VIEWER_PREFIX,
            viewers,
        )
        await conn.execute("DELETE FROM follows WHERE viewer_id LIKE $1", VIEWER_PREFIX + "%")
        await conn.execute("DELETE FROM institution_follows WHERE viewer_id LIKE $1", VIEWER_PREFIX + "%")
        # Popular researchers (most papers) are followed more: the rank is drawn as n^u (Zipf with exponent 1).
        await conn.execute(
            """INSERT INTO follows (viewer_id, researcher_id)
               SELECT DISTINCT $1 || v, r.id
               FROM (SELECT g AS v, floor(exp(random() * ln((SELECT count(*) FROM researchers) + 1)))::bigint AS k
                     FROM generate_series(1, $2::int) g, generate_series(1, (1 + floor(random() * 30))::int) n) s
               JOIN (SELECT id, row_number() OVER (ORDER BY paper_count DESC, id) AS k FROM researchers) r USING (k)
               ON CONFLICT DO NOTHING""",
            VIEWER_PREFIX,
            viewers,
        )
        await conn.execute(
            """INSERT INTO institution_follows (viewer_id, institution_id)
               SELECT $1 || g, (SELECT id FROM institutions ORDER BY random() + g LIMIT 1)
               FROM generate_series(1, $2::int / 4) g ON CONFLICT DO NOTHING""",
            VIEWER_PREFIX,
            viewers,
        )
    await conn.execute("ANALYZE viewers; ANALYZE follows; ANALYZE institution_follows")


# ------------------------------------------------------------------------------------------------------ draws


@dataclass(slots=True)
class Draw:
    """One request of the schedule before its entity's row is known: the class and what to ask for."""

    cls: str
    kind: str  # researcher | paper | institution | category | latest | term | name | viewer | crawl
    rank: int = 0
    extra: int = 0  # a page number, a prefix length, a researcher rank (follows), a crawler's number ...
    flag: bool = False  # ResolvePath: a researcher's path; Search: HYBRID; Follow: unfollow; Chat: scoped


@dataclass
class Drawer:
    """Draws the schedule's requests by class share, Zipf ranks by popularity."""

    universe: Universe
    shares: dict[str, float]
    zipf: float
    rng: random.Random
    hybrid_share: float = 0.0
    crawlers: int = 4
    _crawl_next: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._names = list(self.shares)
        self._weights = [self.shares[n] for n in self._names]
        chunks = max(1, -(-self.universe.max_paper_id // SITEMAP_CHUNK))
        # Each crawler starts at a chunk of its own, at its first paper: chunk c lists ids c*size+1 .. (c+1)*size.
        self._crawl_next = [self.rng.randrange(chunks) * SITEMAP_CHUNK for _ in range(self.crawlers)]
        self._crawl_turn = 0

    def rank(self, n: int) -> int:
        return zipf_rank(self.rng, n, self.zipf)

    def draw(self) -> Draw:
        cls = self.rng.choices(self._names, self._weights)[0]
        u, rng = self.universe, self.rng
        if cls == "ResearcherPage":
            return Draw(cls, "researcher", self.rank(u.researchers))
        if cls == "PaperPage":
            return Draw(cls, "paper", self.rank(u.papers))
        if cls == "InstitutionPage":
            return Draw(cls, "institution", self.rank(u.institutions))
        if cls == "PaperList":
            page = 1
            while page < 10 and rng.random() < 0.4:
                page += 1
            return Draw(cls, "category", self.rank(len(u.categories)), page)
        if cls == "LatestPapers":
            return Draw(cls, "latest")
        if cls == "ResolvePath":
            if rng.random() < 0.3:
                return Draw(cls, "researcher", self.rank(u.researchers), flag=True)
            return Draw(cls, "paper", self.rank(u.papers))
        if cls == "Search":
            page = 1 if rng.random() < 0.85 else 2
            return Draw(cls, "term", self.rank(len(u.terms)), page, flag=rng.random() < self.hybrid_share)
        if cls == "Autocomplete":
            return Draw(cls, "researcher", self.rank(u.researchers), rng.randint(2, 10))
        if cls == "ViewerFeed":
            return Draw(cls, "viewer", self.rank(len(u.viewers)))
        if cls == "Follow":
            return Draw(cls, "researcher", self.rank(u.researchers), self.rank(len(u.viewers)), rng.random() < 0.4)
        if cls == "Chat":
            return Draw(cls, "paper", self.rank(u.papers), self.rank(len(u.viewers)), rng.random() < 0.5)
        # Crawler: the crawlers take turns; each walks its chunk's ids in order, the chunk first.
        c = self._crawl_turn = (self._crawl_turn + 1) % len(self._crawl_next)
        position = self._crawl_next[c]
        self._crawl_next[c] = position + 1 if position < u.max_paper_id else 0
        return Draw(cls, "crawl", position, c)


def wanted_rows(draws: list[Draw]) -> dict[str, set[int]]:
    wanted: dict[str, set[int]] = {"researcher": set(), "paper": set(), "institution": set(), "crawl": set()}
    for d in draws:
        if d.kind in ("researcher", "paper", "institution"):
            wanted[d.kind].add(d.rank)
        elif d.kind == "crawl" and d.rank % SITEMAP_CHUNK:
            wanted["crawl"].add(d.rank)
        if d.cls == "Follow":
            wanted["researcher"].add(d.rank)
    return wanted


# --------------------------------------------------------------------------------------------------- requests


@dataclass(slots=True)
class Seen:
    """A page answer the run received: checked against the database afterwards (truth.py)."""

    cls: str  # the traffic class that asked
    kind: str  # paper | researcher | institution
    key: str  # arXiv id, or database id
    modified_at: str
    sent_at: float  # wall-clock time the request left
    revalidated: bool  # a 304: the answer is the copy the CDN held
    # How the server answered: its X-Cache (hit: from the response cache, miss: computed) and X-Request-Id (its log
    # line), so that a wrong answer says whether a cache or a read held the old state.
    answered: str = ""


_MODIFIED = re.compile(rb'"modifiedAt":"([^"]+)"')
_ERRORS = b'"errors":'


def _code(body: bytes) -> str:
    m = re.search(rb'"code":"([A-Z_]+)"', body)
    return m.group(1).decode() if m else "UNKNOWN"


class Site:
    """Builds each drawn request and checks its answer; plays the CDN (ETags it holds) and keeps what truth.py
    checks afterwards."""

    def __init__(
        self, client: Client, universe: Universe, *, jwt_secret: str, revalidate: float, rng: random.Random
    ) -> None:
        self.client = client
        self.u = universe
        self.rng = rng
        self.revalidate = revalidate
        self.jwt_secret = jwt_secret
        manifest = build_manifest(OPERATIONS)
        self.document_ids = {_operation_name(text): key for key, text in manifest.items()}
        self.cdn: OrderedDict[str, tuple[bytes, str | None]] = OrderedDict()  # target -> (ETag, modifiedAt)
        self.seen: list[Seen] = []
        self.latest: list[tuple[float, list[str], str]] = []  # (sent_at, arXiv ids, oldest published) of LatestPapers
        self._tokens: dict[str, str] = {}

    # -- building blocks

    def _visitor(self) -> str:
        return f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{self.rng.randrange(1, 255)}"

    @staticmethod
    def _reader_address(viewer: str) -> str:
        """A signed-in reader's own address, the same at every request (the site forwards it, as for any visitor)."""
        n = int(viewer.removeprefix(VIEWER_PREFIX))
        return f"100.{64 + n // 65536 % 64}.{n // 256 % 256}.{n % 256}"

    def _crawler_address(self, crawler: int) -> str:
        return f"66.249.{crawler % 256}.{1 + self.rng.randrange(60)}"  # a crawler's few addresses

    def _token(self, viewer: str) -> str:
        token = self._tokens.get(viewer)
        if token is None:
            claims = {"sub": viewer, "exp": int(time.time()) + 86_400}
            token = self._tokens[viewer] = jwt.encode(claims, self.jwt_secret, algorithm="HS256")
        return token

    def persisted_target(self, operation: str, variables: dict[str, Any]) -> str:
        doc = quote(self.document_ids[operation], safe="")
        return f"/graphql?documentId={doc}&variables={quote(json.dumps(variables, separators=(',', ':')), safe='')}"

    async def _page(
        self,
        operation: str,
        variables: dict[str, Any],
        *,
        address: str,
        expect: bytes | None,
        truth: tuple[str, str] | None,
        cdn: bool = True,
        origin: bool = False,
        label: str | None = None,
    ) -> Outcome:
        """A persisted GET, revalidated when the CDN holds its ETag (and `cdn`); its answer checked."""
        target = self.persisted_target(operation, variables)
        headers = [("Accept", "application/graphql-response+json, application/json;q=0.9")]
        headers.append(("X-Forwarded-For", address))
        if origin:
            headers.append(("Origin", SITE_ORIGIN))
        held = self.cdn.get(target) if cdn else None
        if held is not None and self.rng.random() < self.revalidate:
            headers.append(("If-None-Match", held[0].decode("latin-1")))
        else:
            held = None
        sent = time.time()
        response = await self.client.request(encode_request("GET", target, self.client.authority, headers))
        if response.status == 304:
            if held is None:
                return "CHECK: 304 without If-None-Match"
            self.cdn.move_to_end(target)
            if truth is not None and held[1] is not None:
                self.seen.append(Seen(label or operation, truth[0], truth[1], held[1], sent, True, _answered(response)))
            return "not_modified"
        outcome = _checked(response, expect)
        if outcome not in ANSWERED:
            return outcome
        modified = _MODIFIED.search(response.body)
        modified_at = modified.group(1).decode() if modified else None
        if truth is not None and modified_at is not None:
            self.seen.append(
                Seen(label or operation, truth[0], truth[1], modified_at, sent, False, _answered(response))
            )
        etag = response.headers.get(b"etag")
        if cdn and etag is not None and b"public" in response.headers.get(b"cache-control", b""):
            self.cdn[target] = (etag, modified_at)
            self.cdn.move_to_end(target)
            if len(self.cdn) > CDN_ENTRIES:
                self.cdn.popitem(last=False)
        return outcome

    async def _signed_in(self, viewer: str, operation: str, variables: dict[str, Any], expect: bytes | None) -> Outcome:
        body = orjson.dumps({"documentId": self.document_ids[operation], "variables": variables})
        headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/graphql-response+json, application/json;q=0.9"),
            ("Authorization", f"Bearer {self._token(viewer)}"),
            ("X-Forwarded-For", self._reader_address(viewer)),
        ]
        response = await self.client.request(encode_request("POST", "/graphql", self.client.authority, headers, body))
        return _checked(response, expect)

    # -- one job per drawn request

    def job(self, d: Draw) -> Job | None:  # noqa: C901 - one branch per class, each short
        """The request of a draw, or None when its entity is not in the database (an empty archive's ranks)."""
        u = self.u
        if d.cls in ("ResearcherPage", "Autocomplete", "Follow") or (d.cls == "ResolvePath" and d.flag):
            row = u.researcher_rows.get(d.rank)
            if row is None:
                return None
            rid, slug, name = row
            if d.cls == "ResearcherPage":
                expect = f'"databaseId":{rid},'.encode()
                return lambda: self._page(
                    "ResearcherPage", {"id": str(rid)}, address=self._visitor(), expect=expect,
                    truth=("researcher", str(rid)),
                )  # fmt: skip
            if d.cls == "ResolvePath":
                path = {"path": f"/researchers/{slug}"}
                return lambda: self._page("ResolvePath", path, address=self._visitor(), expect=b'"node":{', truth=None)
            if d.cls == "Autocomplete":
                prefix = name[: d.extra]
                return lambda: self._page(
                    "Autocomplete", {"query": prefix}, address=self._visitor(), expect=b'"autocomplete":[',
                    truth=None, cdn=False, origin=True,
                )  # fmt: skip
            viewer = u.viewers[d.extra - 1]
            operation = "UnfollowResearcher" if d.flag else "FollowResearcher"
            return lambda: self._signed_in(viewer, operation, {"id": str(rid)}, b'"researcher":{')
        if d.cls in ("PaperPage", "ResolvePath", "Chat"):
            paper = u.paper_rows.get(d.rank)
            if paper is None:
                return None
            _, arxiv_id, slug, title = paper
            if d.cls == "PaperPage":
                expect = f'"arxivId":"{arxiv_id}"'.encode()
                return lambda: self._page(
                    "PaperPage", {"id": arxiv_id}, address=self._visitor(), expect=expect, truth=("paper", arxiv_id)
                )
            if d.cls == "ResolvePath":
                return lambda: self._page(
                    "ResolvePath", {"path": f"/papers/{slug}"}, address=self._visitor(), expect=b'"node":{', truth=None
                )
            return lambda: self._chat(u.viewers[d.extra - 1], title, arxiv_id if d.flag else None)
        if d.cls == "InstitutionPage":
            iid = u.institution_ids.get(d.rank)
            if iid is None:
                return None
            expect = f'"databaseId":{iid},'.encode()
            return lambda: self._page(
                "InstitutionPage", {"id": str(iid)}, address=self._visitor(), expect=expect,
                truth=("institution", str(iid)),
            )  # fmt: skip
        if d.cls == "PaperList":
            category = u.categories[d.rank - 1]
            variables = {"filter": {"category": category}, "page": d.extra}
            return lambda: self._page(
                "PaperList", variables, address=self._visitor(), expect=b'"totalCount":', truth=None
            )
        if d.cls == "LatestPapers":
            return self._latest
        if d.cls == "Search":
            term = u.terms[d.rank - 1]
            variables: dict[str, Any] = {"query": term, "page": d.extra}
            if d.flag:
                variables["mode"] = "HYBRID"
            return lambda: self._page(
                "Search", variables, address=self._visitor(), expect=b'"search":{', truth=None, cdn=False, origin=True
            )
        if d.cls == "ViewerFeed":
            viewer = u.viewers[d.rank - 1]
            return lambda: self._signed_in(viewer, "ViewerFeed", {}, b'"id":"')
        # Crawler: a chunk boundary asks for the sitemap chunk; otherwise the paper at that id, if listed.
        crawler = d.extra
        if d.rank % SITEMAP_CHUNK == 0:
            variables = {"kind": "PAPER", "chunk": d.rank // SITEMAP_CHUNK}
            return lambda: self._page(
                "SitemapPage", variables, address=self._crawler_address(crawler), expect=b'"entries":[', truth=None,
                cdn=False,
            )  # fmt: skip
        arxiv_id = u.paper_by_id.get(d.rank)
        if arxiv_id is None:
            return None  # withdrawn, or a gap in the ids: the sitemap does not list it
        expect = f'"arxivId":"{arxiv_id}"'.encode()
        return lambda: self._page(
            "PaperPage", {"id": arxiv_id}, address=self._crawler_address(crawler), expect=expect,
            truth=("paper", arxiv_id), cdn=False, label="Crawler",
        )  # fmt: skip

    async def _latest(self) -> Outcome:
        sent = time.time()
        target = self.persisted_target("LatestPapers", {})
        headers = [("Accept", "application/json"), ("X-Forwarded-For", self._visitor())]
        response = await self.client.request(encode_request("GET", target, self.client.authority, headers))
        outcome = _checked(response, b'"nodes":[')
        if outcome in ANSWERED:
            nodes = orjson.loads(response.body)["data"]["papers"]["nodes"]
            if nodes:
                self.latest.append((sent, [n["arxivId"] for n in nodes], min(n["published"] for n in nodes)))
        return outcome

    async def _chat(self, viewer: str, title: str, arxiv_id: str | None) -> Outcome:
        words = " ".join(title.split()[:6])
        body: dict[str, Any] = {"question": f"What do these papers say about {words}?"}
        if arxiv_id is not None:
            body = {"question": "What does this paper show?", "scope": {"paper": arxiv_id}}
        headers = [
            ("Content-Type", "application/json"),
            ("Authorization", f"Bearer {self._token(viewer)}"),
            ("X-Forwarded-For", self._reader_address(viewer)),
        ]
        raw = encode_request("POST", "/chat", self.client.authority, headers, orjson.dumps(body))
        response = await self.client.request(raw)
        if response.status != 200:
            return f"HTTP_{response.status}"
        if b"event: error" in response.body:
            return "CHAT_ERROR"
        return "ok" if b"event: done" in response.body else "CHECK: no done event"


def _operation_name(text: str) -> str:
    m = re.search(r"^(?:query|mutation)\s+(\w+)", text, re.M)
    if m is None:
        raise ValueError("an operation without a name")
    return m.group(1)


def _answered(response: Response) -> str:
    cache = response.headers.get(b"x-cache", b"").decode("latin-1") or "no X-Cache"
    return f"{cache}, request {response.headers.get(b'x-request-id', b'?').decode('latin-1')}"


def _checked(response: Response, expect: bytes | None) -> Outcome:
    if response.status != 200:
        return f"HTTP_{response.status}" if _ERRORS not in response.body else f"GRAPHQL:{_code(response.body)}"
    if _ERRORS in response.body:
        return f"GRAPHQL:{_code(response.body)}"
    if expect is not None and expect not in response.body:
        return "CHECK: not the entity asked for"
    return "hit" if response.headers.get(b"x-cache") == b"hit" else "ok"


def schedule(
    drawer: Drawer, times: Iterator[float]
) -> tuple[list[tuple[float, Draw]], Callable[[Site], Iterator[tuple[float, str, Job]]]]:
    """The run's draws at their times, and, once their rows are fetched, the jobs of a Site for them."""
    drawn = [(t, drawer.draw()) for t in times]

    def jobs(site: Site) -> Iterator[tuple[float, str, Job]]:
        for t, d in drawn:
            job = site.job(d)
            if job is not None:
                yield t, d.cls, job

    return drawn, jobs
