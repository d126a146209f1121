"""Semantic Scholar and OpenAlex behind httpx.MockTransport, answering from recorded bodies.

Papers: PaperQA (arXiv 2312.07559; S2 and OpenAlex bodies recorded), ChemCrow (arXiv 2304.05376;
OpenAlex recorded both its journal version and its preprint as separate works) and a collaboration
paper. Where a body was not recorded (ChemCrow's S2 entry, the authors' figures and works lists), it
is derived in the recorded shape from the names in the recorded bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.ingest.conftest import FIXTURES, list_records_page

S2_PAPERQA = json.loads((FIXTURES / "s2/paper_DOI-10.48550_arxiv.2312.07559_arxiv-paper.json").read_bytes())
OA_PAPERQA = json.loads(
    (FIXTURES / "openalex/works_list_filter-title.search_PaperQA_arxiv-preprint_2025-09-11.json").read_bytes()
)["results"]
OA_CHEMCROW = json.loads(
    (FIXTURES / "openalex/works_list_filter-title.search_journal-plus-arxiv-duplicate_2025-09-11.json").read_bytes()
)["results"]  # [journal W4396723768, preprint W4365597205]
CHEMCROW_JOURNAL_DOI = "10.1038/s42256-024-00832-8"

SAM_COX = "2161337138"
WHITE = "2273941271"
LALA = "2219926382"

S2_CHEMCROW = {
    "paperId": "c4a6a4b5bd02d3b9fcfad1b1aaa5f1bb5d2bd8d3",
    "externalIds": {"ArXiv": "2304.05376", "DOI": CHEMCROW_JOURNAL_DOI, "CorpusId": 258059792},
    "citationCount": 500,
    "authors": [
        {"authorId": "2213849331", "name": "Andrés M Bran"},
        {"authorId": SAM_COX, "name": "Sam Cox"},
        {"authorId": "2166317433", "name": "Oliver Schilter"},
        {"authorId": None, "name": "Carlo Baldassari"},
        {"authorId": WHITE, "name": "Andrew D. White"},
        {"authorId": "1387461473", "name": "P. Schwaller"},
    ],
}
S2_COLLAB = {
    "paperId": "0" * 40,
    "externalIds": {"ArXiv": "2401.00001"},
    "citationCount": 3,
    "authors": [{"authorId": "9999", "name": "ATLAS Collaboration"}, {"authorId": None, "name": "Jane Unknown"}],
}
S2_PAPERS = {"2312.07559": S2_PAPERQA, "2304.05376": S2_CHEMCROW, "2401.00001": S2_COLLAB}

# Each author's whole career: (paperId, ArXiv id or None, year, citationCount).
CAREERS: dict[str, list[tuple[str, str | None, int, int]]] = {
    SAM_COX: [
        (S2_PAPERQA["paperId"], "2312.07559", 2023, 111),
        (S2_CHEMCROW["paperId"], "2304.05376", 2023, 500),
        ("a" * 40, None, 2021, 7),
        ("b" * 40, None, 2020, 1),
    ],
    WHITE: [(S2_PAPERQA["paperId"], "2312.07559", 2023, 111), ("c" * 40, None, 2019, 40)],
}


def arxiv_raw(arxiv_id: str, title: str, authors: str, submitted: datetime, doi: str | None = None) -> bytes:
    """One arXivRaw record in the 2025 server's format."""
    return (
        '<record xmlns="http://www.openarchives.org/OAI/2.0/"><header>'
        f"<identifier>oai:arXiv.org:{arxiv_id}</identifier><datestamp>{submitted:%Y-%m-%d}</datestamp>"
        "<setSpec>cs:cs:AI</setSpec></header><metadata>"
        '<arXivRaw xmlns="http://arxiv.org/OAI/arXivRaw/">'
        f"<id>{arxiv_id}</id><submitter>Someone</submitter>"
        f'<version version="v1"><date>{format_datetime(submitted, usegmt=True)}</date><size>100kb</size>'
        "<source_type>D</source_type></version>"
        f"<title>{title}</title><authors>{authors}</authors><categories>cs.AI cs.CL</categories>"
        + (f"<doi>{doi}</doi>" if doi else "")
        + "<abstract>  An abstract.</abstract></arXivRaw></metadata></record>"
    ).encode()


def enrich_archive_page() -> bytes:
    from datetime import UTC

    return list_records_page(
        [
            arxiv_raw(
                "2312.07559",
                "PaperQA: Retrieval-Augmented Generative Agent for Scientific Research",
                "Jakub L\\'ala, Odhran O'Donoghue, Aleksandar Shtedritski, Sam Cox, Samuel G. Rodriques,"
                " Andrew D. White",
                datetime(2023, 12, 8, 12, 0, tzinfo=UTC),
            ),
            arxiv_raw(
                "2304.05376",
                "ChemCrow: Augmenting large-language models with chemistry tools",
                "Andres M. Bran, Sam Cox, Oliver Schilter, Carlo Baldassari, Andrew D. White, Philippe Schwaller",
                datetime(2023, 4, 11, 12, 0, tzinfo=UTC),
                doi=CHEMCROW_JOURNAL_DOI,
            ),
            arxiv_raw(
                "2401.00001",
                "A Measurement",
                "The ATLAS Collaboration, Jane Unknown",
                datetime(2024, 1, 1, 12, 0, tzinfo=UTC),
            ),
        ],
        "",
    )


def _s2_author(author_id: str) -> dict[str, Any] | None:
    names = {a["authorId"]: a["name"] for p in S2_PAPERS.values() for a in p["authors"] if a["authorId"]}
    if author_id not in names or author_id == "9999":
        return None  # S2 answers null for ids it does not know
    career = CAREERS.get(author_id, [])
    cites = sorted((c for *_, c in career), reverse=True)
    return {
        "authorId": author_id,
        "name": names[author_id],
        "externalIds": {"DBLP": [names[author_id]]},
        "paperCount": len(career),
        "citationCount": sum(cites),
        "hIndex": sum(1 for i, c in enumerate(cites) if c >= i + 1),
    }


def _oa_institutions() -> dict[str, dict[str, Any]]:
    """`/institutions` bodies: the recorded University of Michigan, and for the institutions of the recorded works
    their own fields with the acronyms and other names ROR would give (derived: not recorded)."""
    michigan = json.loads((FIXTURES / "openalex/institution_I27837315_2025-06.json").read_bytes())
    found: dict[str, dict[str, Any]] = {"I27837315": michigan}
    for w in OA_PAPERQA + OA_CHEMCROW:
        for a in w["authorships"]:
            for inst in a["institutions"]:
                words = [word for word in inst["display_name"].replace("-", " ").split() if word[0].isupper()]
                found.setdefault(
                    inst["id"].removeprefix("https://openalex.org/"),
                    {
                        **{k: inst.get(k) for k in ("id", "ror", "display_name", "country_code", "type")},
                        "display_name_acronyms": ["".join(word[0] for word in words)],
                        "display_name_alternatives": [],
                    },
                )
    return found


OA_INSTITUTIONS = _oa_institutions()


def _oa_author(openalex_url: str) -> dict[str, Any]:
    for w in OA_PAPERQA + OA_CHEMCROW:
        for a in w["authorships"]:
            if a["author"]["id"] == openalex_url:
                return {
                    "id": openalex_url,
                    "orcid": a["author"]["orcid"],
                    "display_name": a["author"]["display_name"],
                    "works_count": 12,
                    "cited_by_count": 640,
                    "summary_stats": {"2yr_mean_citedness": 3.0, "h_index": 5, "i10_index": 4},
                }
    raise KeyError(openalex_url)


Responder = Callable[[httpx.Request], httpx.Response]


@dataclass
class FakeScholarly:
    """S2 and OpenAlex in one transport; `script` overrides the n-th request to a host (0-based), with a
    response or a function of the request.

    `author_ids` gives an author of a paper another S2 id ({(arXiv id, 0-based index in S2's list): id}, a duplicate
    profile); `merged` makes S2 answer an author id with another's record, as it does for ids it merged."""

    s2_script: dict[int, httpx.Response | Responder] = field(default_factory=dict)
    oa_script: dict[int, httpx.Response | Responder] = field(default_factory=dict)
    s2_requests: list[httpx.Request] = field(default_factory=list)
    oa_requests: list[httpx.Request] = field(default_factory=list)
    author_ids: dict[tuple[str, int], str] = field(default_factory=dict)
    merged: dict[str, str] = field(default_factory=dict)
    # Changes every JSON body answered (not scripted ones) in place: bad values as an upstream may send them.
    tamper: Callable[[httpx.Request, Any], None] | None = None

    def _paper(self, arxiv_id: str) -> dict[str, Any] | None:
        paper = S2_PAPERS.get(arxiv_id)
        if paper is None:
            return None
        authors = [
            {**a, "authorId": self.author_ids.get((arxiv_id, i), a["authorId"])} for i, a in enumerate(paper["authors"])
        ]
        return {**paper, "authors": authors}

    def _author(self, author_id: str) -> dict[str, Any] | None:
        answered = self.merged.get(author_id, author_id)
        for (arxiv_id, i), alias in self.author_ids.items():
            if alias == answered:
                original = S2_PAPERS[arxiv_id]["authors"][i]
                return {**(_s2_author(original["authorId"]) or {}), "authorId": alias, "paperCount": 1}
        return _s2_author(answered)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "s2.test":
            n = len(self.s2_requests)
            self.s2_requests.append(request)
            return self._scripted(self.s2_script.get(n), request) or self._tampered(request, self._s2(request))
        n = len(self.oa_requests)
        self.oa_requests.append(request)
        return self._scripted(self.oa_script.get(n), request) or self._tampered(request, self._openalex(request))

    def _tampered(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if self.tamper is None or response.status_code != 200:
            return response
        body = json.loads(response.read())
        self.tamper(request, body)
        return httpx.Response(200, json=body)

    @staticmethod
    def _scripted(entry: httpx.Response | Responder | None, request: httpx.Request) -> httpx.Response | None:
        return entry(request) if callable(entry) else entry

    def _s2(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/graph/v1")
        if path == "/paper/batch":
            ids = json.loads(request.content)["ids"]
            return httpx.Response(200, json=[self._paper(i.removeprefix("ARXIV:")) for i in ids])
        if path == "/author/batch":
            return httpx.Response(200, json=[self._author(i) for i in json.loads(request.content)["ids"]])
        if path.startswith("/author/") and path.endswith("/papers"):
            career = CAREERS.get(path.split("/")[2], [])
            offset = int(request.url.params["offset"])
            page = career[offset : offset + 2]  # two a page, so paging is exercised
            data = [
                {
                    "paperId": pid,
                    "externalIds": {"ArXiv": ax} if ax else {},
                    "title": f"Work {pid[:4]}",
                    "year": year,
                    "citationCount": cites,
                }
                for pid, ax, year, cites in page
            ]
            body: dict[str, Any] = {"offset": offset, "data": data}
            if offset + 2 < len(career):
                body["next"] = offset + 2
            return httpx.Response(200, json=body)
        return httpx.Response(404, json={"error": "Paper with id 0 not found"})

    def _openalex(self, request: httpx.Request) -> httpx.Response:
        params = {k: v[0] for k, v in parse_qs(urlsplit(str(request.url)).query).items()}
        kind, _, values = params["filter"].partition(":")
        wanted = set(values.split("|"))
        if request.url.path == "/works" and kind == "doi":
            results = [w for w in OA_PAPERQA + OA_CHEMCROW if w["doi"].removeprefix("https://doi.org/") in wanted]
        elif request.url.path == "/authors" and kind == "openalex":
            results = [_oa_author(f"https://openalex.org/{a}") for a in sorted(wanted)]
        elif request.url.path == "/institutions" and kind == "openalex":
            results = [body for oa_id, body in sorted(OA_INSTITUTIONS.items()) if oa_id in wanted]
        else:
            return httpx.Response(404, text="<!doctype html><title>404 Not Found</title>")
        return httpx.Response(200, json={"meta": {"count": len(results), "page": 1}, "results": results})
