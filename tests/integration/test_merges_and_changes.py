"""A merged researcher keeps resolving to the survivor; the changes feed lists every change once, with merges."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from db.paging import decode_global_id, encode_global_id
from db.queries.figures import refresh_figures
from db.queries.merges import merge_researchers
from db.records import Touched
from db.slugs import entity_slug, slugify
from tests.integration.graph_support import PAPERS, Graph, graph, seeded_database

CHANGES_Q = """query($since: DateTime!, $kinds: [EntityKind!], $first: Int, $after: String) {
  changes(since: $since, kinds: $kinds, first: $first, after: $after) {
    nodes { kind change id databaseId changedAt node { id } mergedInto { databaseId } }
    pageInfo { hasNextPage endCursor }
  }
}"""


async def walk_changes(g: Graph, since: datetime, **variables: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    after = None
    while True:
        page = (await g.data(CHANGES_Q, {"since": since.isoformat(), "after": after, "first": 7, **variables}))[
            "changes"
        ]
        seen += page["nodes"]
        if not page["pageInfo"]["hasNextPage"]:
            return seen
        after = page["pageInfo"]["endCursor"]


async def _merge(dsn: str, absorbed: int, survivor: int) -> Touched:
    conn = await asyncpg.connect(dsn)
    try:
        touched = Touched()
        async with conn.transaction():
            assert await merge_researchers(conn, absorbed, survivor, touched)
            await refresh_figures(conn, touched)
        return touched
    finally:
        await conn.close()


async def test_a_merged_researcher_resolves_to_the_survivor_everywhere(make_database) -> None:
    seeded = await seeded_database(make_database, "merges")
    wumo, ada = seeded.researcher_ids["wumo"], seeded.researcher_ids["ada"]
    ada_slug = entity_slug(ada, slugify("Ada Lovelace"))
    wumo_slug = entity_slug(wumo, slugify("Wumo Yan"))
    async with graph(seeded) as g:
        before = (await g.data('{ researcher(id: "s2:1741101") { id databaseId } }'))["researcher"]
        # A reader follows both profiles, another only the one merged away: both follow the survivor after.
        conn = await asyncpg.connect(seeded.dsn)
        try:
            await conn.execute("INSERT INTO viewers (id) VALUES ('reader-both'), ('reader-ada')")
            await conn.execute(
                "INSERT INTO follows (viewer_id, researcher_id) VALUES ('reader-both', $1), ('reader-both', $2),"
                " ('reader-ada', $2)",
                wumo,
                ada,
            )
        finally:
            await conn.close()
        start = datetime.now(UTC) - timedelta(seconds=1)
        await asyncio.sleep(0.01)
        touched = await _merge(seeded.dsn, ada, wumo)
        assert {ada, wumo} <= touched.researchers

        q = """query($id: String!) { researcher(id: $id) {
                 databaseId slug mergedIds paperCount papers(first: 100) { totalCount }
                 authorPositions { totalPapers } externalIds { semanticScholar openAlex } } }"""
        both = {p.arxiv_id for p in PAPERS if any(a.researcher in ("wumo", "ada") for a in p.authors)}
        for form in (str(ada), ada_slug, "s2:1741101", str(wumo)):
            r = (await g.data(q, {"id": form}))["researcher"]
            assert r["databaseId"] == wumo and r["slug"] == wumo_slug, form
            assert r["mergedIds"] == [before["id"]]
            # The statistics are the survivor's, whichever id asked (they start before the row says which it is).
            assert r["authorPositions"]["totalPapers"] == len(both), form
        assert r["paperCount"] == r["papers"]["totalCount"] == len(both)
        assert r["externalIds"]["semanticScholar"] == "2109311836"  # the survivor's own
        conn = await asyncpg.connect(seeded.dsn)
        try:
            followers = await conn.fetch("SELECT viewer_id FROM follows WHERE researcher_id = $1 ORDER BY 1", wumo)
            assert [f["viewer_id"] for f in followers] == ["reader-ada", "reader-both"]
            counts = await conn.fetchrow(
                "SELECT (SELECT follower_count FROM researchers WHERE id = $1) AS researcher,"
                " (SELECT follow_count FROM viewers WHERE id = 'reader-both') AS viewer",
                wumo,
            )
            assert tuple(counts) == (2, 1)
        finally:
            await conn.close()

        path = (
            await g.data(
                "query($p: String!) { resolvePath(path: $p) { path redirect matchedBy node { id } } }",
                {"p": f"/researchers/{ada_slug}"},
            )
        )["resolvePath"]
        assert (path["path"], path["redirect"], path["matchedBy"]) == (f"/researchers/{wumo_slug}", True, "MERGED")
        node = (await g.data("query($id: ID!) { node(id: $id) { id } }", {"id": before["id"]}))["node"]
        assert decode_global_id(node["id"]) == ("Researcher", wumo)
        # The paper list's researcher filter follows the merge too.
        listed = await g.data("query($r: String!) { papers(filter: {researcher: $r}) { totalCount } }", {"r": str(ada)})
        assert listed["papers"]["totalCount"] == len(both)

        changes = await walk_changes(g, start, kinds=["RESEARCHER"])
        merged = [c for c in changes if c["change"] == "MERGED"]
        assert merged == [
            {
                "kind": "RESEARCHER",
                "change": "MERGED",
                "id": encode_global_id("Researcher", ada),
                "databaseId": ada,
                "changedAt": merged[0]["changedAt"],
                "node": None,
                "mergedInto": {"databaseId": wumo},
            }
        ]
        assert any(c["change"] == "MODIFIED" and c["databaseId"] == wumo for c in changes)


async def test_the_changes_feed_lists_every_entity_once_in_order(make_database) -> None:
    seeded = await seeded_database(make_database, "changes")
    async with graph(seeded) as g:
        everything = await walk_changes(g, datetime(2000, 1, 1, tzinfo=UTC))
        expected = (
            [("PAPER", i) for i in seeded.paper_ids.values()]
            + [("RESEARCHER", i) for i in seeded.researcher_ids.values()]
            + [("INSTITUTION", i) for i in seeded.institution_ids.values()]
        )
        assert sorted((c["kind"], c["databaseId"]) for c in everything) == sorted(expected)
        assert all(c["node"]["id"] == c["id"] and c["change"] == "MODIFIED" for c in everything)
        keys = [
            (c["changedAt"], ["PAPER", "RESEARCHER", "INSTITUTION"].index(c["kind"]), c["databaseId"])
            for c in everything
        ]
        assert keys == sorted(keys)
        papers_only = await walk_changes(g, datetime(2000, 1, 1, tzinfo=UTC), kinds=["PAPER"])
        assert len(papers_only) == len(seeded.paper_ids)

        # A change after a sync is all the next sync reads; a withdrawal says so.
        last = max(datetime.fromisoformat(c["changedAt"]) for c in everything)
        await asyncio.sleep(0.01)
        conn = await asyncpg.connect(seeded.dsn)
        try:
            await conn.execute("UPDATE papers SET withdrawn = true, modified_at = now() WHERE arxiv_id = '2401.00007'")
        finally:
            await conn.close()
        fresh = await walk_changes(g, last + timedelta(microseconds=1))
        assert [(c["kind"], c["change"], c["databaseId"]) for c in fresh] == [
            ("PAPER", "WITHDRAWN", seeded.paper_ids["2401.00007"])
        ]
        body = await g.query(CHANGES_Q, {"since": "2020-01-01T00:00:00", "first": 5})
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        body = await g.query(CHANGES_Q, {"since": "2020-01-01T00:00:00Z", "first": 1001})
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
