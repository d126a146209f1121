"""The statement triggers that pair a statement's old rows with its new ones plan that pairing for each statement's
size (migration 0032). PL/pgSQL would keep the plan of its first call for the whole session: the ingest's
connections live for a run, and after an update of one row, one of thousands of rows compared every old row with
every new one (a nested loop over both transition tables: seconds a harvest page). Read from the plans
auto_explain logs for the triggers' statements, not from the clock."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

ROWS = 400


def _scans(plan: dict[str, Any]) -> set[str]:
    """The node types of the scans under a plan node."""
    children = plan.get("Plans", [])
    if not children:
        return {plan["Node Type"]}
    return set().union(*(_scans(c) for c in children))


def _loops_over_both(plan: dict[str, Any]) -> bool:
    """A nested loop whose outer and inner sides both read a transition table."""
    children = plan.get("Plans", [])
    if plan["Node Type"] == "Nested Loop" and len(children) == 2:
        if all("Named Tuplestore Scan" in _scans(c) for c in children):
            return True
    return any(_loops_over_both(c) for c in children)


async def _world(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "INSERT INTO researchers (id, name, name_slug) SELECT i, 'r' || i, 'r' || i FROM generate_series(1, $1) i",
        ROWS,
    )
    await conn.execute("INSERT INTO institutions (id, ror_id, name, name_slug) VALUES (1, '00abcde01', 'i', 'i')")
    await conn.execute(
        "INSERT INTO papers (arxiv_id, slug, title, categories, primary_category, published, updated)"
        " SELECT '2001.' || lpad(i::text, 5, '0'), 'p' || i, 'p' || i, '{cs.LG}', 'cs.LG', now(), now()"
        " FROM generate_series(1, $1) i",
        ROWS,
    )
    await conn.execute(
        "INSERT INTO authorships (paper_id, position, name, researcher_id) SELECT id, 1, 'a', id FROM papers"
    )
    await conn.execute(
        "INSERT INTO authorship_institutions (paper_id, position, institution_id) SELECT id, 1, 1 FROM papers"
    )
    await conn.execute(
        "INSERT INTO researcher_institutions (researcher_id, institution_id) SELECT id, 1 FROM researchers"
    )


async def test_a_large_update_after_a_small_one_does_not_pair_its_rows_in_a_nested_loop(
    conn: asyncpg.Connection,
) -> None:
    await _world(conn)
    plans: list[tuple[str, dict[str, Any]]] = []

    def logged(_: object, message: asyncpg.PostgresLogMessage) -> None:
        if message.message.startswith("duration:") and "{" in message.message:
            entry = json.loads(message.message[message.message.index("{") :])
            plans.append((entry["Query Text"], entry["Plan"]))

    await conn.execute("LOAD 'auto_explain'")
    await conn.execute(
        "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;"
        " SET auto_explain.log_format = json; SET client_min_messages = log"
    )
    conn.add_log_listener(logged)
    # What each table's update triggers: the researchers' ranks (0027), the papers' listings and institution counts
    # (0015, 0027, 0028), the authorships' links (0027, 0028).
    updates = [
        "UPDATE researchers SET h_index = h_index + 1, citation_count = citation_count + 1 WHERE id {}",
        "UPDATE papers SET categories = '{{stat.ML}}', primary_category = 'stat.ML', published = published"
        " - interval '1 day' WHERE id {}",
        "UPDATE authorships SET researcher_id = NULL WHERE paper_id {}",
    ]
    for update in updates:
        await conn.execute(update.format("= 1"))  # the session's first call of each trigger: one row
    plans.clear()
    for update in updates:
        await conn.execute(update.format(f"BETWEEN 2 AND {ROWS}"))
    conn.remove_log_listener(logged)

    pairing = [(text, plan) for text, plan in plans if "old_rows" in text and "new_rows" in text]
    assert len(pairing) >= 6, [text[:80] for text, _ in plans]  # each trigger that pairs them was seen
    assert not [text for text, plan in pairing if _loops_over_both(plan)]
