-- A question asked with an idempotency key (askPapers' `idempotencyKey`, /chat's `Idempotency-Key`): a client
-- that retries after a dropped connection gets the stored answer again instead of a second turn, a second quota
-- point and a second model bill. One row per reader and key: the question's fingerprint (the same key with another
-- question is refused), when its answer was started (an answer still being written refuses the retry as in
-- progress; one older than the answer's time limit was abandoned by a worker that died, and is taken over), and
-- the stored answer once there is one. A failed or interrupted answer deletes its row so the retry starts afresh;
-- rows expire after a day.
CREATE TABLE chat_requests (
    viewer_id   text NOT NULL,
    key         text NOT NULL,
    fingerprint bytea NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    answer_id   bigint REFERENCES conversation_messages (id) ON DELETE CASCADE,
    PRIMARY KEY (viewer_id, key)
);
CREATE INDEX chat_requests_answer_idx ON chat_requests (answer_id) WHERE answer_id IS NOT NULL;

-- Whether an answer's token counts are the server's or estimated (a server that reports no usage): a retried key
-- replays the figures as they were reported.
ALTER TABLE conversation_messages ADD COLUMN tokens_estimated boolean NOT NULL DEFAULT false;
