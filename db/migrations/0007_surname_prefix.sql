-- Autocomplete: what a user types is most often the start of a surname (`mitc`, `Müll`). The folded last word of
-- the name (suffixes such as Jr. and III dropped) is a btree prefix range, read in index order with the most
-- prolific researchers first, instead of the trigram index's bitmap over every name sharing a trigram.
CREATE OR REPLACE FUNCTION wp_surname(text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $$ SELECT split_part(regexp_replace(public.wp_fold($1), '[ ,]+(jr|sr|ii|iii|iv)\.?$', ''), ' ', -1) $$;

CREATE INDEX researchers_surname_idx ON researchers (wp_surname(name) text_pattern_ops, paper_count DESC, id);
