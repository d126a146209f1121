"""Looking up papers, researchers and institutions by every id form; malformed ids; unknown ids."""

from __future__ import annotations

import pytest

from tests.integration.graph_support import Graph, graph, seeded_database


@pytest.fixture
async def g(make_database) -> Graph:  # type: ignore[misc]
    seeded = await seeded_database(make_database)
    async with graph(seeded) as g:
        yield g


PAPER_Q = "query($id: String!) { paper(id: $id) { arxivId version slug title absUrl pdfUrl databaseId } }"


async def test_smoke(g: Graph) -> None:
    data = await g.data(PAPER_Q, {"id": "2401.00001"})
    print(data)
    assert data["paper"]["arxivId"] == "2401.00001"
