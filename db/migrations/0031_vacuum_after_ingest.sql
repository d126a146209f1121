-- The site's big reads are index-only scans: an institution's count and papers (0026, 0028), a researcher's
-- papers (0016, 0028), a category's page (0015). An index entry is answered from the index alone only on a heap
-- page the visibility map marks all-visible, and only VACUUM marks it. By default autovacuum vacuums a table
-- after inserts of 20 % of its size (or updates of 20 %): on 2.5M papers an ingest of 187,000 records set off
-- neither, and every page it wrote or updated stayed unmarked. After 28,500 records on 200,000 papers the largest
-- institution's count made 8,034 heap visits for its 14,803 rows; on the 2.5M archive the institution page's p50
-- went from 7.5 to 29 ms (bench/RESULTS.md, rounds 17 and 19). These tables are now vacuumed after inserts of 1 %
-- of their size and updates of 5 %: a vacuum of an appended table reads only its unmarked pages.
ALTER TABLE papers SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE authorships SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE authorship_institutions
    SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE paper_categories SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE researcher_papers SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE institution_papers
    SET (autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
