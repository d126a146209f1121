"""The floor: a hand-written Starlette + asyncpg + orjson endpoint answering the ResearcherPage,
PaperPage and PaperList operations with the same JSON as the API and the same SQL work, with no
GraphQL at all (the body's `operationName` picks the page; PaperList: a category filter, newest first).

    DATABASE_URL=... .venv/bin/python -m uvicorn bench.floor:app --port 8001

It reads `operationName` and `variables` of a POSTed GraphQL body (ResearcherPage: `id` a numeric
researcher id; PaperPage: `id` a bare arXiv id; `page`, `first`) and ignores the query text.
bench/check_same_json.py checks its JSON equals the API's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from db.filters import PAPER_SORTS, Clause, PaperFilterSpec, paper_filter_clauses
from db.paging import encode_global_id, paper_global_id
from db.queries import category_lists
from db.queries.aggregates import SELECT_RESEARCHER_STATS

RESEARCHER = """SELECT id, name, name_slug, s2_author_id, openalex_id, orcid, paper_count, h_index, citation_count,
       works_count, follower_count, claimed, modified_at FROM researchers WHERE id = $1"""
INSTITUTIONS = """SELECT i.id, i.name, i.name_slug, i.country, ri.first_year, ri.last_year
  FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id WHERE ri.researcher_id = $1
 ORDER BY ri.last_year DESC NULLS LAST, i.name, i.id"""
PAPERS = """SELECT p.id, p.arxiv_id, p.slug, p.title, p.abstract, p.authors_text, p.categories, p.primary_category,
       p.published, p.cited_by_count, p.summary, p.topics, p.paper_type, p.research_field, p.novelty,
       p.significance_score, p.analysed
  FROM papers p WHERE p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a WHERE a.researcher_id = $1))
   AND NOT p.withdrawn
 ORDER BY p.published DESC, p.id DESC LIMIT $2 OFFSET $3"""
COUNT = """SELECT count(*) FROM papers p
 WHERE p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a WHERE a.researcher_id = $1)) AND NOT p.withdrawn"""
AUTHORS = """SELECT a.paper_id, a.position, a.name, r.id, r.name, r.name_slug, a.affiliation, a.is_collaboration
  FROM authorships a
  LEFT JOIN researchers r ON r.id = a.researcher_id WHERE a.paper_id = any($1::bigint[])
 ORDER BY a.paper_id, a.position"""
AUTHOR_INSTITUTIONS = """SELECT ai.paper_id, ai.position, i.id, i.name, i.name_slug FROM authorship_institutions ai
  JOIN institutions i ON i.id = ai.institution_id WHERE ai.paper_id = any($1::bigint[])
 ORDER BY ai.paper_id, ai.position, i.name, i.id"""
AUTHOR_INSTITUTIONS_FULL = """SELECT ai.paper_id, ai.position, i.id, i.name, i.name_slug, i.ror_id, i.country
  FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
 WHERE ai.paper_id = any($1::bigint[]) ORDER BY ai.paper_id, ai.position, i.name, i.id"""
MOST_CITED = "SELECT id, arxiv_id, slug, title, cited_by_count FROM papers WHERE id = $1"
PAPER_COLUMNS = """p.id, p.arxiv_id, p.version, p.slug, p.title, p.abstract, p.authors_text, p.categories,
       p.primary_category, p.published, p.updated, p.doi, p.journal_ref, p.comments, p.cited_by_count, p.summary,
       p.topics, p.paper_type, p.research_field, p.novelty, p.significance_score, p.analysed"""
PAPER = f"""SELECT {PAPER_COLUMNS}, p.license, p.withdrawn, p.modified_at, p.s2_paper_id, p.openalex_id
  FROM papers p WHERE p.arxiv_id = $1"""
VERSIONS = """SELECT version, submitted_at, size_kb, source_type FROM paper_versions WHERE paper_id = $1
 ORDER BY version"""
# A category's page and count the way the API reads them (db/queries/category_lists.py): through the
# paper-category index in the list's order, the count from category_counts.
CATEGORY_CLAUSES = paper_filter_clauses(PaperFilterSpec(category="-"))


def category_page(category: str, limit: int, offset: int) -> tuple[str, list[object]]:
    clauses = [CATEGORY_CLAUSES[0], Clause(CATEGORY_CLAUSES[1].fragment, (category,))]
    statement = category_lists.page_statement(clauses, PAPER_SORTS["NEWEST"], PAPER_COLUMNS, limit=limit, offset=offset)
    assert statement is not None
    return statement


def _slug(entity_id: int, name_slug: str) -> str:
    return f"{entity_id}-{name_slug}" if name_slug else str(entity_id)


def _institution(i_id: int, name: str, name_slug: str) -> dict[str, Any]:
    return {
        "id": encode_global_id("Institution", i_id),
        "databaseId": i_id,
        "slug": _slug(i_id, name_slug),
        "name": name,
    }


def paper_item(p: asyncpg.Record, authors: list[dict[str, Any]]) -> dict[str, Any]:
    """A paper as the site's lists show it (ResearcherPage, PaperList)."""
    return {
        "id": paper_global_id(p["arxiv_id"]),
        "databaseId": p["id"],
        "arxivId": p["arxiv_id"],
        "slug": p["slug"],
        "title": p["title"],
        "abstract": p["abstract"],
        "authorsText": p["authors_text"],
        "authors": authors,
        "categories": p["categories"],
        "primaryCategory": p["primary_category"],
        "published": p["published"].isoformat(),
        "absUrl": f"https://arxiv.org/abs/{p['arxiv_id']}",
        "pdfUrl": f"https://arxiv.org/pdf/{p['arxiv_id']}",
        "citedByCount": p["cited_by_count"],
        "summary": p["summary"],
        "topics": p["topics"],
        "paperType": p["paper_type"],
        "researchField": p["research_field"],
        "novelty": p["novelty"],
        "significanceScore": p["significance_score"],
        "analysed": p["analysed"],
    }


async def authors_of(
    conn: asyncpg.Connection, ids: list[int], *, institutions: bool, institution_fields: bool = False
) -> dict[int, list[dict[str, Any]]]:
    """Each paper's authors in order, with their researcher link and (optionally) affiliations."""
    authors: dict[int, list[dict[str, Any]]] = {}
    if not ids:
        return authors
    affiliations: dict[tuple[int, int], list[dict[str, Any]]] = {}
    if institutions:
        sql = AUTHOR_INSTITUTIONS_FULL if institution_fields else AUTHOR_INSTITUTIONS
        for ai in await conn.fetch(sql, ids):
            inst = _institution(ai[2], ai[3], ai[4])
            if institution_fields:
                inst = {**inst, "rorId": ai[5], "country": ai[6]}
            affiliations.setdefault((ai[0], ai[1]), []).append(inst)
    for a in await conn.fetch(AUTHORS, ids):
        person = None
        if a[3] is not None:
            person = {
                "id": encode_global_id("Researcher", a[3]),
                "databaseId": a[3],
                "slug": _slug(a[3], a[5]),
                "name": a[4],
            }
        author: dict[str, Any] = {"position": a[1], "name": a[2], "researcher": person}
        if institution_fields:
            author["affiliation"] = a[6]
            author["isCollaboration"] = a[7]
        if institutions:
            author["institutions"] = affiliations.get((a[0], a[1]), [])
        authors.setdefault(a[0], []).append(author)
    return authors


async def researcher_page(conn: asyncpg.Connection, researcher_id: int, page: int, first: int) -> dict[str, Any] | None:
    r = await conn.fetchrow(RESEARCHER, researcher_id)
    if r is None:
        return None
    rid = r["id"]
    affiliations = [
        {
            "firstYear": i["first_year"],
            "lastYear": i["last_year"],
            "institution": {**_institution(i["id"], i["name"], i["name_slug"]), "country": i["country"]},
        }
        for i in await conn.fetch(INSTITUTIONS, rid)
    ]
    rows = await conn.fetch(PAPERS, rid, first + 1, (page - 1) * first)
    has_next = len(rows) > first
    rows = rows[:first]
    total = await conn.fetchval(COUNT, rid)
    authors = await authors_of(conn, [p["id"] for p in rows], institutions=True)
    stats = await conn.fetchrow(SELECT_RESEARCHER_STATS, rid)
    most_cited = None
    if stats["most_cited_paper_id"] is not None:
        on_page = next((p for p in rows if p["id"] == stats["most_cited_paper_id"]), None)
        m = on_page or await conn.fetchrow(MOST_CITED, stats["most_cited_paper_id"])
        most_cited = {
            "id": paper_global_id(m["arxiv_id"]),
            "databaseId": m["id"],
            "arxivId": m["arxiv_id"],
            "slug": m["slug"],
            "title": m["title"],
            "citedByCount": m["cited_by_count"],
        }
    fields = orjson.loads(stats["fields"]) if isinstance(stats["fields"], str) else stats["fields"]
    return {
        "id": encode_global_id("Researcher", rid),
        "databaseId": rid,
        "slug": _slug(rid, r["name_slug"]),
        "name": r["name"],
        "paperCount": r["paper_count"],
        "hIndex": r["h_index"],
        "citationCount": r["citation_count"],
        "worksCount": r["works_count"],
        "claimed": r["claimed"],
        "externalIds": {"semanticScholar": r["s2_author_id"], "openAlex": r["openalex_id"], "orcid": r["orcid"]},
        "authorPositions": {
            "first": stats["first"],
            "middle": stats["middle"],
            "last": stats["last"],
            "solo": stats["solo"],
            "matchedPapers": stats["matched_papers"],
            "totalPapers": stats["paper_count"],
        },
        "fields": [{"category": c, "count": n, "primaryCount": pn} for c, n, pn in fields],
        "mostCitedPaper": most_cited,
        "citationSummary": {"total": int(stats["citation_total"]), "papersWithCounts": stats["papers_with_counts"]},
        "affiliations": affiliations,
        "followerCount": r["follower_count"],
        "modifiedAt": r["modified_at"].isoformat(),
        "papers": {
            "totalCount": total,
            "totalPages": -(-total // first),
            "pageInfo": {"page": page, "hasNextPage": has_next},
            "nodes": [paper_item(p, authors.get(p["id"], [])) for p in rows],
        },
    }


async def paper_page(conn: asyncpg.Connection, arxiv_id: str) -> dict[str, Any] | None:
    p = await conn.fetchrow(PAPER, arxiv_id)
    if p is None:
        return None
    authors = await authors_of(conn, [p["id"]], institutions=True, institution_fields=True)
    versions = [
        {
            "version": v["version"],
            "submittedAt": v["submitted_at"].isoformat(),
            "sizeKb": v["size_kb"],
            "sourceType": v["source_type"],
        }
        for v in await conn.fetch(VERSIONS, p["id"])
    ]
    return {
        **paper_item(p, authors.get(p["id"], [])),
        "version": p["version"],
        "updated": p["updated"].isoformat(),
        "doi": p["doi"],
        "journalRef": p["journal_ref"],
        "comments": p["comments"],
        "license": p["license"],
        "withdrawn": p["withdrawn"],
        "modifiedAt": p["modified_at"].isoformat(),
        "versions": versions,
        "externalIds": {
            "semanticScholar": p["s2_paper_id"],
            "openAlex": p["openalex_id"],
            "doi": f"10.48550/arXiv.{p['arxiv_id']}",
            "journalDoi": p["doi"],
        },
    }


async def paper_list(conn: asyncpg.Connection, category: str, page: int, first: int) -> dict[str, Any]:
    sql, args = category_page(category, first + 1, (page - 1) * first)
    rows = await conn.fetch(sql, *args)
    has_next = len(rows) > first
    rows = rows[:first]
    total = await conn.fetchval(category_lists.COUNT_SQL, category)
    authors = await authors_of(conn, [p["id"] for p in rows], institutions=False)
    return {
        "totalCount": total,
        "totalPages": -(-total // first),
        "pageInfo": {"page": page, "hasNextPage": has_next},
        "nodes": [paper_item(p, authors.get(p["id"], [])) for p in rows],
    }


async def graphql(request: Request) -> Response:
    body = orjson.loads(await request.body())
    variables = body.get("variables") or {}
    page = int(variables.get("page") or 1)
    first = int(variables.get("first") or 24)
    operation = body.get("operationName") or "ResearcherPage"
    async with request.state.pool.acquire() as conn:
        if operation == "PaperPage":
            data: dict[str, Any] = {"paper": await paper_page(conn, variables["id"])}
        elif operation == "PaperList":
            data = {"papers": await paper_list(conn, variables["filter"]["category"], page, first)}
        else:
            data = {"researcher": await researcher_page(conn, int(variables["id"]), page, first)}
    return Response(orjson.dumps({"data": data}), media_type="application/json")


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
    # Same pool settings as the API's (db/pool.py): no reset round trip on release.
    pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=2, max_size=10, reset=None)
    try:
        yield {"pool": pool}
    finally:
        await pool.close()


app = Starlette(routes=[Route("/graphql", graphql, methods=["POST"])], lifespan=lifespan)
