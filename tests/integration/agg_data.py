"""Hand-made data with known aggregates, for exact-value tests of researcher and institution figures.

Researcher "ada" (A) has 6 archive papers and 6 external works (3 of which duplicate archive papers):

    paper  authors (position order)        primary   cited  year  fully matched  A's position
    P1     A, B                            cs.LG     10     2019  yes            first
    P2     B, A, C                         cs.LG     5      2020  yes            middle
    P3     C, <unmatched>, A               cs.DC     null   2021  no
    P4     A                               math.ST   3      2022  yes            solo
    P5     <ATLAS Collaboration>, A        hep-ex    50     2023  no
    P8     C, A                            cs.DC     0      2017  yes            last
    P6     B, C                            cs.LG     1      2018  (not A's)
    P7     D, B                            cs.CV     2      2016  (not A's)

External works: w1 = P1 (S2, 12), W2 = P2 (OpenAlex, 4), w3 = P4 by its journal DOI (S2, 7), w4 = W5 (one DOI
in two cases, 20 and 22), w6 (S2, no count), W7 (OpenAlex, 10). An archive paper keeps its own count.
Whole career: P1 10, P2 5, P3 -, P4 3, P5 50, P8 0, w4/W5 22, w6 -, W7 10: 9 works, 100 citations,
h-index 5, i10 4. S2 list alone: 4 works, 39 citations, h 3; OpenAlex list alone: 3 works, 36, h 3.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg

from db.migrate import migrate
from db.queries.figures import refresh_researcher_figures

EXPECTED_ADA = {
    "paper_count": 6,
    "works_count": 9,
    "citation_count": 100,
    "h_index": 5,
    "i10_index": 4,
    "h_index_in_archive": 3,
    "first": 1,
    "middle": 1,
    "last": 1,
    "solo": 1,
    "matched_papers": 4,
    "citation_total": 68,
    "papers_with_counts": 5,
    "fields": [("cs.DC", 2), ("cs.LG", 2), ("hep-ex", 1), ("math.ST", 1)],
}


async def insert_researcher(conn: asyncpg.Connection, name: str, **extra: object) -> int:
    cols = ["name", "name_slug", *extra]
    vals = [name, name.lower().replace(" ", "-"), *extra.values()]
    placeholders = ", ".join(f"${i}" for i in range(1, len(vals) + 1))
    rid: int = await conn.fetchval(
        f"INSERT INTO researchers ({', '.join(cols)}) VALUES ({placeholders}) RETURNING id", *vals
    )
    return rid


async def insert_paper(
    conn: asyncpg.Connection,
    arxiv_id: str,
    *,
    authors: list[int | str | None],
    primary: str,
    cited: int | None,
    year: int,
    doi: str | None = None,
) -> int:
    """Authors: a researcher id, None for an unmatched name, or a str for a collaboration."""
    pid: int = await conn.fetchval(
        """INSERT INTO papers (arxiv_id, slug, title, categories, primary_category, published, updated,
                               cited_by_count, cited_by_source, doi, author_count, matched_count)
           VALUES ($1, $1 || '-t', 'Paper ' || $1, ARRAY[$2], $2, $3, $3, $4, CASE WHEN $4::int IS NULL
                   THEN NULL ELSE 's2' END, $5, $6, $7)
           RETURNING id""",
        arxiv_id,
        primary,
        datetime(year, 6, 1, tzinfo=UTC),
        cited,
        doi,
        len(authors),
        sum(1 for a in authors if isinstance(a, int)),
    )
    for pos, a in enumerate(authors, start=1):
        await conn.execute(
            "INSERT INTO authorships (paper_id, position, name, researcher_id, is_collaboration)"
            " VALUES ($1, $2, $3, $4, $5)",
            pid,
            pos,
            a if isinstance(a, str) else f"Author {pos}",
            a if isinstance(a, int) else None,
            isinstance(a, str),
        )
    return pid


async def insert_work(
    conn: asyncpg.Connection,
    researcher_id: int,
    source: str,
    external_id: str,
    cited: int | None,
    *,
    arxiv_id: str | None = None,
    doi: str | None = None,
) -> None:
    await conn.execute(
        "INSERT INTO researcher_works (researcher_id, source, external_id, title, year, citation_count, arxiv_id, doi)"
        " VALUES ($1, $2, $3, 'w', 2020, $4, $5, $6)",
        researcher_id,
        source,
        external_id,
        cited,
        arxiv_id,
        doi,
    )


# The hand-made papers' arXiv ids (without the prefix).
ARXIV_IDS = {
    "P1": "1901.00001",
    "P2": "2001.00002",
    "P3": "2101.00003",
    "P4": "2201.00004",
    "P5": "2301.00005",
    "P6": "1801.00006",
    "P7": "1601.00007",
    "P8": "1701.00008",
}


async def build_handmade(conn: asyncpg.Connection, prefix: str = "") -> dict[str, int]:
    """Insert the data above (arXiv ids prefixed so it can coexist with other rows); return the ids."""
    ids: dict[str, int] = {}
    ids["A"] = await insert_researcher(
        conn,
        f"{prefix}Ada",
        s2_h_index=4,
        s2_citation_count=90,
        s2_paper_count=8,
        s2_updated_at=datetime(2026, 1, 2, tzinfo=UTC),
        openalex_h_index=6,
        openalex_i10_index=5,
        openalex_cited_by_count=120,
        openalex_works_count=11,
    )
    ids["B"] = await insert_researcher(conn, f"{prefix}Bob")
    ids["C"] = await insert_researcher(conn, f"{prefix}Cy")
    ids["D"] = await insert_researcher(conn, f"{prefix}Dee")
    ids["E"] = await insert_researcher(conn, f"{prefix}Eve")
    a, b, c, d = ids["A"], ids["B"], ids["C"], ids["D"]
    p = prefix
    ids["P1"] = await insert_paper(conn, p + ARXIV_IDS["P1"], authors=[a, b], primary="cs.LG", cited=10, year=2019)
    ids["P2"] = await insert_paper(conn, p + ARXIV_IDS["P2"], authors=[b, a, c], primary="cs.LG", cited=5, year=2020)
    ids["P3"] = await insert_paper(
        conn, p + ARXIV_IDS["P3"], authors=[c, None, a], primary="cs.DC", cited=None, year=2021
    )
    ids["P4"] = await insert_paper(
        conn, p + ARXIV_IDS["P4"], authors=[a], primary="math.ST", cited=3, year=2022, doi=f"10.1/{p}p4journal"
    )
    ids["P5"] = await insert_paper(
        conn, p + ARXIV_IDS["P5"], authors=["ATLAS Collaboration", a], primary="hep-ex", cited=50, year=2023
    )
    ids["P6"] = await insert_paper(conn, p + ARXIV_IDS["P6"], authors=[b, c], primary="cs.LG", cited=1, year=2018)
    ids["P7"] = await insert_paper(conn, p + ARXIV_IDS["P7"], authors=[d, b], primary="cs.CV", cited=2, year=2016)
    ids["P8"] = await insert_paper(conn, p + ARXIV_IDS["P8"], authors=[c, a], primary="cs.DC", cited=0, year=2017)
    await insert_work(conn, a, "s2", f"{p}w1", 12, arxiv_id=f"{p}1901.00001")
    await insert_work(conn, a, "openalex", f"{p}W2", 4, arxiv_id=f"{p}2001.00002", doi=f"10.48550/arXiv.{p}2001.00002")
    await insert_work(conn, a, "s2", f"{p}w3", 7, doi=f"10.1/{p}P4JOURNAL")
    await insert_work(conn, a, "s2", f"{p}w4", 20, doi=f"10.9/{p}x")
    await insert_work(conn, a, "openalex", f"{p}W5", 22, doi=f"10.9/{p}X")
    await insert_work(conn, a, "s2", f"{p}w6", None)
    await insert_work(conn, a, "openalex", f"{p}W7", 10)
    ids["I"] = await conn.fetchval(
        "INSERT INTO institutions (ror_id, name, name_slug) VALUES ($1, $2, 'inst') RETURNING id",
        "05gq02987" if not prefix else "0" + f"{abs(hash(prefix)) % 10**6:06d}" + "42",
        f"{prefix}Institute",
    )
    for pid, pos in ((ids["P1"], 1), (ids["P2"], 1), (ids["P6"], 2)):
        await conn.execute(
            "INSERT INTO authorship_institutions (paper_id, position, institution_id) VALUES ($1, $2, $3)",
            pid,
            pos,
            ids["I"],
        )
    await conn.execute(
        "INSERT INTO researcher_institutions (researcher_id, institution_id) VALUES ($1, $2)", ids["E"], ids["I"]
    )
    # The figures the write path stores in the same transaction (the researcher page reads them) ...
    await refresh_researcher_figures(conn, [ids[k] for k in "ABCDE"])
    # ... then hand-set career figures the institution tests sort on.
    for key, h_index, citation_count in (("A", 5, 100), ("B", 2, 10), ("C", 2, 20)):
        await conn.execute(
            "UPDATE researchers SET h_index = $2, citation_count = $3 WHERE id = $1", ids[key], h_index, citation_count
        )
    return ids


async def handmade_database(make_database: Callable[[str], Awaitable[str]], suffix: str) -> tuple[str, dict[str, int]]:
    """A migrated database of its own holding the hand-made data; its DSN and the named ids."""
    dsn = await make_database(suffix)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        return dsn, await build_handmade(conn)
    finally:
        await conn.close()
