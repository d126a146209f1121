-- The site's big reads are index-only scans: an institution's count and papers (0026, 0028), a researcher's
-- papers (0016, 0028), a category's page (0015). An index entry is answered from the index alone only on a heap
-- page the visibility map marks all-visible; a write to the page clears the mark and only VACUUM sets it again. By
-- default autovacuum waits for inserts or dead rows of 20 % of a table. After an ingest of 95,000 records into
-- 2.5M papers it had vacuumed none of these tables, and the largest institution's count made 46,398 heap visits
-- for its 195,875 rows: 14,233 dead rows in institution_papers (0.2 % of it, from papers that changed their
-- affiliations or dates) had unmarked the pages of a quarter of that institution's rows (bench/RESULTS.md, round
-- 19). So these tables are vacuumed after inserts of 1 % of their rows and dead rows of 5 % (papers and the
-- authorships: wide, with large indexes), or after either of 0.1 % (the three listings: narrow, cheap to vacuum,
-- and every owner's list reads pages that a few changes spread over). With these settings a further ingest of
-- 95,000 records was vacuumed while it ran, and the largest count made no heap visits. A vacuum of an appended
-- table reads only its unmarked pages.
ALTER TABLE papers SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE authorships SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE authorship_institutions
    SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE paper_categories
    SET (autovacuum_vacuum_insert_scale_factor = 0.001, autovacuum_vacuum_scale_factor = 0.001);
ALTER TABLE researcher_papers
    SET (autovacuum_vacuum_insert_scale_factor = 0.001, autovacuum_vacuum_scale_factor = 0.001);
ALTER TABLE institution_papers
    SET (autovacuum_vacuum_insert_scale_factor = 0.001, autovacuum_vacuum_scale_factor = 0.001);
