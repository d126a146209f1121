-- Enrichment failures kept per paper, and the ingest's progress per source.

-- A paper whose enrichment could not be written (a value PostgreSQL refuses, a constraint): the rest of its batch
-- is written without it, and it is tried again once `retry_at` has passed, or at once when the paper itself
-- changes (its `modified_at` is no longer the one it failed with). A successful enrichment deletes the row.
CREATE TABLE enrich_failures (
    paper_id          bigint PRIMARY KEY REFERENCES papers (id) ON DELETE CASCADE,
    attempts          integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    reason            text NOT NULL,
    failed_at         timestamptz NOT NULL DEFAULT now(),
    retry_at          timestamptz NOT NULL,
    paper_modified_at timestamptz NOT NULL
);

-- Written in the transaction of every harvested page and enrichment batch, so it counts exactly what committed.
CREATE TABLE ingest_progress (
    source          text PRIMARY KEY,                  -- arxiv:<set or all>, enrich
    records         bigint NOT NULL DEFAULT 0,         -- records read (arXiv) or papers taken off the queue (enrich)
    pages           bigint NOT NULL DEFAULT 0,         -- pages (arXiv) or batches (enrich) committed
    last_success_at timestamptz,                       -- when the last page or batch committed
    caught_up_to    timestamptz                        -- arXiv: the upstream's time the last complete harvest began
);
