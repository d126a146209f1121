-- The reader's feed without reading every paper of what they follow: each followed researcher's and institution's
-- papers in the feed's order (newest first), so a page reads at most a page of rows per follow, from the index
-- alone. authorships and authorship_institutions know no dates, so these listings hold each (owner, paper) pair
-- once with the paper's date and withdrawal (withdrawn papers too: the personal RSS feed lists them), and
-- triggers keep them true for every write of the authorships, the affiliations and the papers' dates or
-- withdrawal, one statement at a time (as migration 0015 keeps paper_categories).

CREATE TABLE researcher_papers (
    researcher_id bigint NOT NULL,
    published     timestamptz NOT NULL,
    paper_id      bigint NOT NULL,
    withdrawn     boolean NOT NULL,
    -- Read backwards from a cursor; the withdrawal tested in the index.
    PRIMARY KEY (researcher_id, published, paper_id) INCLUDE (withdrawn)
);
CREATE INDEX researcher_papers_paper_idx ON researcher_papers (paper_id);

CREATE TABLE institution_papers (
    institution_id bigint NOT NULL,
    published      timestamptz NOT NULL,
    paper_id       bigint NOT NULL,
    withdrawn      boolean NOT NULL,
    PRIMARY KEY (institution_id, published, paper_id) INCLUDE (withdrawn)
);
CREATE INDEX institution_papers_paper_idx ON institution_papers (paper_id);

-- The papers a statement touched are listed again from what their authorships now say: pairs no longer there
-- go, new ones come (a researcher on a paper twice is one pair).
CREATE FUNCTION wp_feed_listing_relist(kind text, ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF kind = 'researcher' THEN
        DELETE FROM researcher_papers l WHERE l.paper_id = ANY (ids) AND NOT EXISTS (
            SELECT 1 FROM authorships a WHERE a.paper_id = l.paper_id AND a.researcher_id = l.researcher_id);
        INSERT INTO researcher_papers (researcher_id, published, paper_id, withdrawn)
        SELECT DISTINCT a.researcher_id, p.published, a.paper_id, p.withdrawn
        FROM authorships a JOIN papers p ON p.id = a.paper_id
        WHERE a.paper_id = ANY (ids) AND a.researcher_id IS NOT NULL
        ORDER BY 1, 2, 3
        ON CONFLICT DO NOTHING;
    ELSE
        DELETE FROM institution_papers l WHERE l.paper_id = ANY (ids) AND NOT EXISTS (
            SELECT 1 FROM authorship_institutions ai
            WHERE ai.paper_id = l.paper_id AND ai.institution_id = l.institution_id);
        INSERT INTO institution_papers (institution_id, published, paper_id, withdrawn)
        SELECT DISTINCT ai.institution_id, p.published, ai.paper_id, p.withdrawn
        FROM authorship_institutions ai JOIN papers p ON p.id = ai.paper_id
        WHERE ai.paper_id = ANY (ids)
        ORDER BY 1, 2, 3
        ON CONFLICT DO NOTHING;
    END IF;
END $$;

CREATE FUNCTION wp_feed_listing_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wp_feed_listing_relist(TG_ARGV[0], ARRAY(SELECT DISTINCT n.paper_id FROM new_rows n));
    RETURN NULL;
END $$;

CREATE FUNCTION wp_feed_listing_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wp_feed_listing_relist(TG_ARGV[0], ARRAY(SELECT DISTINCT o.paper_id FROM old_rows o));
    RETURN NULL;
END $$;

-- Most updates of authorships (names, affiliations' text) move no pair: only rows whose owner or paper changed
-- are listed again.
CREATE FUNCTION wp_feed_listing_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_ARGV[0] = 'researcher' THEN
        PERFORM wp_feed_listing_relist('researcher', ARRAY(
            SELECT o.paper_id FROM old_rows o WHERE NOT EXISTS (
                SELECT 1 FROM new_rows n WHERE n.paper_id = o.paper_id AND n.position = o.position
                AND n.researcher_id IS NOT DISTINCT FROM o.researcher_id)
            UNION
            SELECT n.paper_id FROM new_rows n WHERE NOT EXISTS (
                SELECT 1 FROM old_rows o WHERE o.paper_id = n.paper_id AND o.position = n.position
                AND o.researcher_id IS NOT DISTINCT FROM n.researcher_id)));
    ELSE
        PERFORM wp_feed_listing_relist(TG_ARGV[0], ARRAY(
            SELECT o.paper_id FROM old_rows o UNION SELECT n.paper_id FROM new_rows n));
    END IF;
    RETURN NULL;
END $$;

-- A paper whose date or withdrawal changed moves in every listing that holds it.
CREATE FUNCTION wp_feed_listing_paper_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH changed AS (
        SELECT n.id, n.published, n.withdrawn FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (o.published, o.withdrawn) IS DISTINCT FROM (n.published, n.withdrawn)
    ), r AS (
        UPDATE researcher_papers l SET published = c.published, withdrawn = c.withdrawn
        FROM changed c WHERE l.paper_id = c.id
    )
    UPDATE institution_papers l SET published = c.published, withdrawn = c.withdrawn
    FROM changed c WHERE l.paper_id = c.id;
    RETURN NULL;
END $$;

CREATE FUNCTION wp_feed_listing_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_ARGV[0] = 'researcher' THEN
        TRUNCATE researcher_papers;
    ELSE
        TRUNCATE institution_papers;
    END IF;
    RETURN NULL;
END $$;

-- Everything again from the authorships (after a load that ran with the triggers disabled).
CREATE FUNCTION wp_rebuild_feed_listing() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE researcher_papers, institution_papers;
    INSERT INTO researcher_papers (researcher_id, published, paper_id, withdrawn)
    SELECT DISTINCT a.researcher_id, p.published, a.paper_id, p.withdrawn
    FROM authorships a JOIN papers p ON p.id = a.paper_id WHERE a.researcher_id IS NOT NULL
    ORDER BY 1, 2, 3;
    INSERT INTO institution_papers (institution_id, published, paper_id, withdrawn)
    SELECT DISTINCT ai.institution_id, p.published, ai.paper_id, p.withdrawn
    FROM authorship_institutions ai JOIN papers p ON p.id = ai.paper_id
    ORDER BY 1, 2, 3;
END $$;

CREATE TRIGGER authorships_feed_listing_insert AFTER INSERT ON authorships REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_insert('researcher');
CREATE TRIGGER authorships_feed_listing_update AFTER UPDATE ON authorships
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_update('researcher');
CREATE TRIGGER authorships_feed_listing_delete AFTER DELETE ON authorships REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_delete('researcher');
CREATE TRIGGER authorships_feed_listing_truncate AFTER TRUNCATE ON authorships
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_truncate('researcher');

CREATE TRIGGER affiliations_feed_listing_insert AFTER INSERT ON authorship_institutions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_insert('institution');
CREATE TRIGGER affiliations_feed_listing_update AFTER UPDATE ON authorship_institutions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_update('institution');
CREATE TRIGGER affiliations_feed_listing_delete AFTER DELETE ON authorship_institutions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_delete('institution');
CREATE TRIGGER affiliations_feed_listing_truncate AFTER TRUNCATE ON authorship_institutions
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_truncate('institution');

CREATE TRIGGER papers_feed_listing_update AFTER UPDATE ON papers
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_feed_listing_paper_update();

SELECT wp_rebuild_feed_listing();
