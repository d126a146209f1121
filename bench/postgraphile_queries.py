"""PostGraphile's equivalent of the ResearcherPage operation, and the map from its answer to ours.

PostGraphile names things from the tables (researcherByRowId, authorshipsByPaperId, ...), gives
bigint as strings and has no global slugs, so check_same_json maps its answer onto the contract's
shape before comparing: same researchers, papers, authors, institutions and figures.
The computed columns it needs are in bench/postgraphile/functions.sql (apply_functions()).
"""

from __future__ import annotations

import math
import struct
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from db.paging import encode_global_id, paper_global_id
from db.queries.aggregates import SELECT_RESEARCHER_STATS

RESEARCHER_PAGE = """
query ResearcherPage($id: BigInt!, $first: Int!, $offset: Int!) {
  researcherByRowId(rowId: $id) {
    rowId name nameSlug paperCount hIndex citationCount worksCount s2AuthorId openalexId orcid followerCount claimed
    modifiedAt
    pageStats
    mostCitedPaper { rowId arxivId slug title citedByCount }
    researcherInstitutionsByResearcherId {
      nodes { firstYear lastYear institutionByInstitutionId { rowId name nameSlug country } }
    }
    papersNewest(first: $first, offset: $offset) {
      totalCount
      pageInfo { hasNextPage }
      nodes {
        rowId arxivId slug title abstract authorsText categories primaryCategory published citedByCount
        summary topics paperType researchField novelty significanceScore analysed
        authorshipsByPaperId(orderBy: POSITION_ASC) {
          nodes {
            position name
            researcherByResearcherId { rowId name nameSlug }
            authorshipInstitutionsByPaperIdAndPosition {
              nodes { institutionByInstitutionId { rowId name nameSlug } }
            }
          }
        }
      }
    }
  }
}
"""

QUERIES = {"ResearcherPage": RESEARCHER_PAGE}


def variables_for(operation: str, variables: dict[str, Any]) -> dict[str, Any]:
    page = int(variables.get("page") or 1)
    first = int(variables.get("first") or 24)
    return {"id": str(variables["id"]), "first": first, "offset": (page - 1) * first}


async def apply_functions(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "CREATE OR REPLACE FUNCTION wp_bench_researcher_stats(bigint) RETURNS jsonb LANGUAGE sql STABLE"
            f" AS $fn$ SELECT to_jsonb(s) FROM ({SELECT_RESEARCHER_STATS}) s $fn$"
        )
        await conn.execute((Path(__file__).parent / "postgraphile" / "functions.sql").read_text())
    finally:
        await conn.close()


def _slug(entity_id: int, name_slug: str) -> str:
    return f"{entity_id}-{name_slug}" if name_slug else str(entity_id)


def _float4(value: float | None) -> float | None:
    # PostgreSQL sends real as text ("0.73"); asyncpg decodes the binary float4 (0.7300000190734863).
    return None if value is None else struct.unpack("f", struct.pack("f", value))[0]


def _timestamp(value: str) -> str:
    return datetime.fromisoformat(value).isoformat()


def _institution(i: dict[str, Any]) -> dict[str, Any]:
    rid = int(i["rowId"])
    return {
        "id": encode_global_id("Institution", rid),
        "databaseId": rid,
        "slug": _slug(rid, i["nameSlug"]),
        "name": i["name"],
    }


def to_contract_shape(body: dict[str, Any]) -> dict[str, Any]:
    r = body["data"]["researcherByRowId"]
    if r is None:
        return {"data": {"researcher": None}}
    rid = int(r["rowId"])
    stats = r["pageStats"]
    links = r["researcherInstitutionsByResearcherId"]["nodes"]
    # The API orders by last year (nulls last), then name and id: PostGraphile orders by last year only.
    links.sort(
        key=lambda n: (
            -(n["lastYear"] or -math.inf),
            n["institutionByInstitutionId"]["name"],
            int(n["institutionByInstitutionId"]["rowId"]),
        )
    )
    papers = r["papersNewest"]
    nodes = []
    for p in papers["nodes"]:
        pid = int(p["rowId"])
        authors = []
        for a in p["authorshipsByPaperId"]["nodes"]:
            person = a["researcherByResearcherId"]
            insts = [
                _institution(x["institutionByInstitutionId"])
                for x in a["authorshipInstitutionsByPaperIdAndPosition"]["nodes"]
            ]
            insts.sort(key=lambda i: (i["name"], i["databaseId"]))
            authors.append(
                {
                    "position": a["position"],
                    "name": a["name"],
                    "researcher": None
                    if person is None
                    else {
                        "id": encode_global_id("Researcher", int(person["rowId"])),
                        "databaseId": int(person["rowId"]),
                        "slug": _slug(int(person["rowId"]), person["nameSlug"]),
                        "name": person["name"],
                    },
                    "institutions": insts,
                }
            )
        nodes.append(
            {
                "id": paper_global_id(p["arxivId"]),
                "databaseId": pid,
                "arxivId": p["arxivId"],
                "slug": p["slug"],
                "title": p["title"],
                "abstract": p["abstract"],
                "authorsText": p["authorsText"],
                "authors": authors,
                "categories": p["categories"],
                "primaryCategory": p["primaryCategory"],
                "published": _timestamp(p["published"]),
                "absUrl": f"https://arxiv.org/abs/{p['arxivId']}",
                "pdfUrl": f"https://arxiv.org/pdf/{p['arxivId']}",
                "citedByCount": p["citedByCount"],
                "summary": p["summary"],
                "topics": p["topics"],
                "paperType": p["paperType"],
                "researchField": p["researchField"],
                "novelty": p["novelty"],
                "significanceScore": _float4(p["significanceScore"]),
                "analysed": p["analysed"],
            }
        )
    m = r["mostCitedPaper"]
    total = int(papers["totalCount"])
    page_size = 24  # the benchmark asks for page 1 of 24
    return {
        "data": {
            "researcher": {
                "id": encode_global_id("Researcher", rid),
                "databaseId": rid,
                "slug": _slug(rid, r["nameSlug"]),
                "name": r["name"],
                "paperCount": r["paperCount"],
                "hIndex": r["hIndex"],
                "citationCount": r["citationCount"],
                "worksCount": r["worksCount"],
                "claimed": r["claimed"],
                "externalIds": {"semanticScholar": r["s2AuthorId"], "openAlex": r["openalexId"], "orcid": r["orcid"]},
                "authorPositions": {
                    "first": stats["first"],
                    "middle": stats["middle"],
                    "last": stats["last"],
                    "solo": stats["solo"],
                    "matchedPapers": stats["matched_papers"],
                    "totalPapers": stats["paper_count"],
                },
                "fields": [{"category": c, "count": n, "primaryCount": pn} for c, n, pn in stats["fields"]],
                "mostCitedPaper": None
                if m is None
                else {
                    "id": paper_global_id(m["arxivId"]),
                    "databaseId": int(m["rowId"]),
                    "arxivId": m["arxivId"],
                    "slug": m["slug"],
                    "title": m["title"],
                    "citedByCount": m["citedByCount"],
                },
                "citationSummary": {
                    "total": int(stats["citation_total"]),
                    "papersWithCounts": stats["papers_with_counts"],
                },
                "affiliations": [
                    {
                        "firstYear": n["firstYear"],
                        "lastYear": n["lastYear"],
                        "institution": {
                            **_institution(n["institutionByInstitutionId"]),
                            "country": n["institutionByInstitutionId"]["country"],
                        },
                    }
                    for n in links
                ],
                "followerCount": r["followerCount"],
                "modifiedAt": _timestamp(r["modifiedAt"]),
                "papers": {
                    "totalCount": total,
                    "totalPages": -(-total // page_size),
                    "pageInfo": {"page": 1, "hasNextPage": papers["pageInfo"]["hasNextPage"]},
                    "nodes": nodes,
                },
            }
        }
    }
