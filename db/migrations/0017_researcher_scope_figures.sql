-- Each researcher's figures in every scope the researcher page shows (the whole career, the archive alone, each
-- source's works list alone), stored so the page reads them instead of ranking every work of four scopes on each
-- request. The ingest refreshes them in the write's transaction, beside the career figures researchers keeps
-- (db/queries/figures.py, REFRESH_RESEARCHER_FIGURES): one statement computes both.
--
-- A row per (researcher, scope), and only for scopes with at least one work (a missing scope is no works): the
-- rows are exactly what the figures' definitions group by, and `researchers`, which every list scans, stays as
-- narrow as it is.
CREATE TABLE researcher_scope_figures (
    researcher_id  bigint NOT NULL REFERENCES researchers (id) ON DELETE CASCADE,
    scope          text NOT NULL CHECK (scope IN ('career', 'archive', 's2', 'openalex')),
    works_count    integer NOT NULL,
    citation_count bigint NOT NULL,
    i10_index      integer NOT NULL,
    h_index        integer NOT NULL,
    with_counts    integer NOT NULL,  -- works that have a citation count at all
    PRIMARY KEY (researcher_id, scope)
);

-- The backfill: the definitions of db/queries/figures.py (CAREER_WORKS_CTES, SCOPED_FIGURES_CTES) as they stand
-- with this migration, over every researcher.
INSERT INTO researcher_scope_figures (researcher_id, scope, works_count, citation_count, i10_index, h_index,
                                      with_counts)
WITH ids AS (SELECT id FROM researchers),
arch AS (
    SELECT DISTINCT a.researcher_id AS rid, p.id AS paper_id, p.arxiv_id, lower(p.doi) AS doi, p.cited_by_count AS c,
           p.withdrawn
    FROM ids JOIN authorships a ON a.researcher_id = ids.id JOIN papers p ON p.id = a.paper_id
),
ext_raw AS (
    SELECT w.researcher_id AS rid, w.source, w.external_id, w.arxiv_id, lower(w.doi) AS doi, w.citation_count AS c
    FROM ids JOIN researcher_works w ON w.researcher_id = ids.id
),
doi_arxiv AS (
    SELECT rid, doi, min(arxiv_id) AS arxiv_id
    FROM (SELECT rid, doi, arxiv_id FROM arch WHERE doi IS NOT NULL
          UNION ALL
          SELECT rid, doi, arxiv_id FROM ext_raw WHERE doi IS NOT NULL AND arxiv_id IS NOT NULL) known
    GROUP BY rid, doi
),
ext AS (
    SELECT e.rid, e.source, e.external_id, e.c,
           coalesce('a:' || e.arxiv_id, 'a:' || d.arxiv_id, 'd:' || e.doi,
                    'x:' || e.source || ':' || e.external_id) AS k
    FROM ext_raw e LEFT JOIN doi_arxiv d ON d.rid = e.rid AND d.doi = e.doi
),
career_works AS (
    SELECT rid, k, bool_or(in_archive) AS in_archive, coalesce(max(archive_c), max(ext_c)) AS c
    FROM (SELECT rid, 'a:' || arxiv_id AS k, true AS in_archive, c AS archive_c, NULL::integer AS ext_c FROM arch
          UNION ALL
          SELECT rid, k, false, NULL, c FROM ext) keyed
    GROUP BY rid, k
),
scoped AS (
    SELECT 'career' AS scope, rid, c FROM career_works
    UNION ALL
    SELECT 'archive', rid, c FROM (SELECT DISTINCT rid, paper_id, c FROM arch WHERE NOT withdrawn) a
    UNION ALL
    SELECT source, rid, max(c) FROM ext GROUP BY source, rid, k
),
ranked AS (SELECT scope, rid, c, row_number() OVER (PARTITION BY scope, rid ORDER BY coalesce(c, 0) DESC) AS rn
           FROM scoped)
SELECT rid, scope,
       count(*)::integer,
       coalesce(sum(c), 0)::bigint,
       (count(*) FILTER (WHERE c >= 10))::integer,
       (count(*) FILTER (WHERE coalesce(c, 0) >= rn))::integer,
       count(c)::integer
FROM ranked GROUP BY scope, rid
-- A researcher's rows side by side on disk: the page reads them together.
ORDER BY rid, scope;
-- Statistics now: without them the planner takes every researcher for one of a few, and the refresh scans the
-- whole table instead of reading a researcher's rows by the primary key.
ANALYZE researcher_scope_figures;
