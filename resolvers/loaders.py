"""Per-request DataLoaders: every batch is one SQL statement on its own pool connection."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
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
        # Rows read by page-shaped statements, by id: a by-id load finds them here before it asks the database.
        # A plain dict rather than DataLoader.prime, which builds a resolved Future per row: a page primes
        # hundreds of rows and reads few of them back.
        self._known_papers: dict[int, PaperRow] = {}
        self._known_researchers: dict[int, ResearcherRow] = {}
        self._known_institutions: dict[int, InstitutionRow] = {}
        self._started: dict[Hashable, asyncio.Task[Any]] = {}

    def _batch(
        self, fetch: Callable[[Conn, list[K]], Awaitable[Sequence[V]]]
    ) -> Callable[[list[K]], Awaitable[Sequence[V]]]:
        async def load(keys: list[K]) -> Sequence[V]:
            async with self._pool.acquire() as conn:
                return await fetch(conn, keys)

        return load

    def _by_id(
        self, known: dict[int, V], fetch: Callable[[Conn, list[int]], Awaitable[Sequence[V | None]]]
    ) -> DataLoader[int, V | None]:
        """A by-id loader answering known rows itself and the rest in one statement (`fetch`: rows in key order)."""

        async def load(keys: list[int]) -> list[V | None]:
            missing = [k for k in keys if k not in known]
            if missing:
                async with self._pool.acquire() as conn:
                    found = dict(zip(missing, await fetch(conn, missing), strict=True))
            else:
                found = {}
            return [known[k] if k in known else found[k] for k in keys]

        return DataLoader(load, max_batch_size=MAX_BATCH)

    @staticmethod
    def _prime(known: dict[int, V], rows: Iterable[Any], loader: DataLoader[int, V | None] | None = None) -> None:
        """Rows for later by-id loads. With `loader`: they replace what it already answered (a row read again after
        a write; rare, so its own prime will do); without, the first row known for an id stays."""
        if loader is not None:
            for row in rows:
                known[row.id] = row
                loader.prime(row.id, row, force=True)
        else:
            for row in rows:
                known.setdefault(row.id, row)

    # -- by id -------------------------------------------------------------------------------------

    @cached_property
    def paper_by_id(self) -> DataLoader[int, PaperRow | None]:
        async def fetch(conn: Conn, ids: list[int]) -> list[PaperRow | None]:
            by_id = {row.id: row for row in await fetch_papers_by_ids(conn, ids)}
            return [by_id.get(i) for i in ids]

        return self._by_id(self._known_papers, fetch)

    @cached_property
    def researcher_by_id(self) -> DataLoader[int, ResearcherRow | None]:
        """An id merged into another researcher loads the survivor."""

        async def fetch(conn: Conn, ids: list[int]) -> list[ResearcherRow | None]:
            by_id = dict(await fetch_researchers_following_redirects(conn, ids))
            return [by_id.get(i) for i in ids]

        return self._by_id(self._known_researchers, fetch)

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

        return self._by_id(self._known_institutions, fetch)

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

    def close(self) -> None:
        """Drops the request's loaders and rows once it is answered. Each loader's batch function refers back to
        these loaders (or the request's context), a reference cycle that only the collector's full passes would
        free, and with it every row the request read: dropped here, reference counting frees them at once, and the
        full passes that stall every request in flight stay rare and short. A loader asked for afterwards (work the
        request left running) is made afresh."""
        for name in [name for name, value in vars(self).items() if isinstance(value, DataLoader)]:
            delattr(self, name)
        self._named.clear()
        for task in self._started.values():
            task.cancel()  # started early for a field the answer did not reach (an error, a researcher not found)
        self._started.clear()
        self._known_papers.clear()
        self._known_researchers.clear()
        self._known_institutions.clear()

    def started(self, key: Hashable, start: Callable[[], Awaitable[V]]) -> asyncio.Task[V]:
        """`start()` run once for this request: begun by the first caller, possibly before a parent's row is
        read so that it runs beside that statement, and shared by every later caller (await it shielded)."""
        task = self._started.get(key)
        if task is None:
            task = asyncio.ensure_future(start())
            task.add_done_callback(_retrieve)
            self._started[key] = task
        return task

    # -- priming: rows fetched by page-shaped reads answer later by-id loads -----------------------

    def prime_papers(self, rows: Iterable[PaperRow]) -> None:
        self._prime(self._known_papers, rows)

    def prime_researchers(self, rows: Iterable[ResearcherRow], *, force: bool = False) -> None:
        self._prime(self._known_researchers, rows, self.researcher_by_id if force else None)

    def prime_institutions(self, rows: Iterable[InstitutionRow], *, force: bool = False) -> None:
        self._prime(self._known_institutions, rows, self.institution_by_id if force else None)


def _retrieve(task: asyncio.Task[Any]) -> None:
    # A task started early whose result nobody awaited (the parent was not found): its failure is not news.
    if not task.cancelled():
        task.exception()
