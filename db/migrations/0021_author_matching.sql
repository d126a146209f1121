-- Semantic Scholar author ids S2 has merged into another (it answers the old id with the survivor's record) or
-- renamed: the old id keeps leading to the survivor's researcher, whether or not one was ever stored under it.
-- Partners hold such ids. A chain (a -> b, then b -> c) is kept flat: every old id names the id S2 uses now.
CREATE TABLE s2_author_redirects (
    old_s2_author_id text PRIMARY KEY,
    s2_author_id     text NOT NULL CHECK (s2_author_id <> old_s2_author_id),
    seen_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX s2_author_redirects_target_idx ON s2_author_redirects (s2_author_id);

-- Why the enrichment linked an authorship to its researcher (`s2/exact`, `s2/variant+orcid`, `openalex/folded`:
-- the source that identified the person, how the names agreed, and the evidence that settled a tie); null for a
-- link made before this was recorded. Adding a nullable column rewrites nothing.
ALTER TABLE authorships ADD COLUMN link_evidence text;

-- Author positions the enrichment left unlinked, and why: `ambiguous` (two candidates fit alike and no evidence
-- told them apart; `candidates` are their S2 ids, `?` for one S2 lists without an id), `no_identity` (the sources
-- list the author but with no id), `no_match` (neither source lists anyone of that name). Rewritten each time the
-- paper is enriched; a position linked since, or replaced by a new author list, loses its row.
CREATE TABLE unlinked_authorships (
    paper_id   bigint NOT NULL,
    position   integer NOT NULL,
    reason     text NOT NULL CHECK (reason IN ('ambiguous', 'no_identity', 'no_match')),
    candidates text[] NOT NULL DEFAULT '{}',
    noted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (paper_id, position),
    FOREIGN KEY (paper_id, position) REFERENCES authorships (paper_id, position) ON DELETE CASCADE
);
CREATE INDEX unlinked_authorships_reason_idx ON unlinked_authorships (reason, noted_at DESC, paper_id, position);
