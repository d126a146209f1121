"""The ingest during a traffic run: `wovepaper ingest arxiv` loads N new records and `wovepaper ingest enrich`
enriches them, from fake arXiv, Semantic Scholar and OpenAlex in their real formats (the shapes of
tests/acceptance/upstreams.py), served by a process of their own.

The records are made to touch what the site is reading: their authors are mostly the archive's researchers,
popular ones more often (S2 answers their stored author ids and figures, so they are matched, and their pages
change), their institutions the archive's (OpenAlex answers their ids and ROR ids), and a share of the records
are new versions of well-cited papers. Every write invalidates the API's cache through Redis as in production
(same namespace), so the run's hit rate shows the invalidations and bench/truth.py whether any answer was stale.

    python -m bench.traffic_ingest serve WORLD.json PORT   # the upstreams' process (started by IngestDuringLoad)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
PAGE = 2_500  # records per ListRecords page, as arXiv's server sends them
REVISIONS = 0.05  # share of the records that are new versions of papers already in the archive
KNOWN_AUTHORS = 0.7  # share of the authors who are the archive's researchers
RESPONSE_DATE = "2026-12-20T00:00:00Z"
ARXIV_SOURCE = {"id": "https://openalex.org/S4306400194", "display_name": "arXiv (Cornell University)"}
CATEGORIES = ["hep-th", "cs.LG", "math.AP", "astro-ph.CO", "cond-mat.str-el", "quant-ph", "cs.CL", "stat.ML"]


# ----------------------------------------------------------------------------------------------- the world


async def build_world(conn: asyncpg.Connection, records: int, seed: int) -> dict[str, Any]:
    """What the fake upstreams answer, from the database: people, institutions and the papers to revise."""
    rng = random.Random(seed)
    institutions = [
        list(r)
        for r in await conn.fetch(
            "SELECT openalex_id, ror_id, name, country, type FROM institutions WHERE openalex_id IS NOT NULL"
        )
    ]
    # New ids continue after those an earlier run of this benchmark gave (2612.00001, 2612.00002, ...).
    earlier = await conn.fetchval("SELECT count(*) FROM papers WHERE arxiv_id >= '2612.' AND arxiv_id < '3'")
    revised = await conn.fetch(
        """SELECT p.arxiv_id, p.title, p.abstract, p.categories, p.doi, p.journal_ref,
                  (SELECT array_agg(v.submitted_at ORDER BY v.version) FROM paper_versions v WHERE v.paper_id = p.id)
                    AS versions,
                  (SELECT array_agg(a.name ORDER BY a.position) FROM authorships a WHERE a.paper_id = p.id) AS authors,
                  (SELECT array_agg(coalesce(r.s2_author_id, '') ORDER BY a.position)
                   FROM authorships a LEFT JOIN researchers r ON r.id = a.researcher_id WHERE a.paper_id = p.id) AS s2
           FROM papers p WHERE NOT p.withdrawn AND p.arxiv_id < '2612.'
           ORDER BY p.cited_by_count DESC NULLS LAST, p.id LIMIT $1""",
        int(records * REVISIONS),
    )
    # The most prolific researchers (new papers' authors are drawn from them) and the revised papers' authors: S2
    # answers each with the figures stored, so no career is listed again (or cut to the papers S2 knows here).
    authors = sorted({s for r in revised for s in r["s2"] or [] if s})
    people = [
        list(r)
        for r in await conn.fetch(
            """SELECT name, s2_author_id, openalex_id, orcid, s2_paper_count, s2_citation_count, s2_h_index,
                      openalex_works_count, openalex_cited_by_count, openalex_h_index, openalex_i10_index
               FROM researchers
               WHERE id IN (SELECT id FROM researchers WHERE s2_author_id IS NOT NULL
                            ORDER BY paper_count DESC, id LIMIT 50000)
                  OR s2_author_id = any($1::text[])
               ORDER BY paper_count DESC, id""",
            authors,
        )
    ]
    return {
        "records": records,
        "seed": rng.randrange(2**31),
        "first": earlier + 1,
        "people": people,
        "institutions": institutions,
        "revised": [
            [
                r["arxiv_id"],
                r["title"],
                r["abstract"],
                r["categories"],
                r["doi"],
                r["journal_ref"],
                [v.isoformat() for v in r["versions"] or []],
                list(zip(r["authors"] or [], r["s2"] or [], strict=True)),
            ]
            for r in revised
        ],  # fmt: skip
    }


@dataclass(slots=True)
class Author:
    name: str
    s2: str | None
    person: int  # index into the world's people, -1 for someone new
    institution: int  # index into the institutions, -1 for none


@dataclass(slots=True)
class Paper:
    arxiv_id: str
    title: str
    abstract: str
    categories: list[str]
    versions: list[str]  # ISO dates
    authors: list[Author]
    citations: int
    # A new version's record carries the paper's DOI and journal reference, as arXiv's do.
    doi: str | None = None
    journal_ref: str | None = None


def _new_id(n: int) -> str:
    # 99,999 papers a month from December 2026 on.
    month = 2026 * 12 + 11 + (n - 1) // 99_999
    return f"{month // 12 % 100:02d}{month % 12 + 1:02d}.{(n - 1) % 99_999 + 1:05d}"


class World:
    """The fake upstreams' answers, consistent across the three services."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from demo import words as W

        self.people = spec["people"]
        self.institutions = spec["institutions"]
        rng = random.Random(spec["seed"])
        self.people_index = {p[1]: i for i, p in enumerate(self.people)}
        self.papers: list[Paper] = []
        revised = spec["revised"]
        n_new = spec["records"] - len(revised)
        stamp = "2026-12-10T09:00:00+00:00"
        for k in range(n_new):
            arxiv_id = _new_id(spec["first"] + k)
            cats = rng.sample(CATEGORIES, rng.randint(1, 2))
            field = W.field_of(cats[0])
            authors = [self._author(rng, None) for _ in range(rng.randint(1, 6))]
            self.papers.append(
                Paper(arxiv_id, W.title(rng, field), W.abstract(rng, field), cats, [stamp], authors, rng.randint(0, 5))
            )
        for arxiv_id, title, abstract, cats, doi, journal_ref, versions, names in revised:
            authors = [self._known(rng, name, s2) for name, s2 in names] or [self._author(rng, None)]
            versions = [*versions, stamp]
            cited = rng.randint(5, 50)
            self.papers.append(Paper(arxiv_id, title, abstract, cats, versions, authors, cited, doi, journal_ref))
        self.by_arxiv = {p.arxiv_id: p for p in self.papers}
        self.by_s2: dict[str, list[Paper]] = {}
        for p in self.papers:
            for a in p.authors:
                if a.s2:
                    self.by_s2.setdefault(a.s2, []).append(p)
        self.by_openalex = {p[2]: p for p in self.people if p[2]}

    def _known(self, rng: random.Random, name: str, s2: str) -> Author:
        """An author of a revised paper: the researcher the archive matched, or a name no researcher has."""
        institution = rng.randrange(len(self.institutions)) if self.institutions and rng.random() < 0.8 else -1
        if s2 and s2 in self.people_index:
            return Author(name, s2, self.people_index[s2], institution)
        return Author(name, _new_s2(name), -1, institution)

    def _author(self, rng: random.Random, name: str | None) -> Author:
        institution = rng.randrange(len(self.institutions)) if self.institutions and rng.random() < 0.8 else -1
        if self.people and rng.random() < KNOWN_AUTHORS:
            # Popular researchers (most papers) write more: rank drawn Zipf-like.
            i = min(len(self.people) - 1, int(len(self.people) ** rng.random()) - 1)
            person = self.people[i]
            return Author(person[0] if name is None else name, person[1], i, institution)
        from demo import words as W

        new_name = name or W.person_name(rng)
        return Author(new_name, _new_s2(new_name), -1, institution)

    # -- arXiv OAI-PMH (arXivRaw)

    def record(self, p: Paper) -> bytes:
        versions = "".join(
            f'<version version="v{n}"><date>{format_datetime(_dt(v), usegmt=True)}</date>'
            f"<size>{100 + n}kb</size><source_type>D</source_type></version>"
            for n, v in enumerate(p.versions, start=1)
        )
        names = [a.name for a in p.authors]
        authors = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        refs = f"<doi>{escape(p.doi)}</doi>" if p.doi else ""
        refs += f"<journal-ref>{escape(p.journal_ref)}</journal-ref>" if p.journal_ref else ""
        return (
            '<record xmlns="http://www.openarchives.org/OAI/2.0/"><header>'
            f"<identifier>oai:arXiv.org:{p.arxiv_id}</identifier><datestamp>2026-12-10</datestamp>"
            "<setSpec>cs:cs:LG</setSpec></header><metadata>"
            '<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/">'
            f"<id>{p.arxiv_id}</id><submitter>{escape(names[0])}</submitter>{versions}"
            f"<title>{escape(p.title)}</title><authors>{escape(authors)}</authors>"
            f"<categories>{' '.join(p.categories)}</categories><comments>12 pages</comments>{refs}"
            "<license>http://creativecommons.org/licenses/by/4.0/</license>"
            f"<abstract>  {escape(p.abstract)}</abstract></arXivRaw></metadata></record>"
        ).encode()

    def pages(self) -> list[bytes]:
        from tests.ingest.conftest import list_records_page

        out = []
        for start in range(0, len(self.papers), PAGE):
            end = start + PAGE
            token = f"skip%3D{end}" if end < len(self.papers) else ""
            out.append(list_records_page([self.record(p) for p in self.papers[start:end]], token, RESPONSE_DATE))
        return out

    # -- Semantic Scholar Graph API

    def s2_paper(self, arxiv_id: str) -> dict[str, Any] | None:
        p = self.by_arxiv.get(arxiv_id)
        if p is None:
            return None
        digest = hashlib.sha1(p.arxiv_id.encode()).hexdigest()
        return {
            "paperId": digest,
            "externalIds": {"ArXiv": p.arxiv_id, "CorpusId": int(digest[:7], 16)},
            "citationCount": p.citations,
            "authors": [{"authorId": a.s2, "name": a.name} for a in p.authors],
        }

    def s2_author(self, s2: str) -> dict[str, Any] | None:
        papers = self.by_s2.get(s2)
        if not papers:
            return None
        person = next((a.person for a in papers[0].authors if a.s2 == s2), -1)
        if person >= 0:
            _, _, _, orcid, count, cites, h = self.people[person][:7]
            # The figures S2 had: unchanged, so the enrichment does not list a prolific researcher's whole career.
            return {
                "authorId": s2,
                "name": self.people[person][0],
                "externalIds": {"ORCID": orcid} if orcid else {},
                "paperCount": count,
                "citationCount": cites,
                "hIndex": h,
            }
        name = next(a.name for a in papers[0].authors if a.s2 == s2)
        return {"authorId": s2, "name": name, "externalIds": {}, "paperCount": len(papers),
                "citationCount": sum(p.citations for p in papers), "hIndex": 1}  # fmt: skip

    def s2_works(self, s2: str, offset: int, limit: int) -> dict[str, Any]:
        papers = self.by_s2.get(s2, [])
        data = [
            {"paperId": hashlib.sha1(p.arxiv_id.encode()).hexdigest(), "externalIds": {"ArXiv": p.arxiv_id},
             "title": p.title, "year": 2026, "citationCount": p.citations}
            for p in papers[offset : offset + limit]
        ]  # fmt: skip
        page: dict[str, Any] = {"offset": offset, "data": data}
        if offset + limit < len(papers):
            page["next"] = offset + limit
        return page

    # -- OpenAlex

    def _institution(self, index: int, *, full: bool) -> dict[str, Any]:
        openalex, ror, name, country, kind = self.institutions[index]
        body: dict[str, Any] = {"id": f"https://openalex.org/{openalex}", "display_name": name,
                                "ror": f"https://ror.org/{ror}", "country_code": country, "type": kind}  # fmt: skip
        if full:
            body |= {"display_name_acronyms": [], "display_name_alternatives": []}
        return body

    def oa_work(self, p: Paper) -> dict[str, Any]:
        authorships = []
        for n, a in enumerate(p.authors, start=1):
            person = self.people[a.person] if a.person >= 0 else None
            authorships.append(
                {
                    "author_position": "first" if n == 1 else "middle",
                    "author": {
                        "id": f"https://openalex.org/{person[2]}" if person and person[2] else None,
                        "display_name": a.name,
                        "orcid": f"https://orcid.org/{person[3]}" if person and person[3] else None,
                    },
                    "institutions": [self._institution(a.institution, full=False)] if a.institution >= 0 else [],
                    "raw_author_name": a.name,
                }
            )
        landing = f"https://arxiv.org/abs/{p.arxiv_id}"
        return {
            "id": f"https://openalex.org/W{7_000_000_000 + int(hashlib.sha1(p.arxiv_id.encode()).hexdigest()[:8], 16)}",
            "doi": f"https://doi.org/10.48550/arxiv.{p.arxiv_id}",
            "type": "preprint",
            "cited_by_count": p.citations,
            "authorships": authorships,
            "primary_location": {"source": ARXIV_SOURCE, "landing_page_url": landing},
            "locations": [{"source": ARXIV_SOURCE, "landing_page_url": landing}],
        }

    def openalex(self, path: str, params: dict[str, str]) -> tuple[int, str, bytes]:
        kind, _, values = params.get("filter", "").partition(":")
        wanted = [v for v in values.split("|") if v]
        results: list[dict[str, Any]] = []
        if path == "/works" and kind == "doi":
            for doi in wanted:
                p = self.by_arxiv.get(doi.lower().removeprefix("10.48550/arxiv."))
                if p is not None:
                    results.append(self.oa_work(p))
        elif path == "/authors" and kind == "openalex":
            for oa in wanted:
                person = self.by_openalex.get(oa)
                if person is not None:
                    results.append({"id": f"https://openalex.org/{oa}",
                                    "orcid": f"https://orcid.org/{person[3]}" if person[3] else None,
                                    "display_name": person[0], "works_count": person[7] or 0,
                                    "cited_by_count": person[8] or 0,
                                    "summary_stats": {"2yr_mean_citedness": 1.0, "h_index": person[9] or 0,
                                                      "i10_index": person[10] or 0}})  # fmt: skip
        elif path == "/institutions" and kind == "openalex":
            index = {i[0]: k for k, i in enumerate(self.institutions)}
            results = [self._institution(index[oa], full=True) for oa in wanted if oa in index]
        else:
            return 404, "text/html", b"<!doctype html><title>404 Not Found</title>"
        return _json({"meta": {"count": len(results), "page": 1, "per_page": 200}, "results": results})


def _new_s2(name: str) -> str:
    return str(9_000_000_000 + int(hashlib.md5(name.encode()).hexdigest()[:8], 16))


def _dt(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def _json(value: object) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(value).encode()


def serve(world_path: Path, port: int) -> None:
    """The three upstreams on 127.0.0.1:`port`: /oai (arXiv), /s2 (the Graph API), /oa (OpenAlex)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    world = World(json.loads(world_path.read_text()))
    pages = world.pages()  # made before listening: serving them costs the measured machine nothing

    def answer(method: str, target: str, body: bytes) -> tuple[int, str, bytes]:
        url = urlsplit(target)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path.startswith("/oai"):
            token = params.get("resumptionToken")
            skip = int(parse_qs(unquote(token))["skip"][0]) if token else 0
            return 200, "text/xml", pages[skip // PAGE]
        if url.path.startswith("/s2"):
            path = url.path.removeprefix("/s2")
            if method == "POST" and path == "/paper/batch":
                return _json([world.s2_paper(i.removeprefix("ARXIV:")) for i in json.loads(body)["ids"]])
            if method == "POST" and path == "/author/batch":
                return _json([world.s2_author(i) for i in json.loads(body)["ids"]])
            if path.startswith("/author/") and path.endswith("/papers"):
                offset, limit = int(params.get("offset", 0)), int(params.get("limit", 100))
                return _json(world.s2_works(path.split("/")[2], offset, limit))
            return 404, "application/json", b'{"error":"Paper with id 0 not found"}'
        return world.openalex(url.path.removeprefix("/oa"), params)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, kind, content = answer(self.command, self.path, body)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = _serve  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


# --------------------------------------------------------------------------------------------- the commands


class IngestDuringLoad:
    """Prepares the world and its upstreams, then runs the harvest and the enrichment as `wovepaper` would."""

    def __init__(self, dsn: str, records: int, seed: int, redis_url: str, api_env: dict[str, str]) -> None:
        self.dsn, self.records, self.seed = dsn, records, seed
        self.redis_url = redis_url
        self.namespace = api_env["WOVEPAPER_CACHE_NAMESPACE"]
        self.upstream: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.report: dict[str, Any] = {"records": records}
        self.current: subprocess.Popen[bytes] | None = None
        self.arxiv_ids: list[str] = []

    async def prepare(self) -> None:
        import localservers

        conn = await asyncpg.connect(self.dsn)
        try:
            started = time.monotonic()
            world = await build_world(conn, self.records, self.seed)
        finally:
            await conn.close()
        self.arxiv_ids = [_new_id(world["first"] + k) for k in range(self.records - len(world["revised"]))]
        self.arxiv_ids += [r[0] for r in world["revised"]]
        path = Path(tempfile.mkdtemp(prefix="traffic-world-")) / "world.json"
        path.write_text(json.dumps(world))
        self.port = localservers.free_port()
        self.upstream = await asyncio.to_thread(
            subprocess.Popen,
            # At the lowest priority: it stands for arXiv's, Semantic Scholar's and OpenAlex's servers, whose CPU is
            # not the host's.
            ["nice", "-n", "19", sys.executable, "-m", "bench.traffic_ingest", "serve", str(path), str(self.port)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
        )
        assert self.upstream.stdout is not None
        line = await asyncio.to_thread(self.upstream.stdout.readline)
        if line.strip() != b"ready":
            raise RuntimeError("the fake upstreams did not start")
        self.report["prepare_s"] = round(time.monotonic() - started, 1)

    def _env(self) -> dict[str, str]:
        base = f"http://127.0.0.1:{self.port}"
        return {
            **os.environ,
            "DATABASE_URL": self.dsn,
            "REDIS_URL": self.redis_url,
            "WOVEPAPER_CACHE_NAMESPACE": self.namespace,
            "WOVEPAPER_ARXIV_OAI_URL": f"{base}/oai",
            "WOVEPAPER_ARXIV_DELAY_S": "0",
            "WOVEPAPER_S2_API_URL": f"{base}/s2",
            "WOVEPAPER_S2_RPS": "1000000",
            "WOVEPAPER_OPENALEX_API_URL": f"{base}/oa",
            "WOVEPAPER_OPENALEX_RPS": "1000000",
            "WOVEPAPER_LOG_FORMAT": "text",
        }

    async def _command(self, name: str, argv: list[str]) -> None:
        started = time.monotonic()
        usage0 = _children_cpu()
        log = Path(tempfile.gettempdir()) / f"traffic-ingest-{name}.log"
        with log.open("wb") as out:
            self.current = await asyncio.to_thread(
                subprocess.Popen,
                [str(ROOT / ".venv" / "bin" / "wovepaper"), "ingest", *argv],
                cwd=ROOT,
                env=self._env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            code = await asyncio.to_thread(self.current.wait)
        self.report[name] = {
            "exit": code,
            "seconds": round(time.monotonic() - started, 1),
            "cpu_s": round(_children_cpu() - usage0, 1),
            "log_tail": log.read_text(errors="replace").strip().splitlines()[-3:],
        }

    async def run(self, *, delay_s: float, enrich_batch: int | None = None) -> None:
        await asyncio.sleep(delay_s)
        self.report["started_into_run_s"] = delay_s
        await self._command("harvest", ["arxiv"])
        batch = ["--batch-size", str(enrich_batch)] if enrich_batch else []
        await self._command("enrich", ["enrich", "--limit", str(self.records), *batch])

    async def finish(self, task: asyncio.Task[None]) -> dict[str, Any]:
        """The report: each command's time and exit status, and how many of the records were harvested and
        enriched by the end of the load. An ingest still running then is interrupted (it resumes from its last
        commit when run again) and reported unfinished."""
        if not task.done():
            self.report["unfinished"] = True
            if self.current is not None and self.current.poll() is None:
                self.current.send_signal(signal.SIGINT)
                try:
                    await asyncio.to_thread(self.current.wait, 60)
                except subprocess.TimeoutExpired:
                    self.current.kill()
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self.upstream is not None:
            self.upstream.terminate()
            self.upstream.wait(10)
        conn = await asyncpg.connect(self.dsn)
        try:
            row = await conn.fetchrow(
                "SELECT count(*) AS harvested, count(enriched_at) AS enriched FROM papers"
                " WHERE arxiv_id = any($1::text[])",
                self.arxiv_ids,
            )
        finally:
            await conn.close()
        self.report["harvested"], self.report["enriched"] = row["harvested"], row["enriched"]
        return self.report


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(__doc__)
