"""arXiv OAI-PMH, Semantic Scholar and OpenAlex for the fictional world, on a loopback HTTP server, in the formats
the real services answer (see tests/ingest/upstreams.py and tests/fixtures/upstream for recorded bodies).

`phase` switches what they answer: phase 2 is the world after its changes (world.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from tests.acceptance import world
from tests.ingest.conftest import OAI_CURRENT, list_records_page
from tests.ingest.loopback import http_server

OAI_PAGE = 8
RESPONSE_DATES = {1: "2024-05-01T00:00:00Z", 2: "2024-08-01T00:00:00Z"}
ARXIV_SOURCE = {"id": "https://openalex.org/S4306400194", "display_name": "arXiv (Cornell University)"}


class World:
    """The upstreams' state: which phase of the world they answer, and every request they were sent."""

    def __init__(self) -> None:
        self.phase = 1
        self.requests: list[str] = []

    # -- arXiv OAI-PMH, arXivRaw ---------------------------------------------------------------------------------

    def _datestamp(self, paper: world.Paper) -> str:
        return "2024-07-15" if paper.phase == 2 else "2024-04-20"

    def _record(self, p: world.Paper) -> bytes:
        versions = "".join(
            f'<version version="v{n}"><date>{format_datetime(v.submitted, usegmt=True)}</date>'
            f"<size>{v.size_kb}kb</size><source_type>{v.source}</source_type></version>"
            for n, v in enumerate(p.versions, start=1)
        )
        names = [f"{a.name} ({a.affiliation})" if a.affiliation else a.name for a in p.authors]
        authors = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        comments = "This paper has been withdrawn by the authors." if p.withdrawn else "12 pages"
        return (
            '<record xmlns="http://www.openarchives.org/OAI/2.0/"><header>'
            f"<identifier>oai:arXiv.org:{p.arxiv_id}</identifier><datestamp>{self._datestamp(p)}</datestamp>"
            f"<setSpec>cs:cs:LG</setSpec></header><metadata>"
            '<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/">'
            f"<id>{p.arxiv_id}</id><submitter>{escape(p.authors[-1].name)}</submitter>{versions}"
            f"<title>{escape(p.title)}</title><authors>{escape(authors)}</authors>"
            f"<categories>{' '.join(p.categories)}</categories><comments>{comments}</comments>"
            + (f"<doi>{p.journal_doi}</doi>" if p.journal_doi else "")
            + "<license>http://creativecommons.org/licenses/by/4.0/</license>"
            f"<abstract>  {escape(p.abstract)}</abstract></arXivRaw></metadata></record>"
        ).encode()

    def oai(self, params: dict[str, str]) -> tuple[int, str, bytes]:
        if params.get("verb") == "Identify":
            return 200, "text/xml", (OAI_CURRENT / "identify.xml").read_bytes()
        since, start = params.get("from", ""), 0
        if "resumptionToken" in params:
            # The token is opaque to clients; here it is the list's query, URL-quoted as arXiv's are.
            resumed = {k: v[0] for k, v in parse_qs(unquote(params["resumptionToken"])).items()}
            since, start = resumed.get("from", ""), int(resumed["skip"])
        records = [p for p in world.papers(self.phase) if self._datestamp(p) >= since]
        if not records:
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
                f"<responseDate>{RESPONSE_DATES[self.phase]}</responseDate><request>oai</request>"
                '<error code="noRecordsMatch">nothing</error></OAI-PMH>'
            ).encode()
            return 200, "text/xml", body
        page = records[start : start + OAI_PAGE]
        token = f"from%3D{since}%26skip%3D{start + OAI_PAGE}" if start + OAI_PAGE < len(records) else ""
        body = list_records_page([self._record(p) for p in page], token, RESPONSE_DATES[self.phase])
        return 200, "text/xml", body

    # -- Semantic Scholar Graph API ------------------------------------------------------------------------------

    def _s2_paper(self, arxiv_id: str) -> dict[str, Any] | None:
        p = next((p for p in world.papers(self.phase) if p.arxiv_id == arxiv_id and p.s2_known), None)
        if p is None:
            return None
        external: dict[str, Any] = {"ArXiv": p.arxiv_id, "CorpusId": p.corpus_id}
        if p.journal_doi:
            external["DOI"] = p.journal_doi
        return {
            "paperId": p.s2_paper_id,
            "externalIds": external,
            "citationCount": p.citations,
            "authors": [{"authorId": world.s2_author_id(a), "name": a.name} for a in p.authors],
        }

    def _canonical(self, s2_id: str) -> str:
        return world.RESEARCHER["ines"].s2 if self.phase >= 2 and s2_id == world.INES_DUPLICATE else s2_id

    def _s2_author(self, s2_id: str) -> dict[str, Any] | None:
        canonical = self._canonical(s2_id)
        works = world.s2_works(canonical, self.phase)
        if not works:
            return None
        name = next(
            (a.name for p in world.papers(self.phase) for a in p.authors if world.s2_author_id(a) == canonical),
            canonical,
        )
        owner = next((r for r in world.RESEARCHERS if r.s2 == canonical), None)
        cites = [w[4] for w in works]
        return {
            "authorId": canonical,
            "name": name,
            "externalIds": {"ORCID": owner.orcid} if owner and owner.orcid else {"DBLP": [name]},
            "paperCount": len(works),
            "citationCount": sum(cites),
            "hIndex": world.h_index(cites),
        }

    def s2(self, method: str, path: str, params: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        if method == "POST" and path == "/paper/batch":
            ids = json.loads(body)["ids"]
            return _json([self._s2_paper(i.removeprefix("ARXIV:")) for i in ids])
        if method == "POST" and path == "/author/batch":
            return _json([self._s2_author(i) for i in json.loads(body)["ids"]])
        if path.startswith("/author/") and path.endswith("/papers"):
            works = world.s2_works(self._canonical(path.split("/")[2]), self.phase)
            offset, limit = int(params.get("offset", 0)), int(params.get("limit", 100))
            data = [
                {
                    "paperId": pid,
                    "externalIds": {k: v for k, v in (("ArXiv", arxiv_id), ("DOI", doi)) if v},
                    "title": f"Work {pid[:6]}",
                    "year": year,
                    "citationCount": cites,
                }
                for pid, arxiv_id, doi, year, cites in works[offset : offset + limit]
            ]
            page: dict[str, Any] = {"offset": offset, "data": data}
            if offset + limit < len(works):
                page["next"] = offset + limit
            return _json(page)
        return 404, "application/json", b'{"error":"Paper with id 0 not found"}'

    # -- OpenAlex ------------------------------------------------------------------------------------------------

    def _institution(self, key: str, *, full: bool) -> dict[str, Any]:
        i = world.INSTITUTION[key]
        body: dict[str, Any] = {
            "id": f"https://openalex.org/{i.openalex}",
            "display_name": i.name,
            "ror": f"https://ror.org/{i.ror}",
            "country_code": i.country,
            "type": i.type,
        }
        if full:
            body |= {"display_name_acronyms": list(i.acronyms), "display_name_alternatives": list(i.alternatives)}
        return body

    def _work(self, p: world.Paper) -> dict[str, Any]:
        authorships = []
        for n, a in enumerate((a for a in p.authors if not a.collaboration), start=1):
            researcher = world.RESEARCHER.get(a.researcher or "")
            authorships.append(
                {
                    "author_position": "first" if n == 1 else "middle",
                    "author": {
                        "id": f"https://openalex.org/{researcher.openalex}"
                        if researcher and researcher.openalex
                        else None,
                        "display_name": a.name,
                        "orcid": f"https://orcid.org/{researcher.orcid}" if researcher and researcher.orcid else None,
                    },
                    "institutions": [self._institution(k, full=False) for k in a.institutions],
                    "raw_author_name": a.name,
                }
            )
        landing = f"https://arxiv.org/abs/{p.arxiv_id}"
        return {
            "id": f"https://openalex.org/{p.openalex_work}",
            "doi": f"https://doi.org/10.48550/arxiv.{p.arxiv_id}",
            "type": "preprint",
            "cited_by_count": p.citations,
            "authorships": authorships,
            "primary_location": {"source": ARXIV_SOURCE, "landing_page_url": landing},
            "locations": [{"source": ARXIV_SOURCE, "landing_page_url": landing}],
        }

    def openalex(self, path: str, params: dict[str, str]) -> tuple[int, str, bytes]:
        kind, _, values = params.get("filter", "").partition(":")
        wanted = set(values.split("|"))
        if path == "/works" and kind == "doi":
            results = [
                self._work(p)
                for p in world.papers(self.phase)
                if p.openalex_known and f"10.48550/arxiv.{p.arxiv_id}" in wanted
            ]
        elif path == "/authors" and kind == "openalex":
            results = []
            for r in world.RESEARCHERS:
                if r.openalex in wanted:
                    works, cites, h, i10 = r.openalex_figures or (1, 0, 0, 0)
                    results.append(
                        {
                            "id": f"https://openalex.org/{r.openalex}",
                            "orcid": f"https://orcid.org/{r.orcid}" if r.orcid else None,
                            "display_name": r.name,
                            "works_count": works,
                            "cited_by_count": cites,
                            "summary_stats": {"2yr_mean_citedness": 1.0, "h_index": h, "i10_index": i10},
                        }
                    )
        elif path == "/institutions" and kind == "openalex":
            results = [self._institution(i.key, full=True) for i in world.INSTITUTIONS if i.openalex in wanted]
        else:
            return 404, "text/html", b"<!doctype html><title>404 Not Found</title>"
        return _json({"meta": {"count": len(results), "page": 1, "per_page": 200}, "results": results})


def _json(value: object) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(value).encode()


@contextmanager
def serving(state: World) -> Iterator[str]:
    """The three upstreams on one loopback server: /oai, /s2 (the Graph API's /graph/v1) and /oa."""

    def answer(method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        url = urlsplit(target)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        state.requests.append(f"{method} {url.path}")
        if url.path.startswith("/oai"):
            status, kind, content = state.oai(params)
        elif url.path.startswith("/s2"):
            status, kind, content = state.s2(method, url.path.removeprefix("/s2"), params, body)
        else:
            status, kind, content = state.openalex(url.path.removeprefix("/oa"), params)
        return status, {"Content-Type": kind}, content

    with http_server(answer) as port:
        yield f"http://127.0.0.1:{port}"
