"""The papers a question is answered from: the archive's search, within the question's scope.

Hybrid (keyword and semantic, fused) when the embedding model is installed and the database has pgvector,
keyword otherwise. A question is not a search query: its content words are searched all together first,
then (when that finds too few) any of them. A scoped question whose words find little is filled with the
scope's most cited papers, so "summarise this researcher's work" still has the researcher's papers to go on.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg

from db.connection import Conn
from db.filters import PAPER_FILTERS, PAPER_SORTS, Clause, PaperFilterSpec, paper_filter_clauses
from db.queries.papers import PaperRow, fetch_papers_by_ids, page_papers
from db.queries.search.papers import EmptyQuery, SemanticSearchUnavailable, search_papers
from db.queries.search.statement import SEARCH_SORTS, Mode
from semantic import EmbeddingsUnavailable, embed_query

log = logging.getLogger("chat")

TOP_K = 8
# Keyword matches ranked per search (the search page ranks 1,000): a common term's best few papers come from its
# most cited matches anyway, and ranking costs in proportion (on 200,000 papers: 11 ms at 200, 34 ms at 1,000).
KEYWORD_CANDIDATES = 200
MAX_SCOPE_PAPERS = 100
MAX_QUERY_TERMS = 12
ScopeKind = Literal["archive", "paper", "researcher", "institution", "papers"]
SCOPED: tuple[ScopeKind, ...] = ("paper", "researcher", "institution", "papers")

# Words of a question that say what is asked rather than what about: searched, they match half the archive.
_FILLER = frozenset(
    """
    a about above after again all also am an and any are as at be because been before being below between both
    but by can could did do does doing done during each explain explained few find for from further give had has
    have having he her here hers how however i if in into is it its itself just know let like list main make many
    me more most much my need new no nor not now of off on once only or other our out over own paper papers
    please recent research result results said same say says see she should show shows so some studies study such
    summarise summarize summary tell than that the their them then there these they this those through to too
    under until up us use used uses using very was we were what when where which while who whom why will with
    work works would you your
    """.split()
)
_WORD = re.compile(r"[^\W_](?:[\w.+]*[^\W_])?")


def query_terms(question: str) -> list[str]:
    """The content words of a question, in order, at most MAX_QUERY_TERMS (each a plain word, so nothing in
    it reads as search syntax: no quotes, no `-exclusions`, no `OR`)."""
    terms: list[str] = []
    for match in _WORD.finditer(question.lower()):
        for word in match.group(0).replace(".", " ").replace("+", " ").split():
            if len(word) > 1 and word not in _FILLER and word not in terms:
                terms.append(word)
    return terms[:MAX_QUERY_TERMS]


@dataclass(frozen=True, slots=True)
class ChatScope:
    """What a question is about, with every reference resolved to a database id."""

    kind: ScopeKind = "archive"
    # The paper (kind paper), the papers (kind papers, in the page's order), or the researcher or institution.
    ids: tuple[int, ...] = field(default_factory=tuple)

    def clauses(self) -> list[Clause]:
        if self.kind == "researcher":
            return paper_filter_clauses(PaperFilterSpec(researcher_id=self.ids[0]))
        if self.kind == "institution":
            return paper_filter_clauses(PaperFilterSpec(institution_ids=self.ids[:1]))
        if self.kind in ("paper", "papers"):
            return [Clause(PAPER_FILTERS["ids"], (list(self.ids),))]
        return []

    def to_json(self) -> dict[str, Any] | None:
        """As stored with the question (database ids)."""
        if self.kind == "archive":
            return None
        if self.kind == "papers":
            return {"papers": list(self.ids)}
        return {self.kind: self.ids[0]}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ChatScope:
        if not data:
            return cls()
        kind, value = next(iter(data.items()))
        ids = tuple(int(v) for v in value) if isinstance(value, list) else (int(value),)
        for known in SCOPED:
            if kind == known:
                return cls(known, ids)
        return cls()


async def _search(
    conn: Conn, mode: Mode, text: str, vector: list[float] | None, clauses: list[Clause], k: int
) -> list[PaperRow]:
    try:
        result = await search_papers(
            conn,
            mode=mode,
            text=text,
            vector=vector,
            clauses=clauses,
            sort=SEARCH_SORTS["RELEVANCE"],
            limit=k,
            cap=KEYWORD_CANDIDATES,
        )
    except EmptyQuery:
        return []
    return [hit.paper for hit in result.hits]


async def _question_vector(question: str) -> list[float] | None:
    try:
        return await asyncio.to_thread(embed_query, question)
    except EmbeddingsUnavailable as exc:
        log.warning("semantic retrieval unavailable, keyword only: %s", exc)
        return None


async def retrieve(
    pool: asyncpg.Pool,
    question: str,
    scope: ChatScope,
    *,
    k: int = TOP_K,
    semantic: bool = False,
    pinned: Sequence[int] = (),
) -> list[PaperRow]:
    """Up to `k` papers for the question, best first: `pinned` ones (an earlier answer's citations) first.

    `semantic`: try hybrid search (the caller checked that the model is installed and wanted)."""
    found: dict[int, PaperRow] = {}

    def add(rows: Sequence[PaperRow]) -> None:
        for row in rows:
            if len(found) < k:
                found.setdefault(row.id, row)

    async with pool.acquire() as conn:
        if pinned:
            by_id = {p.id: p for p in await fetch_papers_by_ids(conn, pinned)}
            add([by_id[i] for i in pinned if i in by_id])
        if scope.kind == "paper":
            add(await fetch_papers_by_ids(conn, scope.ids))
            return list(found.values())
        clauses = scope.clauses()
        terms = query_terms(question)
        vector = await _question_vector(question) if semantic and terms else None
        if terms and vector is not None:
            try:
                add(await _search(conn, "HYBRID", " or ".join(terms), vector, clauses, k))
            except SemanticSearchUnavailable:
                vector = None  # no pgvector in this database
        if terms and vector is None:
            add(await _search(conn, "KEYWORD", " ".join(terms), None, clauses, k))
            if len(found) < k and len(terms) > 1:
                add(await _search(conn, "KEYWORD", " or ".join(terms), None, clauses, k))
        if len(found) < k and scope.kind == "papers":
            by_id = {p.id: p for p in await fetch_papers_by_ids(conn, scope.ids)}
            add([by_id[i] for i in scope.ids if i in by_id])
        elif len(found) < k and scope.kind in ("researcher", "institution"):
            add(await page_papers(conn, clauses, PAPER_SORTS["MOST_CITED"], limit=k))
    return list(found.values())
