-- An institution's page figures kept by every write, in proportion to the write. Counting them on each read cost
-- 0.8 s for the largest institution of 2.5M papers (195,853 papers, 45,730 researchers), and the ingest's refresh
-- counted whole institutions' papers in every page's transaction. Now:
--   institution_paper_refs each (institution, paper) once, with how many affiliation rows make it (refs);
--   institution_fields   per (institution, category): the papers listed in it and those whose primary it is
--                        (FIELDS_OF's definitions over the institution's non-withdrawn papers);
--   institution_members  each researcher of the institution once: refs counts their researcher_institutions row and
--                        their linked authorship positions affiliated there; the ranking keys (h_index,
--                        citation_count) ride along, so the top researchers are an index walk that stops at 100;
--   institution_figures  per institution: its non-withdrawn papers, its members, its researcher_institutions rows.
-- db/queries/institution_figures.py holds the live definitions these are checked against (and rebuilt from).
--
-- The counters are rows every write of an institution shares, and the harvest holds two pages' transactions at
-- once, the later one waiting in Python for the earlier one (migration 0018). So the triggers only note each
-- statement's changes in institution_figure_changes (no key: no write waits on another); a deferred trigger folds
-- them when the transaction commits (or earlier, when the write path asks for its figures), table by table, each
-- in key order, so two folds wait on each other briefly and never deadlock.

CREATE TABLE institution_paper_refs (
    paper_id       bigint NOT NULL,
    institution_id bigint NOT NULL,
    refs           integer NOT NULL,  -- affiliation rows of the paper at the institution
    PRIMARY KEY (paper_id, institution_id)
);

CREATE TABLE institution_fields (
    institution_id bigint NOT NULL,
    category       text NOT NULL,
    papers         integer NOT NULL,
    primary_papers integer NOT NULL,
    PRIMARY KEY (institution_id, category)
);

CREATE TABLE institution_members (
    institution_id bigint NOT NULL,
    researcher_id  bigint NOT NULL,
    refs           integer NOT NULL,  -- 1 for a researcher_institutions row, plus each linked affiliated position
    h_index        integer NOT NULL,
    citation_count integer NOT NULL,
    PRIMARY KEY (institution_id, researcher_id)
);
CREATE INDEX institution_members_rank_idx
    ON institution_members (institution_id, h_index DESC, citation_count DESC, researcher_id);
CREATE INDEX institution_members_researcher_idx ON institution_members (researcher_id);

CREATE TABLE institution_figures (
    institution_id   bigint PRIMARY KEY,
    paper_count      integer NOT NULL,  -- distinct non-withdrawn papers with an affiliation there
    member_count     integer NOT NULL,  -- institution_members rows
    affiliated_count integer NOT NULL   -- researcher_institutions rows (institutions.researcher_count)
);

-- kind: 'p' affiliation rows of (institution, key = paper); 'm' member refs of (institution, key = researcher);
-- 'r' ranking keys of researcher key changed; 'f' category counts of (institution, category); 'c' papers of an
-- institution (a withdrawal); 'a' researcher_institutions rows of an institution.
CREATE TABLE institution_figure_changes (
    kind           "char" NOT NULL,
    institution_id bigint,
    key            bigint,
    category       text,
    d              integer NOT NULL,
    dp             integer NOT NULL DEFAULT 0
);
-- One row per transaction with changes: what the deferred fold fires on (not one firing per change).
CREATE TABLE institution_figure_pending (noted boolean NOT NULL DEFAULT true);

CREATE FUNCTION wp_note_institution_figures() RETURNS void LANGUAGE sql AS $$
    INSERT INTO institution_figure_pending (noted) SELECT true
    WHERE NOT EXISTS (SELECT 1 FROM institution_figure_pending)
$$;

-- A paper's contribution to its institutions' fields: one row per element of its categories, as FIELDS_OF counts.
CREATE FUNCTION wp_fold_institution_figures() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM institution_figure_pending;
    -- The session's scratch table, made once (made again after a DISCARD).
    IF to_regclass('pg_temp.wp_institution_fold') IS NULL THEN
        CREATE TEMP TABLE wp_institution_fold (
            kind "char", institution_id bigint, key bigint, category text, d integer, dp integer
        ) ON COMMIT DELETE ROWS;
    END IF;
    DELETE FROM wp_institution_fold;
    -- Changes of institutions deleted since are dropped (their rows went with them).
    WITH ch AS (DELETE FROM institution_figure_changes RETURNING *)
    INSERT INTO wp_institution_fold
    SELECT ch.kind, ch.institution_id, ch.key, ch.category, sum(ch.d), sum(ch.dp)
    FROM ch
    WHERE ch.kind = 'r' OR EXISTS (SELECT 1 FROM institutions i WHERE i.id = ch.institution_id)
    GROUP BY 1, 2, 3, 4
    HAVING sum(ch.d) <> 0 OR sum(ch.dp) <> 0 OR ch.kind = 'r';
    IF NOT FOUND THEN
        RETURN;
    END IF;

    -- Papers entering or leaving an institution count with their categories as they are now: held, so a
    -- concurrent change of them (whose trigger could not see this transaction's pairs) commits first.
    PERFORM 1 FROM papers p
    WHERE p.id IN (SELECT f.key FROM wp_institution_fold f WHERE f.kind = 'p')
    ORDER BY p.id FOR SHARE;
    WITH up AS (
        INSERT INTO institution_paper_refs AS t (paper_id, institution_id, refs)
        SELECT f.key, f.institution_id, f.d FROM wp_institution_fold f WHERE f.kind = 'p'
        ORDER BY f.key, f.institution_id
        ON CONFLICT (paper_id, institution_id) DO UPDATE SET refs = t.refs + excluded.refs
        RETURNING t.paper_id, t.institution_id, t.refs
    )
    -- 'e': the pair entered (+1) or left (-1).
    INSERT INTO wp_institution_fold (kind, institution_id, key, d, dp)
    SELECT 'e', up.institution_id, up.paper_id, CASE WHEN up.refs > 0 THEN 1 ELSE -1 END, 0
    FROM up JOIN wp_institution_fold f ON f.kind = 'p' AND f.key = up.paper_id AND f.institution_id = up.institution_id
    WHERE (up.refs > 0) <> (up.refs - f.d > 0);
    DELETE FROM institution_paper_refs t
    USING wp_institution_fold f
    WHERE f.kind = 'p' AND t.paper_id = f.key AND t.institution_id = f.institution_id AND t.refs <= 0;

    -- Members: refs, and the ranking keys as the researchers hold them now (for every member row of a researcher
    -- whose keys changed), in one pass in key order.
    WITH wanted AS (
        SELECT f.institution_id, f.key AS researcher_id, f.d FROM wp_institution_fold f WHERE f.kind = 'm'
        UNION ALL
        SELECT m.institution_id, m.researcher_id, 0
        FROM wp_institution_fold f JOIN institution_members m ON m.researcher_id = f.key WHERE f.kind = 'r'
    ), agg AS (
        SELECT w.institution_id, w.researcher_id, sum(w.d)::integer AS d FROM wanted w GROUP BY 1, 2
    ), up AS (
        INSERT INTO institution_members AS t (institution_id, researcher_id, refs, h_index, citation_count)
        SELECT agg.institution_id, agg.researcher_id, agg.d, coalesce(r.h_index, 0), coalesce(r.citation_count, 0)
        FROM agg LEFT JOIN researchers r ON r.id = agg.researcher_id
        ORDER BY agg.institution_id, agg.researcher_id
        ON CONFLICT (institution_id, researcher_id) DO UPDATE
        SET refs = t.refs + excluded.refs, h_index = excluded.h_index, citation_count = excluded.citation_count
        RETURNING t.institution_id, t.researcher_id, t.refs
    )
    INSERT INTO wp_institution_fold (kind, institution_id, key, d, dp)
    SELECT 'n', up.institution_id, up.researcher_id, CASE WHEN up.refs > 0 THEN 1 ELSE -1 END, 0
    FROM up JOIN agg USING (institution_id, researcher_id)
    WHERE (up.refs > 0) <> (up.refs - agg.d > 0);
    DELETE FROM institution_members t
    USING wp_institution_fold f
    WHERE f.kind = 'n' AND f.d < 0 AND t.institution_id = f.institution_id AND t.researcher_id = f.key
      AND t.refs <= 0;

    -- Fields: what statements noted (category changes, withdrawals) and the papers that entered or left.
    WITH delta AS (
        SELECT f.institution_id, f.category, f.d, f.dp FROM wp_institution_fold f WHERE f.kind = 'f'
        UNION ALL
        SELECT e.institution_id, c.c, e.d, CASE WHEN c.c = p.primary_category THEN e.d ELSE 0 END
        FROM wp_institution_fold e JOIN papers p ON p.id = e.key AND NOT p.withdrawn
        CROSS JOIN unnest(p.categories) AS c(c)
        WHERE e.kind = 'e'
    ), summed AS (
        SELECT institution_id, category, sum(d)::integer AS d, sum(dp)::integer AS dp
        FROM delta GROUP BY 1, 2 HAVING sum(d) <> 0 OR sum(dp) <> 0
    ), up AS (
        INSERT INTO institution_fields AS t (institution_id, category, papers, primary_papers)
        SELECT institution_id, category, d, dp FROM summed ORDER BY institution_id, category
        ON CONFLICT (institution_id, category) DO UPDATE
        SET papers = t.papers + excluded.papers, primary_papers = t.primary_papers + excluded.primary_papers
        RETURNING t.institution_id, t.category, t.papers, t.primary_papers
    )
    -- 'z': a field left with no papers (deleted by the next statement, which sees the upsert's rows).
    INSERT INTO wp_institution_fold (kind, institution_id, category, d, dp)
    SELECT 'z', up.institution_id, up.category, 0, 0 FROM up WHERE up.papers = 0 AND up.primary_papers = 0;
    DELETE FROM institution_fields t USING wp_institution_fold z
    WHERE z.kind = 'z' AND t.institution_id = z.institution_id AND t.category = z.category
      AND t.papers = 0 AND t.primary_papers = 0;

    WITH delta AS (
        SELECT f.institution_id, f.d AS papers, 0 AS members, 0 AS affiliated
        FROM wp_institution_fold f WHERE f.kind = 'c'
        UNION ALL
        SELECT e.institution_id, e.d, 0, 0
        FROM wp_institution_fold e JOIN papers p ON p.id = e.key AND NOT p.withdrawn WHERE e.kind = 'e'
        UNION ALL
        SELECT f.institution_id, 0, f.d, 0 FROM wp_institution_fold f WHERE f.kind = 'n'
        UNION ALL
        SELECT f.institution_id, 0, 0, f.d FROM wp_institution_fold f WHERE f.kind = 'a'
    )
    INSERT INTO institution_figures AS t (institution_id, paper_count, member_count, affiliated_count)
    SELECT institution_id, sum(papers), sum(members), sum(affiliated) FROM delta
    GROUP BY institution_id HAVING sum(papers) <> 0 OR sum(members) <> 0 OR sum(affiliated) <> 0
    ORDER BY institution_id
    ON CONFLICT (institution_id) DO UPDATE
    SET paper_count = t.paper_count + excluded.paper_count, member_count = t.member_count + excluded.member_count,
        affiliated_count = t.affiliated_count + excluded.affiliated_count;
    DELETE FROM wp_institution_fold;
END $$;

CREATE FUNCTION wp_fold_institution_figures_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wp_fold_institution_figures();
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER institution_figure_pending_fold AFTER INSERT ON institution_figure_pending
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wp_fold_institution_figures_at_commit();

-- authorship_institutions: each row is a ref of its (institution, paper), and of its position's researcher.
CREATE FUNCTION wp_institution_affiliations_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO institution_figure_changes (kind, institution_id, key, d)
        SELECT 'p', o.institution_id, o.paper_id, -count(*) FROM old_rows o GROUP BY 2, 3;
        -- A position deleted with its authorship (the cascade) is gone here: the authorship's own trigger counted it.
        INSERT INTO institution_figure_changes (kind, institution_id, key, d)
        SELECT 'm', o.institution_id, a.researcher_id, -count(*)
        FROM old_rows o JOIN authorships a ON a.paper_id = o.paper_id AND a.position = o.position
        WHERE a.researcher_id IS NOT NULL GROUP BY 2, 3;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO institution_figure_changes (kind, institution_id, key, d)
        SELECT 'p', n.institution_id, n.paper_id, count(*) FROM new_rows n GROUP BY 2, 3;
        INSERT INTO institution_figure_changes (kind, institution_id, key, d)
        SELECT 'm', n.institution_id, a.researcher_id, count(*)
        FROM new_rows n JOIN authorships a ON a.paper_id = n.paper_id AND a.position = n.position
        WHERE a.researcher_id IS NOT NULL GROUP BY 2, 3;
    END IF;
    PERFORM wp_note_institution_figures();
    RETURN NULL;
END $$;

CREATE TRIGGER authorship_institutions_figures_ins AFTER INSERT ON authorship_institutions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_affiliations_changed();
CREATE TRIGGER authorship_institutions_figures_del AFTER DELETE ON authorship_institutions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_affiliations_changed();
CREATE TRIGGER authorship_institutions_figures_upd AFTER UPDATE ON authorship_institutions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_affiliations_changed();

-- authorships: a link or unlink (matching, corrections, merges, a researcher's delete) moves the position's
-- affiliations from one researcher to the other.
CREATE FUNCTION wp_institution_links_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
    GROUP BY 2, 3 HAVING sum(x.d) <> 0;
    IF FOUND THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER authorships_institution_figures_upd AFTER UPDATE ON authorships
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_links_changed();

-- A linked authorship deleted takes its affiliations with it (the cascade runs after this): its researcher's refs
-- are counted here, while the affiliations are still there to see. Only linked rows fire.
CREATE FUNCTION wp_institution_link_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO institution_figure_changes (kind, institution_id, key, d)
    SELECT 'm', ai.institution_id, OLD.researcher_id, -count(*)
    FROM authorship_institutions ai WHERE ai.paper_id = OLD.paper_id AND ai.position = OLD.position
    GROUP BY ai.institution_id;
    IF FOUND THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN OLD;
END $$;

CREATE TRIGGER authorships_institution_figures_del BEFORE DELETE ON authorships
    FOR EACH ROW WHEN (OLD.researcher_id IS NOT NULL) EXECUTE FUNCTION wp_institution_link_deleted();

-- researcher_institutions: a ref of the member, and the institution's stored researcher_count.
CREATE FUNCTION wp_institution_spans_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO institution_figure_changes (kind, institution_id, key, d)
        SELECT 'm', o.institution_id, o.researcher_id, -1 FROM old_rows o;
        INSERT INTO institution_figure_changes (kind, institution_id, d)
        SELECT 'a', o.institution_id, -count(*) FROM old_rows o GROUP BY 2;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO institution_figure_changes (kind, institution_id, key, d)
        SELECT 'm', n.institution_id, n.researcher_id, 1 FROM new_rows n;
        INSERT INTO institution_figure_changes (kind, institution_id, d)
        SELECT 'a', n.institution_id, count(*) FROM new_rows n GROUP BY 2;
    END IF;
    PERFORM wp_note_institution_figures();
    RETURN NULL;
END $$;

CREATE TRIGGER researcher_institutions_figures_ins AFTER INSERT ON researcher_institutions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_spans_changed();
CREATE TRIGGER researcher_institutions_figures_del AFTER DELETE ON researcher_institutions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_spans_changed();
CREATE TRIGGER researcher_institutions_figures_upd AFTER UPDATE ON researcher_institutions
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_spans_changed();

-- papers: a change of categories, primary category or withdrawal moves the paper's counts in each institution it
-- is in (as folded: a pair this transaction adds counts the paper as it is at the fold); a deleted paper leaves
-- them (its affiliations' refs go with the cascade; at the fold a missing paper counts nothing).
CREATE FUNCTION wp_institution_papers_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
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
        SELECT 'c', p.institution_id, NULL, sum(p.sign), 0 FROM pairs p GROUP BY 2 HAVING sum(p.sign) <> 0;
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
    IF FOUND THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER papers_institution_figures_upd AFTER UPDATE ON papers
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_papers_changed();
CREATE TRIGGER papers_institution_figures_del AFTER DELETE ON papers
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_papers_changed();

-- researchers: new ranking keys reach their member rows at the fold.
CREATE FUNCTION wp_institution_ranks_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO institution_figure_changes (kind, key, d)
    SELECT 'r', n.id, 0
    FROM old_rows o JOIN new_rows n USING (id)
    WHERE (o.h_index, o.citation_count) IS DISTINCT FROM (n.h_index, n.citation_count)
      AND EXISTS (SELECT 1 FROM institution_members m WHERE m.researcher_id = n.id);
    IF FOUND THEN
        PERFORM wp_note_institution_figures();
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER researchers_institution_figures_upd AFTER UPDATE ON researchers
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_ranks_changed();

-- An institution deleted takes its figures with it.
CREATE FUNCTION wp_institution_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM institution_paper_refs t USING old_rows o WHERE t.institution_id = o.id;
    DELETE FROM institution_fields t USING old_rows o WHERE t.institution_id = o.id;
    DELETE FROM institution_members t USING old_rows o WHERE t.institution_id = o.id;
    DELETE FROM institution_figures t USING old_rows o WHERE t.institution_id = o.id;
    RETURN NULL;
END $$;

CREATE TRIGGER institutions_figures_del AFTER DELETE ON institutions
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_deleted();

-- Everything from the live definitions, set-based: after a bulk load (whose triggers are off), a TRUNCATE, or a
-- repair. The same definitions as db/queries/institution_figures.py's LIVE_* statements.
CREATE FUNCTION wp_rebuild_institution_figures() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE institution_paper_refs, institution_fields, institution_members, institution_figures;
    DELETE FROM institution_figure_changes;
    DELETE FROM institution_figure_pending;
    INSERT INTO institution_paper_refs (paper_id, institution_id, refs)
    SELECT ai.paper_id, ai.institution_id, count(*)::integer FROM authorship_institutions ai
    GROUP BY 1, 2 ORDER BY 1, 2;
    INSERT INTO institution_fields (institution_id, category, papers, primary_papers)
    SELECT ip.institution_id, c.c, count(*)::integer, (count(*) FILTER (WHERE c.c = p.primary_category))::integer
    FROM institution_paper_refs ip JOIN papers p ON p.id = ip.paper_id AND NOT p.withdrawn
    CROSS JOIN unnest(p.categories) AS c(c)
    GROUP BY 1, 2 ORDER BY 1, 2;
    -- Counted first, then joined to the researchers for their ranking keys (one probe per member, not per ref).
    INSERT INTO institution_members (institution_id, researcher_id, refs, h_index, citation_count)
    SELECT m.institution_id, m.researcher_id, m.n, r.h_index, r.citation_count
    FROM (SELECT x.institution_id, x.researcher_id, sum(x.n)::integer AS n
          FROM (SELECT ri.institution_id, ri.researcher_id, 1 AS n FROM researcher_institutions ri
                UNION ALL
                SELECT ai.institution_id, a.researcher_id, 1
                FROM authorship_institutions ai
                JOIN authorships a ON a.paper_id = ai.paper_id AND a.position = ai.position
                WHERE a.researcher_id IS NOT NULL) x
          GROUP BY 1, 2) m
    JOIN researchers r ON r.id = m.researcher_id
    ORDER BY 1, 2;
    INSERT INTO institution_figures (institution_id, paper_count, member_count, affiliated_count)
    SELECT i.id, coalesce(p.n, 0), coalesce(m.n, 0), coalesce(a.n, 0)
    FROM institutions i
    LEFT JOIN (SELECT ip.institution_id, count(*)::integer AS n
               FROM institution_paper_refs ip JOIN papers p ON p.id = ip.paper_id AND NOT p.withdrawn GROUP BY 1) p
           ON p.institution_id = i.id
    LEFT JOIN (SELECT institution_id, count(*)::integer AS n FROM institution_members GROUP BY 1) m
           ON m.institution_id = i.id
    LEFT JOIN (SELECT institution_id, count(*)::integer AS n FROM researcher_institutions GROUP BY 1) a
           ON a.institution_id = i.id
    ORDER BY i.id;
END $$;

CREATE FUNCTION wp_institution_sources_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wp_rebuild_institution_figures();
    RETURN NULL;
END $$;

CREATE TRIGGER papers_institution_figures_truncate AFTER TRUNCATE ON papers
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_sources_truncated();
CREATE TRIGGER authorships_institution_figures_truncate AFTER TRUNCATE ON authorships
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_sources_truncated();
CREATE TRIGGER authorship_institutions_figures_truncate AFTER TRUNCATE ON authorship_institutions
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_sources_truncated();
CREATE TRIGGER researcher_institutions_figures_truncate AFTER TRUNCATE ON researcher_institutions
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_sources_truncated();
CREATE TRIGGER researchers_institution_figures_truncate AFTER TRUNCATE ON researchers
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_sources_truncated();
CREATE TRIGGER institutions_figures_truncate AFTER TRUNCATE ON institutions
    FOR EACH STATEMENT EXECUTE FUNCTION wp_institution_sources_truncated();

SELECT wp_rebuild_institution_figures();
ANALYZE institution_paper_refs, institution_fields, institution_members, institution_figures;
