-- Paper analysis by a language model (`wovepaper ingest analyse`) and chat with the papers.

-- What each analysis was made from and by. `analysis_source_md5` is the md5 of the title and abstract the
-- last attempt read (as for embeddings: title, newline, abstract), whether it succeeded or failed: a paper
-- is queued while it differs from the current text, so a changed title or abstract is analysed again and a
-- failed paper (its reason in `analysis_error`) waits until its text changes.
ALTER TABLE papers
    ADD COLUMN analysed_at         timestamptz,
    ADD COLUMN analysis_model      text,
    ADD COLUMN analysis_source_md5 uuid,
    ADD COLUMN analysis_error      text;

-- Analyses stored before this migration (the demo generator's) move to the vocabulary the API now serves:
-- a paper type from a fixed list, significance on a 0-1 scale; and they count as made from today's text.
UPDATE papers SET
    paper_type = CASE
        WHEN paper_type IS NULL THEN NULL
        WHEN lower(paper_type) IN ('theory', 'theoretical') THEN 'THEORY'
        WHEN lower(paper_type) IN ('method', 'methods') THEN 'METHOD'
        WHEN lower(paper_type) IN ('empirical', 'survey', 'dataset', 'benchmark', 'system', 'position')
            THEN upper(paper_type)
        ELSE 'OTHER'
    END,
    significance_score = CASE WHEN significance_score > 1 THEN least(significance_score / 10, 1)
                              ELSE greatest(significance_score, 0) END,
    analysed_at = CASE WHEN analysed THEN modified_at END,
    analysis_source_md5 = CASE WHEN analysed THEN md5(title || E'\n' || abstract)::uuid END
WHERE analysed OR paper_type IS NOT NULL OR significance_score IS NOT NULL;

ALTER TABLE papers
    ADD CONSTRAINT papers_paper_type_check CHECK (paper_type IN (
        'THEORY', 'METHOD', 'EMPIRICAL', 'SURVEY', 'DATASET', 'BENCHMARK', 'SYSTEM', 'POSITION', 'OTHER')),
    ADD CONSTRAINT papers_significance_score_check CHECK (significance_score BETWEEN 0 AND 1);

-- The analysis queue, newest first: papers not yet attempted for their current text.
CREATE INDEX papers_analysis_queue_idx ON papers (published DESC, id DESC)
    WHERE NOT withdrawn AND analysis_source_md5 IS DISTINCT FROM md5(title || E'\n' || abstract)::uuid;

-- A reader's conversations with the papers. `viewer_id` is the `sub` of the site's token.
CREATE TABLE conversations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    viewer_id   text NOT NULL,
    title       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_viewer_idx ON conversations (viewer_id, updated_at DESC, id DESC);

-- One question or answer. Papers are referred to by id (papers rows are never deleted): an answer's cited
-- papers and the papers retrieved for it; a question's scope as it was asked.
CREATE TABLE conversation_messages (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id   bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    role              text NOT NULL CHECK (role IN ('user', 'assistant')),
    text              text NOT NULL,
    scope             jsonb,
    cited_paper_ids   bigint[] NOT NULL DEFAULT '{}',
    source_paper_ids  bigint[] NOT NULL DEFAULT '{}',
    removed_citations integer NOT NULL DEFAULT 0,
    prompt_tokens     integer,
    completion_tokens integer,
    model             text,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_messages_conversation_idx ON conversation_messages (conversation_id, id);

-- Per reader and UTC day: questions asked (the quota counts these, and deleting a conversation does not
-- give them back) and the tokens their answers cost.
CREATE TABLE chat_usage (
    viewer_id         text NOT NULL,
    day               date NOT NULL,
    messages          integer NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (viewer_id, day)
);
