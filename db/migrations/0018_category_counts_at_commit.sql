-- Category counts change at commit. The counts are rows every write of papers shares, and the harvest holds two
-- pages' transactions at once, the later one waiting (in Python, where PostgreSQL cannot see it) for the earlier one
-- to commit: a count row the later page took first made the earlier page wait on it for ever. The triggers now note
-- each statement's changes in category_count_changes (no key, so no write waits on another), and a deferred trigger
-- folds them into category_counts when the transaction commits, in category order.

CREATE TABLE category_count_changes (
    category text NOT NULL,
    papers   integer NOT NULL
);

CREATE FUNCTION wp_fold_category_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Gone already: a rebuild in the same transaction counted everything again.
    DELETE FROM category_count_changes WHERE ctid = NEW.ctid;
    IF FOUND THEN
        INSERT INTO category_counts AS t (category, papers) VALUES (NEW.category, NEW.papers)
        ON CONFLICT (category) DO UPDATE SET papers = t.papers + excluded.papers;
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER category_count_changes_fold AFTER INSERT ON category_count_changes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wp_fold_category_count();

CREATE OR REPLACE FUNCTION wp_paper_listing_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO paper_categories (category, published, paper_id)
    SELECT DISTINCT c, n.published, n.id FROM new_rows n CROSS JOIN unnest(n.categories) AS c WHERE NOT n.withdrawn;
    INSERT INTO category_count_changes (category, papers)
    SELECT c, count(DISTINCT n.id)::integer FROM new_rows n CROSS JOIN unnest(n.categories) AS c
    WHERE NOT n.withdrawn GROUP BY c ORDER BY c;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_paper_listing_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM paper_categories pc USING old_rows o WHERE pc.paper_id = o.id;
    INSERT INTO category_count_changes (category, papers)
    SELECT c, -count(DISTINCT o.id)::integer FROM old_rows o CROSS JOIN unnest(o.categories) AS c
    WHERE NOT o.withdrawn GROUP BY c ORDER BY c;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_paper_listing_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
    INSERT INTO category_count_changes (category, papers)
    SELECT category, d FROM delta ORDER BY category;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_paper_listing_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE paper_categories, category_counts;
    DELETE FROM category_count_changes;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION wp_rebuild_paper_listing() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE paper_categories, category_counts;
    DELETE FROM category_count_changes;
    INSERT INTO paper_categories (category, published, paper_id)
    SELECT DISTINCT c, p.published, p.id FROM papers p CROSS JOIN unnest(p.categories) AS c WHERE NOT p.withdrawn
    ORDER BY 1, 2, 3;
    INSERT INTO category_counts (category, papers)
    SELECT category, count(*)::integer FROM paper_categories GROUP BY category;
END $$;
