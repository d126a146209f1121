-- Signed-in readers: who they are (the site's token subject), whom they follow, their personal feed's secret,
-- and follower counts stored with the researchers and institutions so pages read them with the row.

CREATE TABLE viewers (
    id           text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 255),   -- the token's `sub`
    feed_token   text UNIQUE,                    -- the secret in the personal feed's URL; null until first asked
    follow_count integer NOT NULL DEFAULT 0 CHECK (follow_count >= 0),   -- researchers and institutions
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- `follows` (researchers) predates any code using it: whatever it holds gets its viewers.
INSERT INTO viewers (id) SELECT DISTINCT viewer_id FROM follows;
ALTER TABLE follows ADD CONSTRAINT follows_viewer_fkey FOREIGN KEY (viewer_id) REFERENCES viewers (id) ON DELETE CASCADE;
-- A viewer's follows, most recent first (Viewer.following's order and keyset).
CREATE INDEX follows_viewer_recent_idx ON follows (viewer_id, created_at DESC, researcher_id DESC);

CREATE TABLE institution_follows (
    viewer_id      text NOT NULL REFERENCES viewers (id) ON DELETE CASCADE,
    institution_id bigint NOT NULL REFERENCES institutions (id) ON DELETE CASCADE,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (viewer_id, institution_id)
);
CREATE INDEX institution_follows_viewer_recent_idx
    ON institution_follows (viewer_id, created_at DESC, institution_id DESC);
CREATE INDEX institution_follows_institution_idx ON institution_follows (institution_id);

-- A constant default: no table rewrite.
ALTER TABLE researchers ADD COLUMN follower_count integer NOT NULL DEFAULT 0;
ALTER TABLE institutions ADD COLUMN follower_count integer NOT NULL DEFAULT 0;
UPDATE researchers r SET follower_count = c.n
FROM (SELECT researcher_id, count(*) AS n FROM follows GROUP BY researcher_id) c WHERE r.id = c.researcher_id;
UPDATE viewers v SET follow_count = c.n
FROM (SELECT viewer_id, count(*) AS n FROM follows GROUP BY viewer_id) c WHERE v.id = c.viewer_id;

-- The counts follow every insert and delete of a follow, whoever writes it (a cascade from a deleted researcher
-- or viewer, a merge moving follows): an atomic increment under the row lock, so concurrent follows lose none.
-- TG_ARGV: the followed table and its id's column in the follows table.
CREATE FUNCTION wp_count_follows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    followed text := TG_ARGV[0];
    followed_id text := TG_ARGV[1];
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        EXECUTE format('UPDATE %I SET follower_count = follower_count - 1 WHERE id = $1', followed)
            USING (to_jsonb(OLD) ->> followed_id)::bigint;
        UPDATE viewers SET follow_count = follow_count - 1 WHERE id = OLD.viewer_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        EXECUTE format('UPDATE %I SET follower_count = follower_count + 1 WHERE id = $1', followed)
            USING (to_jsonb(NEW) ->> followed_id)::bigint;
        UPDATE viewers SET follow_count = follow_count + 1 WHERE id = NEW.viewer_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER follows_count AFTER INSERT OR DELETE OR UPDATE OF viewer_id, researcher_id ON follows
    FOR EACH ROW EXECUTE FUNCTION wp_count_follows('researchers', 'researcher_id');
CREATE TRIGGER institution_follows_count AFTER INSERT OR DELETE OR UPDATE OF viewer_id, institution_id
    ON institution_follows FOR EACH ROW EXECUTE FUNCTION wp_count_follows('institutions', 'institution_id');

-- Follow a researcher (`kind` 'researcher') or an institution ('institution'), at most `cap` follows per viewer.
-- Answers 'followed', 'following' (already: nothing written), 'limit' or 'not_found'. One statement for the
-- caller, so the check and the write cannot be separated: the viewer's row lock serialises their own follows
-- (the cap holds under concurrent requests), and each statement below reads what committed before it.
CREATE FUNCTION wp_follow(p_viewer text, p_kind text, p_target bigint, p_cap integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    IF p_kind = 'researcher' THEN
        PERFORM 1 FROM researchers WHERE id = p_target;
    ELSIF p_kind = 'institution' THEN
        PERFORM 1 FROM institutions WHERE id = p_target;
    ELSE
        RAISE EXCEPTION 'unknown kind %', p_kind;
    END IF;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    INSERT INTO viewers (id) VALUES (p_viewer) ON CONFLICT (id) DO NOTHING;
    SELECT follow_count INTO n FROM viewers WHERE id = p_viewer FOR UPDATE;
    IF p_kind = 'researcher' THEN
        PERFORM 1 FROM follows WHERE viewer_id = p_viewer AND researcher_id = p_target;
    ELSE
        PERFORM 1 FROM institution_follows WHERE viewer_id = p_viewer AND institution_id = p_target;
    END IF;
    IF FOUND THEN
        RETURN 'following';
    END IF;
    IF n >= p_cap THEN
        RETURN 'limit';
    END IF;
    IF p_kind = 'researcher' THEN
        INSERT INTO follows (viewer_id, researcher_id) VALUES (p_viewer, p_target);
    ELSE
        INSERT INTO institution_follows (viewer_id, institution_id) VALUES (p_viewer, p_target);
    END IF;
    RETURN 'followed';
EXCEPTION WHEN foreign_key_violation THEN
    -- Deleted between the look-up and the insert.
    RETURN 'not_found';
END $$;
