"""After a traffic run: were the answers true when they were given?

A page answer carries its entity's `modifiedAt`; the database keeps the latest one. An answer is *wrong* when the
database had already committed a newer state `grace` seconds before the request left (the time the cache's
invalidation needs to reach the server), yet the answer, or the copy a 304 confirmed, is older. When the server
records commit times (`track_commit_timestamp = on`) the latest state's commit time is read; otherwise only its
`modified_at` is known, which is the writing transaction's start, and an ingest transaction may commit seconds later
(a harvest page: 7 s under load), so `allowance` seconds more are granted. An answer sent before the latest change
(or within those seconds) cannot be judged from the latest state alone and is counted as unchecked, not as right.
LatestPapers is checked the same way: a paper published after the answer's oldest one, and unchanged since well
before the request, must be in it.

What the response cache still holds once the run ends is checked too (`stale_entries`): a page whose entity has
a newer state, committed more than `grace` seconds (and `allowance` without commit times) before the run ended, is an
entry its write's drop missed (or one stored from a read older than the drop). Where answers were wrong and no entry
is stale, the stale copy was a worker's memory (edge/near.py), which ends with the server, or was dropped since.
An entry one of its tag sets no longer lists (Redis evicted the set) is never served, and is counted apart.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
import redis.asyncio as redis

from bench.site_mix import Seen
from db.cache import keys

# {committed}: the latest state's commit time where the server keeps them, else its modified_at.
_CURRENT = {
    "paper": "SELECT arxiv_id AS key, modified_at, {committed} AS committed FROM papers"
    " WHERE arxiv_id = any($1::text[])",
    "researcher": "SELECT id::text AS key, modified_at, {committed} AS committed FROM researchers"
    " WHERE id = any($1::text[]::bigint[])",
    "institution": "SELECT id::text AS key, modified_at, {committed} AS committed FROM institutions"
    " WHERE id = any($1::text[]::bigint[])",
}
_MISSED_LATEST = """
SELECT count(*) FROM papers
WHERE published > $1::timestamptz AND NOT withdrawn AND modified_at < to_timestamp($2) AND arxiv_id <> all($3::text[])
"""


@dataclass
class Verdict:
    checked: int = 0
    unchecked: int = 0
    wrong: int = 0
    examples: list[str] = field(default_factory=list)
    basis: str = ""  # "commit time" or "modified_at + allowance"


async def _states(
    conn: asyncpg.Connection, wanted: set[tuple[str, str]]
) -> tuple[bool, dict[tuple[str, str], tuple[float, float]]]:
    """Whether the server keeps commit times, and each wanted entity's latest (modified_at, committed)."""
    exact = bool(await conn.fetchval("SELECT current_setting('track_commit_timestamp') = 'on'"))
    committed = "coalesce(pg_xact_commit_timestamp(xmin), modified_at)" if exact else "modified_at"
    current: dict[tuple[str, str], tuple[float, float]] = {}
    for kind, sql in _CURRENT.items():
        keys = sorted({key for k, key in wanted if k == kind})
        for start in range(0, len(keys), 50_000):
            for r in await conn.fetch(sql.format(committed=committed), keys[start : start + 50_000]):
                current[(kind, r["key"])] = (r["modified_at"].timestamp(), r["committed"].timestamp())
    return exact, current


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")


def _when(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def check(
    conn: asyncpg.Connection,
    seen: list[Seen],
    latest: list[tuple[float, list[str], str]],
    grace_s: float,
    allowance_s: float = 30.0,
) -> dict[str, Verdict]:
    """Verdicts by traffic class."""
    exact, current = await _states(conn, {(s.kind, s.key) for s in seen})
    wait = grace_s if exact else grace_s + allowance_s
    verdicts: dict[str, Verdict] = {}
    basis = "commit time" if exact else f"modified_at + {allowance_s:.0f} s"
    for s in seen:
        v = verdicts.setdefault(s.cls, Verdict(basis=basis))
        state = current.get((s.kind, s.key))
        if state is None:
            v.unchecked += 1
            continue
        latest_change, commit = state
        answered = _when(s.modified_at)
        if answered >= latest_change - 1e-6:
            v.checked += 1  # the latest state: right whenever it was sent
        elif commit + wait < s.sent_at:
            v.checked += 1
            v.wrong += 1
            if len(v.examples) < 5:
                how = "a 304 confirmed" if s.revalidated else "answered"
                v.examples.append(
                    f"{s.kind} {s.key}: {how} the state of {s.modified_at} at {_iso(s.sent_at)} ({s.answered}); the "
                    f"state of {_iso(latest_change)} committed at {_iso(commit)}"
                )
        else:
            v.unchecked += 1
    lv = verdicts.setdefault("LatestPapers", Verdict(basis=f"modified_at + {allowance_s:.0f} s"))
    for sent_at, ids, oldest in latest:
        missed = await conn.fetchval(_MISSED_LATEST, datetime.fromisoformat(oldest.replace("Z", "+00:00")),
                                     sent_at - grace_s - allowance_s, ids)  # fmt: skip
        lv.checked += 1
        if missed:
            lv.wrong += 1
            if len(lv.examples) < 5:
                lv.examples.append(f"latest papers at {sent_at:.0f}: {missed} newer papers missing")
    return verdicts


# A page's entity as the response names it: the root lookup of PaperPage, ResearcherPage, InstitutionPage.
_PAGE_ROOTS = {"paper": ("paper", "arxivId"), "researcher": ("researcher", "databaseId"),
               "institution": ("institution", "databaseId")}  # fmt: skip


async def stale_entries(
    conn: asyncpg.Connection, redis_url: str, namespace: str, ttl_s: int, grace_s: float, allowance_s: float = 30.0
) -> tuple[int, int, int, list[str]]:
    """(pages held, unlisted, stale, examples) of the whole responses the cache of `namespace` holds now. An entry
    some tag set of its no longer lists (Redis evicted the set) is never served (db/cache/store.py, `listed`): it
    is counted as unlisted, not held."""
    client = redis.Redis.from_url(redis_url)
    held: list[tuple[str, str, str, float]] = []  # kind, key, modifiedAt, stored at
    unlisted = 0
    now = time.time()
    try:
        async for name in client.scan_iter(match=f"{namespace}:*:response:*", count=5000):
            raw, remaining = await client.get(name), await client.ttl(name)
            head, _, body = (raw or b"").partition(b"\n")
            try:
                data = json.loads(body).get("data") or {}
                tags = [str(t) for t in json.loads(head).get("tags", [])]
            except ValueError:
                continue
            pages = [
                (kind, str(page[field_name]), page["modifiedAt"])
                for root, (kind, field_name) in _PAGE_ROOTS.items()
                if isinstance(data, dict)
                and isinstance(page := data.get(root), dict)
                and page.get("modifiedAt")
                and page.get(field_name) is not None
            ]
            if not pages:
                continue
            if not await _listed(client, name.decode(), keys.tag_keys(namespace, tags, of_key=name.decode())):
                unlisted += 1
                continue
            held += [(kind, key, modified_at, now - (ttl_s - max(remaining, 0))) for kind, key, modified_at in pages]
    finally:
        await client.aclose()
    exact, current = await _states(conn, {(kind, key) for kind, key, _, _ in held})
    wait = grace_s if exact else grace_s + allowance_s
    stale, examples = 0, []
    for kind, key, modified_at, stored in held:
        state = current.get((kind, key))
        if state is None or _when(modified_at) >= state[0] - 1e-6 or state[1] + wait > now:
            continue
        stale += 1
        if len(examples) < 5:
            examples.append(
                f"{kind} {key}: the cache holds the state of {modified_at}, stored about {_iso(stored)}; the state "
                f"of {_iso(state[0])} committed at {_iso(state[1])}"
            )
    return len(held), unlisted, stale, examples


async def _listed(client: redis.Redis, name: str, tag_keys: list[str]) -> bool:
    pipe = client.pipeline(transaction=False)
    for tag_key in tag_keys:
        pipe.sismember(tag_key, name)
    return all(await pipe.execute())
