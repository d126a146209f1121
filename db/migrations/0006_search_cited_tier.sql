-- Keyword search: a text index over the well-cited papers alone.
--
-- The bitmap of a common term over every paper (a fifth of a million papers for `model`) costs tens of
-- milliseconds before one row is ranked. Relevance multiplies text rank by the log of the citations, so the
-- best matches of such a term are among the well-cited papers; searched first, their index answers it from a
-- bitmap a fourteenth of the size on a million papers (db/queries/search.py, CITED_TIER, which must read the
-- same number).
CREATE INDEX papers_search_cited_idx ON papers USING gin (search_vector) WHERE cited_by_count >= 25;
