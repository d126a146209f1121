-- What partners and the site look entities up by, and what a merge leaves behind.

-- Semantic Scholar's corpus id: `paper(id: "CorpusId:<n>")`.
ALTER TABLE papers ADD COLUMN s2_corpus_id bigint;
CREATE UNIQUE INDEX papers_s2_corpus_id_key ON papers (s2_corpus_id) WHERE s2_corpus_id IS NOT NULL;

-- An institution's name, aliases and acronyms, folded (case and diacritics ignored): `institution(id: "MIT")`
-- matches one of them exactly, through the GIN index, never by similarity.
CREATE FUNCTION wp_fold_names(text, text[]) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT array_agg(DISTINCT public.wp_fold(n)) FROM unnest(array_prepend($1, $2)) AS n $$;
CREATE INDEX institutions_folded_names_idx ON institutions USING gin (wp_fold_names(name, aliases));

-- A researcher merged into another (Semantic Scholar merged two author ids, or a correction): the old id, its
-- slug and its Semantic Scholar id keep resolving to the survivor, and the changes feed lists the merge.
CREATE TABLE researcher_redirects (
    old_id           bigint PRIMARY KEY,
    survivor_id      bigint NOT NULL REFERENCES researchers (id) ON DELETE CASCADE,
    old_name_slug    text NOT NULL,
    old_s2_author_id text,
    merged_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX researcher_redirects_survivor_idx ON researcher_redirects (survivor_id);
CREATE INDEX researcher_redirects_merged_idx ON researcher_redirects (merged_at, old_id);
CREATE INDEX researcher_redirects_s2_idx ON researcher_redirects (old_s2_author_id)
    WHERE old_s2_author_id IS NOT NULL;

-- Withdrawn papers are few (0.3% of arXiv): their ids, for the statements that leave them out by id.
CREATE INDEX papers_withdrawn_idx ON papers (id) WHERE withdrawn;
