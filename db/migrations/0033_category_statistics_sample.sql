-- ANALYZE samples 300 rows for each unit of the largest statistics target among a table's columns, and computes
-- every column's statistics from that sample: 0005's target of 1000 on `categories` made each ANALYZE of papers
-- read 300,000 rows and build statistics of their abstracts and search vectors from all of them. On 2.5M papers
-- autovacuum's ANALYZE (after every ~250,000 changed papers) then took 42 s, 14.6 s of it CPU, and read 1.5 GB; the
-- site's statements ran three times slower meanwhile and a single API process refused requests for 40 s
-- (bench/RESULTS.md, round 26). At 300 the same ANALYZE takes 5.8 s (197 s at 1000, 1.7 s at the default 100, on
-- the same database) and still finds every category of that corpus among the most common elements; a category
-- too rare for the sample is estimated at half the rarest one's frequency, a few rows, which plans it as 0005
-- wanted (its index, not a walk of the date index).
ALTER TABLE papers ALTER COLUMN categories SET STATISTICS 300;
