-- Semantic search within a category: each paper's vector once per category it is in (`paper_category_vectors`,
-- half precision), so that a category big enough for it gets an HNSW index of its own (a partial index,
-- `wovepaper semantic-indexes` builds them) and a small one is scanned exactly, in a few contiguous pages.
--
-- Why: one HNSW index over every vector serves a filter that keeps a few per cent of the papers badly. The graph
-- walk meets mostly papers of other categories, visits thousands of tuples to find 200 of the category (each checked
-- against `papers`), and gives up on some near ones: on 200,000 vectors a 4.3 % category cost p99 284 ms and recall
-- 0.88 in hybrid search (bench/RESULTS.md, Round 15). pgvector's advice for such filters is a partial index per
-- value. A partial index can only read its own table, hence this table; half precision halves its size, and the
-- search re-ranks the candidates by the full vectors of paper_embeddings, so scores are the exact ones.
--
-- Upkeep is by triggers: a vector stored or replaced (ingest's upsert), a paper's categories changed; a paper or
-- vector deleted cascades. `semantic_categories` says, per category, whether its index is built (search uses it)
-- or it is small enough to scan (search scans it); a category it does not list is searched the old way, through
-- the index over all vectors, until `wovepaper semantic-indexes` runs again.
--
-- Only where paper_embeddings exists (pgvector); installing pgvector later: run 0003's and this file's statements
-- by hand. The backfill writes every vector once per category of its paper (about 1.8 rows a paper, 0.8 kB each).

-- Every database has the list (empty without pgvector), so that search reads it without asking whether it exists.
CREATE TABLE semantic_categories (
    category   text PRIMARY KEY,
    vectors    bigint NOT NULL,
    -- true: the partial HNSW index `index_name` is built and valid; false: scanned exactly.
    indexed    boolean NOT NULL,
    index_name text,
    checked_at timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
    IF to_regclass('paper_embeddings') IS NULL THEN
        RAISE NOTICE 'no paper_embeddings (pgvector): no category vectors';
        RETURN;
    END IF;
    EXECUTE $sql$
        CREATE TABLE paper_category_vectors (
            category  text NOT NULL,
            paper_id  bigint NOT NULL REFERENCES paper_embeddings (paper_id) ON DELETE CASCADE,
            embedding halfvec(384) NOT NULL,
            PRIMARY KEY (category, paper_id)
        )
    $sql$;
    -- The triggers and the cascade find a paper's rows by its id.
    EXECUTE 'CREATE INDEX paper_category_vectors_paper_idx ON paper_category_vectors (paper_id)';
    EXECUTE $sql$
        CREATE FUNCTION wp_category_vectors_from_embedding() RETURNS trigger LANGUAGE plpgsql AS $f$
        BEGIN
            DELETE FROM paper_category_vectors WHERE paper_id = NEW.paper_id;
            INSERT INTO paper_category_vectors (category, paper_id, embedding)
            SELECT DISTINCT c, NEW.paper_id, NEW.embedding::halfvec(384)
            FROM papers p, unnest(p.categories) AS c
            WHERE p.id = NEW.paper_id;
            RETURN NULL;
        END
        $f$
    $sql$;
    EXECUTE $sql$
        CREATE FUNCTION wp_category_vectors_from_paper() RETURNS trigger LANGUAGE plpgsql AS $f$
        BEGIN
            DELETE FROM paper_category_vectors WHERE paper_id = NEW.id;
            INSERT INTO paper_category_vectors (category, paper_id, embedding)
            SELECT DISTINCT c, e.paper_id, e.embedding::halfvec(384)
            FROM paper_embeddings e, unnest(NEW.categories) AS c
            WHERE e.paper_id = NEW.id;
            RETURN NULL;
        END
        $f$
    $sql$;
    EXECUTE $sql$
        CREATE TRIGGER paper_embeddings_category_vectors
        AFTER INSERT OR UPDATE OF embedding ON paper_embeddings
        FOR EACH ROW EXECUTE FUNCTION wp_category_vectors_from_embedding()
    $sql$;
    EXECUTE $sql$
        CREATE TRIGGER papers_category_vectors
        AFTER UPDATE OF categories ON papers
        FOR EACH ROW WHEN (OLD.categories IS DISTINCT FROM NEW.categories)
        EXECUTE FUNCTION wp_category_vectors_from_paper()
    $sql$;
    -- In category order, so that a small category's rows sit in a few contiguous pages for its exact scan.
    EXECUTE $sql$
        INSERT INTO paper_category_vectors (category, paper_id, embedding)
        SELECT DISTINCT c, e.paper_id, e.embedding::halfvec(384)
        FROM paper_embeddings e JOIN papers p ON p.id = e.paper_id, unnest(p.categories) AS c
        ORDER BY 1, 2
    $sql$;
END
$$;
