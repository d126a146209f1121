-- The statement triggers that pair a statement's old rows with its new ones (OLD TABLE JOIN NEW TABLE) plan that
-- join at each call. PL/pgSQL keeps a statement's plan for the session, made with the row counts of the transition
-- tables at its first call: a session whose first update of a table changed one row kept a nested loop over both,
-- and its later updates of thousands of rows compared every old row with every new one. The ingest's connections
-- live for a whole run: a harvest page that stamped 6,682 researchers modified spent 2.4 s in the researchers'
-- trigger against 0.16 s planned for its size (bench/RESULTS.md, round 24). EXECUTE plans each call with the
-- counts it has; planning a statement costs well under a millisecond. (EXECUTE leaves FOUND alone: the row
-- counts come from GET DIAGNOSTICS.) Each body is the latest before this one (0018 for the papers' listings, 0027,
-- 0028), with those statements run through EXECUTE.

CREATE OR REPLACE FUNCTION wp_paper_listing_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE $q$
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
    INSERT INTO category_count_changes (category, papers)
    SELECT category, d FROM delta ORDER BY category
    $q$;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_institution_links_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changes bigint;
BEGIN
    EXECUTE $q$
    INSERT INTO institution_figure_changes (kind, institution_id, key, d)
    SELECT 'm', ai.institution_id, x.rid, sum(x.d)
    FROM (SELECT o.paper_id, o.position, o.researcher_id AS rid, -1 AS d
          FROM old_rows o JOIN new_rows n USING (paper_id, position)
          WHERE o.researcher_id IS DISTINCT FROM n.researcher_id AND o.researcher_id IS NOT NULL
          UNION ALL
          SELECT n.paper_id, n.position, n.researcher_id, 1
          FROM old_rows o JOIN new_rows n USING (paper_id, position)
          WHERE o.researcher_id IS DISTINCT FROM n.researcher_id AND n.researcher_id IS NOT NULL) x
    JOIN authorship_institutions ai ON ai.paper_id = x.paper_id AND ai.position = x.position
    GROUP BY 2, 3 HAVING sum(x.d) <> 0
    $q$;
    GET DIAGNOSTICS changes = ROW_COUNT;
    IF changes > 0 THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_institution_papers_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changes bigint;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        EXECUTE $q$
        WITH changed AS (
            SELECT o.id, o.categories AS old_c, o.primary_category AS old_p, o.withdrawn AS old_w,
                   n.categories AS new_c, n.primary_category AS new_p, n.withdrawn AS new_w
            FROM old_rows o JOIN new_rows n USING (id)
            WHERE (o.categories, o.primary_category, o.withdrawn)
                  IS DISTINCT FROM (n.categories, n.primary_category, n.withdrawn)
        ), moves AS (
            SELECT id, -1 AS sign, old_c AS categories, old_p AS primary_category FROM changed WHERE NOT old_w
            UNION ALL
            SELECT id, 1, new_c, new_p FROM changed WHERE NOT new_w
        ), pairs AS (
            SELECT ip.institution_id, m.* FROM moves m JOIN institution_paper_refs ip ON ip.paper_id = m.id
        )
        INSERT INTO institution_figure_changes (kind, institution_id, category, d, dp)
        SELECT 'f', p.institution_id, c.c, sum(p.sign), coalesce(sum(p.sign) FILTER (WHERE c.c = p.primary_category), 0)
        FROM pairs p CROSS JOIN unnest(p.categories) AS c(c) GROUP BY 2, 3
        UNION ALL
        SELECT 'c', p.institution_id, NULL, sum(p.sign), 0 FROM pairs p GROUP BY 2 HAVING sum(p.sign) <> 0
        $q$;
    ELSE
        WITH pairs AS (
            SELECT ip.institution_id, o.categories, o.primary_category
            FROM old_rows o JOIN institution_paper_refs ip ON ip.paper_id = o.id WHERE NOT o.withdrawn
        )
        INSERT INTO institution_figure_changes (kind, institution_id, category, d, dp)
        SELECT 'f', p.institution_id, c.c, -count(*), -count(*) FILTER (WHERE c.c = p.primary_category)
        FROM pairs p CROSS JOIN unnest(p.categories) AS c(c) GROUP BY 2, 3
        UNION ALL
        SELECT 'c', p.institution_id, NULL, -count(*), 0 FROM pairs p GROUP BY 2;
    END IF;
    GET DIAGNOSTICS changes = ROW_COUNT;
    IF changes > 0 THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_institution_ranks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changes bigint;
BEGIN
    EXECUTE $q$
    INSERT INTO institution_figure_changes (kind, key, d)
    SELECT 'r', n.id, 0
    FROM old_rows o JOIN new_rows n USING (id)
    WHERE (o.h_index, o.citation_count) IS DISTINCT FROM (n.h_index, n.citation_count)
      AND EXISTS (SELECT 1 FROM institution_members m WHERE m.researcher_id = n.id)
    $q$;
    GET DIAGNOSTICS changes = ROW_COUNT;
    IF changes > 0 THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_feed_listing_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_ARGV[0] = 'researcher' THEN
        EXECUTE $q$
        SELECT wp_feed_listing_relist('researcher', ARRAY(
            SELECT o.paper_id FROM old_rows o WHERE NOT EXISTS (
                SELECT 1 FROM new_rows n WHERE n.paper_id = o.paper_id AND n.position = o.position
                AND n.researcher_id IS NOT DISTINCT FROM o.researcher_id)
            UNION
            SELECT n.paper_id FROM new_rows n WHERE NOT EXISTS (
                SELECT 1 FROM old_rows o WHERE o.paper_id = n.paper_id AND o.position = n.position
                AND o.researcher_id IS NOT DISTINCT FROM n.researcher_id)))
        $q$;
    ELSE
        PERFORM wp_feed_listing_relist(TG_ARGV[0], ARRAY(
            SELECT o.paper_id FROM old_rows o UNION SELECT n.paper_id FROM new_rows n));
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_feed_listing_paper_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE $q$
    WITH changed AS (
        SELECT n.id, n.published, n.withdrawn FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (o.published, o.withdrawn) IS DISTINCT FROM (n.published, n.withdrawn)
    ), r AS (
        UPDATE researcher_papers l SET published = c.published, withdrawn = c.withdrawn
        FROM changed c WHERE l.paper_id = c.id
    )
    UPDATE institution_papers l SET published = c.published, withdrawn = c.withdrawn
    FROM changed c WHERE l.paper_id = c.id
    $q$;
    RETURN NULL;
END $$;
