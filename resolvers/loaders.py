"""Per-request DataLoaders: every batch is one SQL statement on its own pool connection."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from functools import cached_property
from typing import Any, TypeVar

import asyncpg
from strawberry.dataloader import DataLoader

from db.connection import Conn
from db.queries.institutions import (
    AffiliationRow,
    InstitutionRow,
    fetch_affiliations_by_researcher_ids,
    fetch_institutions_by_authorships,
    fetch_institutions_by_ids,
)
from db.queries.papers import (
    AuthorshipRow,
    PaperRow,
    VersionRow,
    fetch_authorships,
    fetch_papers_by_arxiv_ids,
    fetch_papers_by_ids,
    fetch_papers_by_slugs,
    fetch_versions,
)
from db.queries.researchers import ResearcherRow, fetch_merged_ids, fetch_researchers_following_redirects
from db.queries.search.similar import fetch_similar_papers_by_keys

K = TypeVar("K")
V = TypeVar("V")
MAX_BATCH = 500


class Loaders:
    """Built per request; only the loaders a query touches are created."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._named: dict[str, DataLoader[Any, Any]] = {}

    def _batch(
        self, fetch: Callable[[Conn, list[K]], Awaitable[Sequence[V]]]
    ) -> Callable[[list[K]], Awaitable[Sequence[V]]]:
        async def load(keys: list[K]) -> Sequence[V]:
            async with self._pool.acquire() as conn:
                return await fetch(conn, keys)

        return load

    # -- by id -------------------------------------------------------------------------------------

    @cached_property
    def paper_by_id(self) -> DataLoader[int, PaperRow | None]:
        async def fetch(conn: Conn, ids: list[int]) -> list[PaperRow | None]:
            by_id = {row.id: row for row in await fetch_papers_by_ids(conn, ids)}
            return [by_id.get(i) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def researcher_by_id(self) -> DataLoader[int, ResearcherRow | None]:
        """An id merged into another researcher loads the survivor."""

        async def fetch(conn: Conn, ids: list[int]) -> list[ResearcherRow | None]:
            by_id = dict(await fetch_researchers_following_redirects(conn, ids))
            return [by_id.get(i) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def merged_ids_by_researcher_id(self) -> DataLoader[int, list[int]]:
        async def fetch(conn: Conn, ids: list[int]) -> list[list[int]]:
            grouped: defaultdict[int, list[int]] = defaultdict(list)
            for survivor, absorbed in await fetch_merged_ids(conn, ids):
                grouped[survivor].append(absorbed)
            return [grouped.get(i, []) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def institution_by_id(self) -> DataLoader[int, InstitutionRow | None]:
        async def fetch(conn: Conn, ids: list[int]) -> list[InstitutionRow | None]:
            by_id = {row.id: row for row in await fetch_institutions_by_ids(conn, ids)}
            return [by_id.get(i) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    # -- papers by their public ids ----------------------------------------------------------------

    @cached_property
    def paper_by_arxiv_id(self) -> DataLoader[str, PaperRow | None]:
        async def fetch(conn: Conn, arxiv_ids: list[str]) -> list[PaperRow | None]:
            rows = await fetch_papers_by_arxiv_ids(conn, arxiv_ids)
            self.prime_papers(rows)
            by_key = {row.arxiv_id: row for row in rows}
            return [by_key.get(k) for k in arxiv_ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def paper_by_slug(self) -> DataLoader[str, PaperRow | None]:
        async def fetch(conn: Conn, slugs: list[str]) -> list[PaperRow | None]:
            rows = await fetch_papers_by_slugs(conn, slugs)
            self.prime_papers(rows)
            by_key = {row.slug: row for row in rows}
            return [by_key.get(k) for k in slugs]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    # -- relations ---------------------------------------------------------------------------------

    @cached_property
    def authorships_by_paper_id(self) -> DataLoader[int, list[AuthorshipRow]]:
        async def fetch(conn: Conn, ids: list[int]) -> list[list[AuthorshipRow]]:
            grouped: defaultdict[int, list[AuthorshipRow]] = defaultdict(list)
            for row in await fetch_authorships(conn, ids):
                grouped[row.paper_id].append(row)
            return [grouped.get(i, []) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def institutions_by_authorship(self) -> DataLoader[tuple[int, int], list[InstitutionRow]]:
        async def fetch(conn: Conn, keys: list[tuple[int, int]]) -> list[list[InstitutionRow]]:
            grouped: defaultdict[tuple[int, int], list[InstitutionRow]] = defaultdict(list)
            for paper_id, position, row in await fetch_institutions_by_authorships(conn, keys):
                grouped[(paper_id, position)].append(row)
            self.prime_institutions(row for rows in grouped.values() for row in rows)
            return [grouped.get(k, []) for k in keys]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def affiliations_by_researcher_id(self) -> DataLoader[int, list[AffiliationRow]]:
        async def fetch(conn: Conn, ids: list[int]) -> list[list[AffiliationRow]]:
            grouped: defaultdict[int, list[AffiliationRow]] = defaultdict(list)
            for row in await fetch_affiliations_by_researcher_ids(conn, ids):
                grouped[row.researcher_id].append(row)
            self.prime_institutions(a.institution for rows in grouped.values() for a in rows)
            return [grouped.get(i, []) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def versions_by_paper_id(self) -> DataLoader[int, list[VersionRow]]:
        async def fetch(conn: Conn, ids: list[int]) -> list[list[VersionRow]]:
            grouped: defaultdict[int, list[VersionRow]] = defaultdict(list)
            for row in await fetch_versions(conn, ids):
                grouped[row.paper_id].append(row)
            return [grouped.get(i, []) for i in ids]

        return DataLoader(self._batch(fetch), max_batch_size=MAX_BATCH)

    @cached_property
    def similar_papers_by_paper_id(self) -> DataLoader[tuple[int, int], list[PaperRow]]:
        """Key: (paper id, how many). Nearest papers by embedding; empty lists without pgvector."""
        return DataLoader(self._batch(fetch_similar_papers_by_keys), max_batch_size=MAX_BATCH)

    # -- loaders defined next to their resolvers ---------------------------------------------------

    def named(self, name: str, factory: Callable[[], DataLoader[Any, Any]]) -> DataLoader[Any, Any]:
        """A loader built by `factory` once per request under `name` (for loaders whose batch logic
        lives with a resolver module, such as pages of many owners' papers)."""
        loader = self._named.get(name)
        if loader is None:
            loader = self._named[name] = factory()
        return loader

    # -- priming: rows fetched by page-shaped reads answer later by-id loads -----------------------

    def prime_papers(self, rows: Sequence[PaperRow]) -> None:
        loader = self.paper_by_id
        for row in rows:
            loader.prime(row.id, row)

    def prime_researchers(self, rows: Sequence[ResearcherRow], *, force: bool = False) -> None:
        """`force`: replace what the loader holds (a row read again after a write)."""
        loader = self.researcher_by_id
        for row in rows:
            loader.prime(row.id, row, force=force)

    def prime_institutions(self, rows: object, *, force: bool = False) -> None:
        loader = self.institution_by_id
        for row in rows:  # type: ignore[attr-defined]
            loader.prime(row.id, row, force=force)
