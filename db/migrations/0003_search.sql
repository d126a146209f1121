-- Search: paper embeddings for semantic search (only where pgvector is installed) and name-prefix indexes.
--
-- pgvector is optional: on a server without it (Debian's PostgreSQL 15 here) this migration still applies,
-- creates no embedding table, and the API reports semantic search as unavailable. Installing pgvector later
-- needs `CREATE EXTENSION vector` plus the statements below, run by hand (see README, "Search").

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RAISE NOTICE 'pgvector is not installed on this server: semantic search stays unavailable';
        RETURN;
    END IF;
    BEGIN
        EXECUTE 'CREATE EXTENSION IF NOT EXISTS vector';
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'no privilege to create the vector extension: semantic search stays unavailable';
        RETURN;
    END;
    -- A table of its own, not a column of papers: 1.5 kB per vector would double the width of every
    -- papers row that listings and keyword search read.
    EXECUTE $sql$
        CREATE TABLE IF NOT EXISTS paper_embeddings (
            paper_id    bigint PRIMARY KEY REFERENCES papers (id) ON DELETE CASCADE,
            embedding   vector(384) NOT NULL,
            -- md5 of the embedded text (title, newline, abstract): a changed title or abstract re-embeds.
            source_md5  uuid NOT NULL,
            model       text NOT NULL,
            embedded_at timestamptz NOT NULL DEFAULT now()
        )
    $sql$;
    -- Vectors are unit length, so cosine order equals inner-product order; cosine keeps scores readable.
    EXECUTE 'CREATE INDEX IF NOT EXISTS paper_embeddings_hnsw_idx ON paper_embeddings '
            'USING hnsw (embedding vector_cosine_ops)';
END
$$;

-- Autocomplete on one or two letters: a prefix scan of the folded name (trigrams need three letters).
CREATE INDEX researchers_fold_prefix_idx ON researchers (wp_fold(name) text_pattern_ops);
CREATE INDEX institutions_fold_prefix_idx ON institutions (wp_fold(name) text_pattern_ops);
