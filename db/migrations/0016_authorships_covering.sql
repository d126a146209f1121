-- A researcher's authorships with their positions, read from the index alone: the statistics statement (and
-- every list of a researcher's papers) walks these by researcher, and needed a heap visit per row for the
-- position. The new index covers what the old one did (same key, same predicate), so the old one goes.
CREATE INDEX authorships_researcher_covering_idx ON authorships (researcher_id, paper_id) INCLUDE (position)
    WHERE researcher_id IS NOT NULL;
DROP INDEX authorships_researcher_idx;
