-- Computed columns that let PostGraphile answer the researcher page as the API does. Applied to the
-- benchmark database only (bench/run.py applies it before starting PostGraphile); not a migration.
CREATE OR REPLACE FUNCTION researchers_papers_newest(r researchers) RETURNS SETOF papers
    LANGUAGE sql STABLE AS $$
    SELECT p.* FROM papers p
     WHERE p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a WHERE a.researcher_id = r.id))
       AND NOT p.withdrawn
     ORDER BY p.published DESC, p.id DESC
$$;

CREATE OR REPLACE FUNCTION researchers_most_cited_paper(r researchers) RETURNS papers
    LANGUAGE sql STABLE AS $$
    SELECT p.* FROM papers p
     WHERE p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a WHERE a.researcher_id = r.id))
       AND p.cited_by_count IS NOT NULL
     ORDER BY p.cited_by_count DESC, p.published DESC, p.id LIMIT 1
$$;

-- Positions, fields and citation summary: the same statement the API runs (db/queries/aggregates.py).
CREATE OR REPLACE FUNCTION researchers_page_stats(r researchers) RETURNS jsonb
    LANGUAGE sql STABLE AS $$ SELECT wp_bench_researcher_stats(r.id) $$;
