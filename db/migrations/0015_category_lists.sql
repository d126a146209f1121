-- Category browsing without scanning the category: a paper-category index in the lists' order, and per-category
-- counts. Both hold exactly what `papers(filter: {category})` lists with the default withdrawn filter: every
-- category of a paper that is not withdrawn, cross-lists included, each once. Triggers on papers keep them true
-- for every write (the ingest's upserts, withdrawals, re-categorisation), one statement at a time.

CREATE TABLE paper_categories (
    category  text NOT NULL,
    published timestamptz NOT NULL,
    paper_id  bigint NOT NULL,
    -- Read forwards for the first pages, backwards for the last ones; index only.
    PRIMARY KEY (category, published, paper_id)
);
-- A re-categorised or withdrawn paper's rows are found by paper.
CREATE INDEX paper_categories_paper_idx ON paper_categories (paper_id);

-- Changes are added as signed deltas through INSERT ... ON CONFLICT, whose proposed row carries the delta: no
-- CHECK (papers >= 0) here, it would test the delta, not the sum.
CREATE TABLE category_counts (
    category text PRIMARY KEY,
    papers   integer NOT NULL
);

CREATE FUNCTION wp_paper_listing_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO paper_categories (category, published, paper_id)
    SELECT DISTINCT c, n.published, n.id FROM new_rows n CROSS JOIN unnest(n.categories) AS c WHERE NOT n.withdrawn;
    INSERT INTO category_counts AS t (category, papers)
    SELECT c, count(DISTINCT n.id)::integer FROM new_rows n CROSS JOIN unnest(n.categories) AS c
    WHERE NOT n.withdrawn GROUP BY c ORDER BY c
    ON CONFLICT (category) DO UPDATE SET papers = t.papers + excluded.papers;
    RETURN NULL;
END $$;

CREATE FUNCTION wp_paper_listing_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM paper_categories pc USING old_rows o WHERE pc.paper_id = o.id;
    UPDATE category_counts t SET papers = t.papers - g.n
    FROM (SELECT c, count(DISTINCT o.id)::integer AS n FROM old_rows o CROSS JOIN unnest(o.categories) AS c
          WHERE NOT o.withdrawn GROUP BY c) g
    WHERE t.category = g.c;
    RETURN NULL;
END $$;

-- Most updates (citations, analyses, enrichment) change none of the three columns: only the papers whose
-- categories, date or withdrawal changed are compared row by row.
CREATE FUNCTION wp_paper_listing_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH changed AS (
        SELECT o.id, o.categories AS old_c, o.published AS old_p, o.withdrawn AS old_w,
               n.categories AS new_c, n.published AS new_p, n.withdrawn AS new_w
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (o.categories, o.published, o.withdrawn) IS DISTINCT FROM (n.categories, n.published, n.withdrawn)
    ), was AS (
        SELECT DISTINCT c AS category, ch.old_p AS published, ch.id AS paper_id
        FROM changed ch CROSS JOIN unnest(ch.old_c) AS c WHERE NOT ch.old_w
    ), now_listed AS (
        SELECT DISTINCT c AS category, ch.new_p AS published, ch.id AS paper_id
        FROM changed ch CROSS JOIN unnest(ch.new_c) AS c WHERE NOT ch.new_w
    ), gone AS (
        SELECT * FROM was EXCEPT SELECT * FROM now_listed
    ), came AS (
        SELECT * FROM now_listed EXCEPT SELECT * FROM was
    ), del AS (
        DELETE FROM paper_categories pc USING gone g
        WHERE pc.category = g.category AND pc.published = g.published AND pc.paper_id = g.paper_id
    ), ins AS (
        INSERT INTO paper_categories (category, published, paper_id) SELECT category, published, paper_id FROM came
    ), delta AS (
        -- A paper that only moved in time leaves and arrives in the same category: no change of count.
        SELECT category, sum(d)::integer AS d FROM (
            SELECT DISTINCT category, paper_id, -1 AS d FROM gone
            UNION ALL SELECT DISTINCT category, paper_id, 1 FROM came
        ) x GROUP BY category HAVING sum(d) <> 0
    )
    INSERT INTO category_counts AS t (category, papers)
    SELECT category, d FROM delta ORDER BY category
    ON CONFLICT (category) DO UPDATE SET papers = t.papers + excluded.papers;
    RETURN NULL;
END $$;

CREATE FUNCTION wp_paper_listing_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE paper_categories, category_counts;
    RETURN NULL;
END $$;

-- Everything again from the papers (after a load that ran with the triggers disabled).
CREATE FUNCTION wp_rebuild_paper_listing() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE paper_categories, category_counts;
    INSERT INTO paper_categories (category, published, paper_id)
    SELECT DISTINCT c, p.published, p.id FROM papers p CROSS JOIN unnest(p.categories) AS c WHERE NOT p.withdrawn
    ORDER BY 1, 2, 3;
    INSERT INTO category_counts (category, papers)
    SELECT category, count(*)::integer FROM paper_categories GROUP BY category;
END $$;

CREATE TRIGGER papers_listing_insert AFTER INSERT ON papers
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_paper_listing_insert();
CREATE TRIGGER papers_listing_update AFTER UPDATE ON papers
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_paper_listing_update();
CREATE TRIGGER papers_listing_delete AFTER DELETE ON papers
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_paper_listing_delete();
CREATE TRIGGER papers_listing_truncate AFTER TRUNCATE ON papers
    FOR EACH STATEMENT EXECUTE FUNCTION wp_paper_listing_truncate();

SELECT wp_rebuild_paper_listing();
