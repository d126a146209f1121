"""arXiv OAI-PMH, Semantic Scholar and OpenAlex answering for the generated matching world, on one loopback HTTP
server, in the formats the real services answer (as tests/acceptance/upstreams.py does for its world)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from tests.ingest.conftest import OAI_CURRENT, list_records_page
from tests.ingest.loopback import http_server
from tests.matching.world import Paper, Person, World

OAI_PAGE = 100
ARXIV_SOURCE = {"id": "https://openalex.org/S4306400194", "display_name": "arXiv (Cornell University)"}


def _json(value: object) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(value).encode()


class Upstreams:
    def __init__(self, world: World) -> None:
        self.world = world
        self.phase = 1
        self.requests = 0
        self._by_s2: dict[str, Person] = {}
        for p in world.people.values():
            for s2 in (p.s2, p.old_s2):
                if s2:
                    self._by_s2[s2] = p
        self._by_oa = {p.openalex: p for p in world.people.values() if p.openalex}

    # -- arXiv ---------------------------------------------------------------------------------------------------

    def _datestamp(self, p: Paper) -> str:
        return "2024-07-15" if p.phase == 2 else "2024-04-20"

    def _record(self, p: Paper) -> bytes:
        names = [s.arxiv for s in p.slots]
        authors = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        v = f'<version version="v1"><date>{format_datetime(p.published, usegmt=True)}</date><size>200kb</size>'
        return (
            '<record xmlns="http://www.openarchives.org/OAI/2.0/"><header>'
            f"<identifier>oai:arXiv.org:{p.arxiv_id}</identifier><datestamp>{self._datestamp(p)}</datestamp>"
            "<setSpec>cs:cs:LG</setSpec></header><metadata>"
            '<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/">'
            f"<id>{p.arxiv_id}</id><submitter>Someone</submitter>{v}<source_type>D</source_type></version>"
            f"<title>{escape(p.title)}</title><authors>{escape(authors)}</authors>"
            "<categories>cs.LG</categories><comments>9 pages</comments>"
            "<license>http://creativecommons.org/licenses/by/4.0/</license>"
            "<abstract>  An abstract.</abstract></arXivRaw></metadata></record>"
        ).encode()

    def oai(self, params: dict[str, str]) -> tuple[int, str, bytes]:
        if params.get("verb") == "Identify":
            return 200, "text/xml", (OAI_CURRENT / "identify.xml").read_bytes()
        since, start = params.get("from", ""), 0
        if "resumptionToken" in params:
            resumed = {k: v[0] for k, v in parse_qs(unquote(params["resumptionToken"])).items()}
            since, start = resumed.get("from", ""), int(resumed["skip"])
        records = [p for p in self.world.papers_in(self.phase) if self._datestamp(p) >= since]
        date = "2024-05-01T00:00:00Z" if self.phase == 1 else "2024-08-01T00:00:00Z"
        if not records:
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
                f"<responseDate>{date}</responseDate><request>oai</request>"
                '<error code="noRecordsMatch">nothing</error></OAI-PMH>'
            ).encode()
            return 200, "text/xml", body
        page = records[start : start + OAI_PAGE]
        token = f"from%3D{since}%26skip%3D{start + OAI_PAGE}" if start + OAI_PAGE < len(records) else ""
        return 200, "text/xml", list_records_page([self._record(p) for p in page], token, date)

    # -- Semantic Scholar ----------------------------------------------------------------------------------------

    def _paper(self, arxiv_id: str) -> dict[str, Any] | None:
        p = next((p for p in self.world.papers_in(self.phase) if p.arxiv_id == arxiv_id and p.s2_known), None)
        if p is None:
            return None
        order = list(range(len(p.slots)))
        if p.s2_swap:
            i, j = p.s2_swap
            order[i], order[j] = order[j], order[i]
        authors = []
        for k in order:
            s = p.slots[k]
            if s.in_s2:
                authors.append({"authorId": s.s2_id, "name": s.s2_name})
        return {
            "paperId": p.s2_paper_id,
            "externalIds": {"ArXiv": p.arxiv_id, "CorpusId": int(p.s2_paper_id[:6], 16)},
            "citationCount": len(p.slots),
            "authors": authors,
        }

    def _works_of(self, asked: str) -> list[Paper]:
        person = self._by_s2.get(asked)
        if person is None:
            return []
        answer = self.world.s2_answer(asked, self.phase)
        ids = {asked} if answer == asked and asked == person.old_s2 else {person.s2, person.old_s2}
        return [
            p
            for p in self.world.papers_in(self.phase)
            if p.s2_known and any(s.in_s2 and s.s2_id in ids for s in p.slots)
        ]

    def _author(self, asked: str) -> dict[str, Any] | None:
        answer = self.world.s2_answer(asked, self.phase)
        person = self._by_s2.get(asked)
        if answer is None or person is None:
            return None
        works = self._works_of(answer)
        external: dict[str, Any] = {"DBLP": [person.name]}
        if person.orcid and int(answer) % 4:
            external["ORCID"] = person.orcid
        return {
            "authorId": answer,
            "name": person.name,
            "externalIds": external,
            "paperCount": len(works),
            "citationCount": sum(len(p.slots) for p in works),
            "hIndex": min(len(works), 3),
        }

    def s2(self, method: str, path: str, params: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        if method == "POST" and path == "/paper/batch":
            return _json([self._paper(i.removeprefix("ARXIV:")) for i in json.loads(body)["ids"]])
        if method == "POST" and path == "/author/batch":
            return _json([self._author(i) for i in json.loads(body)["ids"]])
        if path.startswith("/author/") and path.endswith("/papers"):
            works = self._works_of(path.split("/")[2])
            offset, limit = int(params.get("offset", 0)), int(params.get("limit", 100))
            data = [
                {
                    "paperId": p.s2_paper_id,
                    "externalIds": {"ArXiv": p.arxiv_id},
                    "title": p.title,
                    "year": p.published.year,
                    "citationCount": len(p.slots),
                }
                for p in works[offset : offset + limit]
            ]
            page: dict[str, Any] = {"offset": offset, "data": data}
            if offset + limit < len(works):
                page["next"] = offset + limit
            return _json(page)
        return 404, "application/json", b'{"error":"Paper with id 0 not found"}'

    # -- OpenAlex ------------------------------------------------------------------------------------------------

    @staticmethod
    def _institution_id(ror: str) -> str:
        return f"I9{int(ror[3:7])}"

    def _institution(self, ror: str, *, full: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": f"https://openalex.org/{self._institution_id(ror)}",
            "display_name": f"Institute {ror[3:7]}",
            "ror": f"https://ror.org/{ror}",
            "country_code": "DE",
            "type": "education",
        }
        if full:
            body |= {"display_name_acronyms": [f"I{ror[3:7]}"], "display_name_alternatives": []}
        return body

    def _work(self, p: Paper) -> dict[str, Any]:
        authorships = []
        people = [s for s in p.slots if s.person is not None]
        for n, s in enumerate(people, start=1):
            person = self.world.people[s.person or ""]
            authorships.append(
                {
                    "author_position": "first" if n == 1 else "last" if n == len(people) else "middle",
                    "author": {
                        "id": f"https://openalex.org/{person.openalex}" if person.openalex else None,
                        "display_name": person.name,
                        "orcid": f"https://orcid.org/{person.orcid}" if person.orcid else None,
                    },
                    "institutions": [self._institution(person.ror, full=False)],
                    "raw_author_name": s.oa_raw,
                }
            )
        landing = f"https://arxiv.org/abs/{p.arxiv_id}"
        return {
            "id": f"https://openalex.org/{p.openalex_work}",
            "doi": f"https://doi.org/10.48550/arxiv.{p.arxiv_id}",
            "type": "preprint",
            "cited_by_count": len(p.slots),
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
                for p in self.world.papers_in(self.phase)
                if p.oa_known and f"10.48550/arxiv.{p.arxiv_id}" in wanted
            ]
        elif path == "/authors" and kind == "openalex":
            results = [
                {
                    "id": f"https://openalex.org/{oa}",
                    "orcid": f"https://orcid.org/{p.orcid}" if p.orcid else None,
                    "display_name": p.name,
                    "works_count": 7,
                    "cited_by_count": 70,
                    "summary_stats": {"2yr_mean_citedness": 1.0, "h_index": 3, "i10_index": 1},
                }
                for oa in sorted(wanted)
                if (p := self._by_oa.get(oa)) is not None
            ]
        elif path == "/institutions" and kind == "openalex":
            rors = {self._institution_id(p.ror): p.ror for p in self.world.people.values()}
            results = [self._institution(rors[i], full=True) for i in sorted(wanted) if i in rors]
        else:
            return 404, "text/html", b"<!doctype html><title>404 Not Found</title>"
        return _json({"meta": {"count": len(results), "page": 1, "per_page": 200}, "results": results})


@contextmanager
def serving(state: Upstreams) -> Iterator[str]:
    """The three upstreams on one loopback server: /oai, /s2 (the Graph API's /graph/v1) and /oa."""

    def answer(method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        url = urlsplit(target)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        state.requests += 1
        if url.path.startswith("/oai"):
            status, kind, content = state.oai(params)
        elif url.path.startswith("/s2"):
            status, kind, content = state.s2(method, url.path.removeprefix("/s2"), params, body)
        else:
            status, kind, content = state.openalex(url.path.removeprefix("/oa"), params)
        return status, {"Content-Type": kind}, content

    with http_server(answer) as port:
        yield f"http://127.0.0.1:{port}"
