-- A paper's row (title, abstract of up to ~1,900 characters, its search vector) fits in 4 KB: keep it whole
-- in the heap page. At the default 2 KB target every row had its abstract pglz-compressed and its search
-- vector moved to the TOAST table: CPU and an extra insert per paper on ingest, a TOAST index probe per
-- candidate when search ranks it, and a decompression per abstract read.
-- Rows already stored keep their layout until they are next rewritten.
ALTER TABLE papers SET (toast_tuple_target = 4080);
