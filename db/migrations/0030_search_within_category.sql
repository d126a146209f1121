-- A keyword search within a category: the text index and the categories in one GIN index, so that a term common
-- elsewhere but rare in the category is intersected with the category inside the index instead of each of its
-- matches being read from the heap to be rejected. The planner cannot choose a BitmapAnd of the two single-column
-- indexes where it matters: it estimates a multi-word query's matches as if its words were independent, and they
-- are not (`twisted bilayer graphene` within cs.LG on 2.5M papers: 216 rows estimated, 109,700 read and rejected,
-- 362 ms; 22 ms p50 for such searches after, bench/RESULTS.md, round 18). A search without a category reads the
-- text's entries of the same index as before. The names stay (statement.py reads the cited tier's by name).
CREATE INDEX papers_search_categories_idx ON papers USING gin (search_vector, categories);
DROP INDEX papers_search_idx;
ALTER INDEX papers_search_categories_idx RENAME TO papers_search_idx;
CREATE INDEX papers_search_cited_categories_idx ON papers USING gin (search_vector, categories)
    WHERE cited_by_count >= 25;
DROP INDEX papers_search_cited_idx;
ALTER INDEX papers_search_cited_categories_idx RENAME TO papers_search_cited_idx;
