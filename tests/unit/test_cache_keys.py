from __future__ import annotations

import pytest

from db.cache import keys


def test_keys_are_namespaced_versioned_and_lowercase() -> None:
    k = keys.researcher_stats("wp", 42)
    assert k == f"wp:{{researcher:42}}:stats:v{keys.RESEARCHER_STATS_VERSION}"
    assert keys.institution_stats("wp", 7).startswith("wp:{institution:7}:stats:v")
    assert keys.researcher_coauthors("ns", 1).startswith("ns:{researcher:1}:coauthors:v")
    response = keys.response("wp", schema_version="s", operation="o", document_hash="h", variables=b"{}")
    for k in (keys.researcher_stats("wp", 1), keys.entity_tag("wp", "paper", 3), keys.response_epoch("wp", response)):
        assert k == k.lower() and " " not in k and k.startswith("wp:")


def slot(key: str) -> int:
    from redis.crc import key_slot

    return key_slot(key.encode())


def test_what_one_script_touches_shares_a_slot() -> None:
    """On a Cluster a script's keys must share a slot: an entity's aggregates, generation and tag set; a response
    or feed, its bucket's epoch and lists tag; an entity's keys whatever its id looks like."""
    entities = (("researcher", 7), ("institution", 3), ("paper", "2401.01234"), ("paper", "hep-th/9901001"))
    for kind, entity_id in entities:
        home = slot(keys.entity_generation("wp", kind, entity_id))
        assert slot(keys.entity_tag("wp", kind, entity_id)) == home
    home = slot(keys.entity_generation("wp", "researcher", 7))
    for k in (
        keys.researcher_stats("wp", 7),
        keys.researcher_coauthors("wp", 7),
        keys.researcher_network("wp", 7, depth=2, min_shared=1, limit=20),
    ):
        assert slot(k) == home
    assert slot(keys.institution_stats("wp", 3)) == slot(keys.entity_generation("wp", "institution", 3))
    for variables in (b'{"id":"1"}', b'{"id":"2"}', b'{"first":24}'):
        response = keys.response("wp", schema_version="s", operation="o", document_hash="h", variables=variables)
        assert slot(keys.response_epoch("wp", response)) == slot(response) == slot(keys.lists_tag("wp", response))
    feed = keys.feed("wp", kind="category", key="cs.LG", fmt="rss", limit=20, variant="x")
    assert slot(keys.response_epoch("wp", feed)) == slot(feed)
    assert keys.response_epoch("wp", feed) in keys.response_epochs("wp")
    assert keys.lists_tag("wp", feed) in keys.lists_tags("wp")


def test_hash_tags_spread_the_load_over_slots() -> None:
    """Per entity, per client, per response bucket: never one tag for everything."""
    entities = {slot(keys.researcher_stats("wp", i)) for i in range(200)}
    clients = {slot(keys.rate_limit("wp", f"ip:198.51.100.{i}")) for i in range(200)}
    documents = {slot(keys.persisted_query("wp", f"{i:064x}")) for i in range(200)}
    responses = {
        slot(keys.response("wp", schema_version="s", operation="o", document_hash="h", variables=b"%d" % i))
        for i in range(200)
    }
    assert min(len(entities), len(clients), len(documents)) > 190
    assert len(responses) > 100 and len(set(keys.response_epochs("wp"))) == keys.RESPONSE_BUCKETS
    assert len({slot(k) for k in keys.response_epochs("wp")}) > 200


def test_network_key_depends_on_every_argument() -> None:
    variants = {
        keys.researcher_network("wp", 1, depth=d, min_shared=m, limit=n)
        for d in (1, 2)
        for m in (1, 2)
        for n in (10, 100)
    }
    assert len(variants) == 8
    assert keys.researcher_network("wp", 1, depth=1, min_shared=1, limit=10) != keys.researcher_network(
        "wp", 2, depth=1, min_shared=1, limit=10
    )


def test_response_key_covers_operation_document_variables_and_schema() -> None:
    base = {"schema_version": "abc", "operation": "ResearcherPage", "document_hash": "h1", "variables": b'{"id":"1"}'}
    k = keys.response("wp", **base)
    assert k.startswith("wp:{r:") and ":response:sabc:" in k
    for field, other in (
        ("schema_version", "abd"),
        ("operation", "PaperPage"),
        ("document_hash", "h2"),
        ("variables", b'{"id":"2"}'),
    ):
        assert keys.response("wp", **{**base, field: other}) != k
    # Field boundaries matter: no two different inputs collide by concatenation.
    assert keys.response("wp", schema_version="s", operation="ab", document_hash="c", variables=b"") != keys.response(
        "wp", schema_version="s", operation="a", document_hash="bc", variables=b""
    )


def test_unknown_entity_kind_is_refused() -> None:
    with pytest.raises(ValueError):
        keys.entity_tag("wp", "user", 1)
    assert keys.entity_generation("wp", "institution", 5) == "wp:{institution:5}:gen"


def test_contract_operations_cacheability() -> None:
    from db.cache.store import EntityRef
    from db.paging import encode_global_id
    from edge.cache_tags import entity_refs
    from edge.cacheable import cacheable_operation, document_hash
    from edge.response_cache import canonical_variables

    page = "query ResearcherPage($id: String!) { researcher(id: $id) { id name } }"
    op = cacheable_operation(page)
    assert op is not None and op.name == "ResearcherPage" and not op.is_list
    assert op.document_hash == document_hash(page)
    assert [(lookup.kind, lookup.variable) for lookup in op.lookups] == [("researcher", "id")]
    # Lists and paths may change with any write.
    listed = cacheable_operation("query L { researchers(first: 5) { nodes { id } } }")
    assert listed is not None and listed.is_list
    # Never cached: viewer-specific fields, mutations, anonymous or multi-operation documents.
    assert cacheable_operation("query F($id: String!) { researcher(id: $id) { id isFollowed } }") is None
    assert cacheable_operation("query V { viewer { id } }") is None
    assert cacheable_operation("mutation M { follow(id: 1) { id } }") is None
    assert cacheable_operation("{ researcher(id: 1) { id } }") is None
    assert cacheable_operation("query A { paper(id: 1) { id } } query B { paper(id: 2) { id } }") is None
    # Canonical variables: key order and spacing do not matter.
    assert canonical_variables({"b": 1, "a": {"y": 2, "x": 1}}) == canonical_variables({"a": {"x": 1, "y": 2}, "b": 1})
    assert canonical_variables(None) == canonical_variables({})
    data = {
        "researcher": {
            "id": encode_global_id("Researcher", 7),
            "papers": {"nodes": [{"id": encode_global_id("Paper", 3), "authors": [{"researcher": None}]}]},
            "institutions": [{"id": encode_global_id("Institution", 2)}, {"id": "not-a-global-id"}],
        }
    }
    shown = {EntityRef("researcher", 7), EntityRef("paper", 3), EntityRef("institution", 2)}
    assert entity_refs(data) == (shown, set())


def test_documents_selecting_what_depends_on_the_reader_are_never_cached() -> None:
    from pathlib import Path

    from edge.cacheable import cacheable_operation, cacheable_operations
    from edge.persisted import build_manifest

    for field in ("viewerIsFollowing", "followingInstitutions", "feedUrl"):
        assert cacheable_operation(f"query P($id: String!) {{ researcher(id: $id) {{ id {field} }} }}") is None
    # A follower count is everyone's: the researcher page stays cacheable with it.
    assert cacheable_operation('query P { researcher(id: "1") { id followerCount } }') is not None
    operations = Path(__file__).resolve().parents[2] / "frontend_contract" / "operations"
    names = {op.name for op in cacheable_operations(build_manifest(operations).values())}
    assert "ResearcherPage" in names
    assert not names & {"ViewerFeed", "FollowResearcher", "UnfollowResearcher"}
