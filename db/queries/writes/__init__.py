"""The one bulk write path: COPY into a temp staging table, then upsert from it.

The ingest and `wovepaper demo` both write through these functions. Each takes a connection that is
already inside the caller's transaction, so a batch commits or rolls back as a whole, and each
reports the ids it touched (`Touched`) so the caller can invalidate the cache once it has committed.
Upserts change a row only when a value differs, so re-running the same input changes nothing.

`staging` fills the staging tables; `papers` (with versions and authorships), `analyses`, `researchers`
(with their works lists), `institutions`, `matches` (authorships to researchers and institutions) and
`citations` write one kind of record each.
"""
