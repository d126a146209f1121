-- Corrections: signed-in researchers claim their profile and fix what the matching got wrong (a paper that is not
-- theirs, one that is, two people on one profile, one person on two), an operator decides what they cannot, and
-- every later write (a re-harvest, an enrichment, a Semantic Scholar merge, an OpenAlex update, the demo loader)
-- keeps what a correction applied.

-- Whether a reader owns the profile: public, with the row (the owner never is). Kept by the trigger on
-- researcher_owners below.
ALTER TABLE researchers ADD COLUMN claimed boolean NOT NULL DEFAULT false;

-- A reader's request and what became of it. `researcher_ids` and `paper_ids` are the ids as asked (a researcher
-- merged away later still reads through researcher_redirects); `fingerprint` names the request (kind and targets),
-- so the same request twice from one reader is one correction while it is pending or in effect. A reader who asked
-- for corrections cannot be deleted with them: what they applied stays applied, and in the profiles' public log.
CREATE TABLE corrections (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    viewer_id         text NOT NULL REFERENCES viewers (id),
    kind              text NOT NULL CHECK (kind IN ('CLAIM', 'NOT_ME', 'IS_ME', 'SPLIT', 'MERGE')),
    status            text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'APPLIED', 'REJECTED')),
    fingerprint       text NOT NULL,
    researcher_ids    bigint[] NOT NULL,
    paper_ids         bigint[] NOT NULL DEFAULT '{}',
    position          integer,                       -- IS_ME: the author position it names
    author_name       text,                          -- IS_ME: that author's name when it was checked
    note              text CHECK (length(note) <= 2000),
    created_at        timestamptz NOT NULL DEFAULT now(),
    decided_at        timestamptz,
    reason            text CHECK (length(reason) <= 2000),   -- why an operator rejected it
    summary           text,                          -- what applying it changed, as the public log says it
    new_researcher_id bigint,                        -- SPLIT: the profile it made; MERGE: the survivor
    superseded_at     timestamptz,                   -- a later correction changed what this one set
    conflicts         integer NOT NULL DEFAULT 0,    -- writes that would have undone it and were kept from it
    last_conflict_at  timestamptz
);
-- A reader's corrections, newest first (Viewer.corrections, and the day's count).
CREATE INDEX corrections_viewer_idx ON corrections (viewer_id, created_at DESC, id DESC);
CREATE INDEX corrections_fingerprint_idx ON corrections (viewer_id, fingerprint);
-- The operators' queue.
CREATE INDEX corrections_pending_idx ON corrections (created_at, id) WHERE status = 'PENDING';
-- The public log of a profile (Researcher.corrections).
CREATE INDEX corrections_applied_researchers_idx ON corrections USING gin (researcher_ids) WHERE status = 'APPLIED';
CREATE INDEX corrections_new_researcher_idx ON corrections (new_researcher_id) WHERE new_researcher_id IS NOT NULL;

-- Every decision on a correction: applied at once (`decided_by` 'auto:orcid' or 'auto:owner'), or by an operator
-- (`wovepaper corrections approve|reject`), with when and why. Never updated.
CREATE TABLE correction_decisions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    correction_id bigint NOT NULL REFERENCES corrections (id) ON DELETE CASCADE,
    decision      text NOT NULL CHECK (decision IN ('APPLIED', 'REJECTED')),
    decided_by    text NOT NULL CHECK (length(decided_by) BETWEEN 1 AND 200),
    decided_at    timestamptz NOT NULL DEFAULT now(),
    reason        text CHECK (length(reason) <= 2000),
    changes       text NOT NULL DEFAULT ''
);
CREATE INDEX correction_decisions_correction_idx ON correction_decisions (correction_id, id);

-- Who owns a profile: one reader at most.
CREATE TABLE researcher_owners (
    researcher_id bigint PRIMARY KEY REFERENCES researchers (id) ON DELETE CASCADE,
    viewer_id     text NOT NULL REFERENCES viewers (id) ON DELETE CASCADE,
    correction_id bigint NOT NULL REFERENCES corrections (id),
    claimed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX researcher_owners_viewer_idx ON researcher_owners (viewer_id);

CREATE FUNCTION wp_keep_claimed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE researchers SET claimed = false WHERE id = OLD.researcher_id AND claimed;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE researchers SET claimed = true WHERE id = NEW.researcher_id AND NOT claimed;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER researcher_owners_claimed AFTER INSERT OR DELETE OR UPDATE OF researcher_id ON researcher_owners
    FOR EACH ROW EXECUTE FUNCTION wp_keep_claimed();

-- What applied corrections say about an authorship link: `mine` (the researcher is an author of the paper: IS_ME,
-- the new profile of a split) or not (NOT_ME, the old profile of a split). `author_name` is the author's name as
-- arXiv gave it when pinned, so that a new version that reorders the authors finds them again.
CREATE TABLE authorship_pins (
    paper_id      bigint NOT NULL REFERENCES papers (id) ON DELETE CASCADE,
    researcher_id bigint NOT NULL REFERENCES researchers (id) ON DELETE CASCADE,
    mine          boolean NOT NULL,
    author_name   text,
    correction_id bigint NOT NULL REFERENCES corrections (id),
    pinned_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (paper_id, researcher_id)
);
CREATE INDEX authorship_pins_researcher_idx ON authorship_pins (researcher_id);
CREATE INDEX authorship_pins_correction_idx ON authorship_pins (correction_id);

-- Whoever links an authorship to a researcher (the enrichment's matches, a re-harvest carrying links over, a merge
-- moving them, the demo loader, any matcher to come), the pins hold: a researcher a correction took off a paper is
-- not linked to it again (the link keeps its value), and a paper a correction put on a profile stays on it (unless
-- the author became a collaboration, or the researcher is being deleted). Each write kept from a pin counts as a
-- conflict on the correction (`wovepaper ingest status`). A correction being applied writes what the pins will say
-- (its transaction sets `wovepaper.correcting`).
CREATE FUNCTION wp_keep_corrections() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('wovepaper.correcting', true) = 'on'
       OR NOT EXISTS (SELECT 1 FROM authorship_pins WHERE paper_id = NEW.paper_id) THEN
        RETURN NEW;
    END IF;
    IF NEW.researcher_id IS NOT NULL THEN
        UPDATE corrections c SET conflicts = c.conflicts + 1, last_conflict_at = now()
        FROM authorship_pins x
        WHERE x.paper_id = NEW.paper_id AND x.researcher_id = NEW.researcher_id AND NOT x.mine
          AND c.id = x.correction_id;
        IF FOUND THEN
            NEW.researcher_id := CASE WHEN TG_OP = 'UPDATE' THEN OLD.researcher_id END;
        END IF;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.researcher_id IS NOT NULL AND NEW.researcher_id IS DISTINCT FROM OLD.researcher_id
       AND NOT NEW.is_collaboration AND EXISTS (SELECT 1 FROM researchers r WHERE r.id = OLD.researcher_id) THEN
        UPDATE corrections c SET conflicts = c.conflicts + 1, last_conflict_at = now()
        FROM authorship_pins x
        WHERE x.paper_id = NEW.paper_id AND x.researcher_id = OLD.researcher_id AND x.mine AND c.id = x.correction_id;
        IF FOUND THEN
            NEW.researcher_id := OLD.researcher_id;
        END IF;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER authorships_keep_corrections_insert BEFORE INSERT ON authorships
    FOR EACH ROW WHEN (NEW.researcher_id IS NOT NULL) EXECUTE FUNCTION wp_keep_corrections();
CREATE TRIGGER authorships_keep_corrections_update BEFORE UPDATE OF researcher_id ON authorships
    FOR EACH ROW WHEN (NEW.researcher_id IS DISTINCT FROM OLD.researcher_id) EXECUTE FUNCTION wp_keep_corrections();

-- A researcher merged into another (by Semantic Scholar, an operator or a reader's request) is not made again under
-- the Semantic Scholar id it was merged away with: the insert is skipped, so the ingest's matches naming that id
-- link nothing and its papers stay with the survivor.
CREATE FUNCTION wp_keep_merges() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM researcher_redirects d WHERE d.old_s2_author_id = NEW.s2_author_id) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER researchers_keep_merges BEFORE INSERT ON researchers
    FOR EACH ROW WHEN (NEW.s2_author_id IS NOT NULL) EXECUTE FUNCTION wp_keep_merges();
