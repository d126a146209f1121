"""Keeping paper vectors current: embed what has no vector, or a stale one, and store it batch by batch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg

from db.queries.embeddings import fetch_papers_to_embed, has_embeddings, upsert_embeddings
from semantic import Embedder, EmbeddingsUnavailable, get_embedder, paper_text, source_md5

DEFAULT_BATCH_SIZE = 64


async def embed_missing(
    pool_or_conn: asyncpg.Pool | asyncpg.Connection,
    limit: int | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    embedder: Embedder | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Embed every paper that has no vector or a stale one (title or abstract changed); return how many.

    At most `limit` papers when given; `on_batch(total so far)` after each batch. Batches commit one by
    one, so an interrupted run keeps its work and the next run resumes. The model runs in a worker thread,
    so the event loop stays free meanwhile.
    Raises EmbeddingsUnavailable when the `semantic` extra is missing or the database has no pgvector.
    """
    if not await has_embeddings(pool_or_conn):
        raise EmbeddingsUnavailable("this database has no pgvector (no paper_embeddings table): nothing to embed")
    model = embedder if embedder is not None else get_embedder()
    done = 0
    after_id = 0
    while limit is None or done < limit:
        take = batch_size if limit is None else min(batch_size, limit - done)
        papers = await fetch_papers_to_embed(pool_or_conn, after_id=after_id, limit=take)
        if not papers:
            break
        texts = [paper_text(p.title, p.abstract) for p in papers]
        vectors = await asyncio.to_thread(model.embed, texts)
        await upsert_embeddings(
            pool_or_conn,
            paper_ids=[p.id for p in papers],
            vectors=vectors,
            source_md5s=[source_md5(p.title, p.abstract) for p in papers],
            model=model.model,
        )
        done += len(papers)
        after_id = papers[-1].id
        if on_batch is not None:
            on_batch(done)
    return done
