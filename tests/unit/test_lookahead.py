"""Lookahead over the parsed document: what a query selects below a field, through fragments and aliases."""

from __future__ import annotations

from graphql import FieldNode, FragmentDefinitionNode, OperationDefinitionNode, parse

from resolvers.pagination import Lookahead, selects_node, wants_total


def _root(document: str, *, index: int = 0) -> Lookahead:
    """The lookahead of the operation's `index`-th root field."""
    doc = parse(document)
    operation = next(d for d in doc.definitions if isinstance(d, OperationDefinitionNode))
    fragments = {d.name.value: d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)}
    node = operation.selection_set.selections[index]
    assert isinstance(node, FieldNode)
    return Lookahead((node,), fragments)


def test_named_fields_fragments_inline_fragments_and_aliases() -> None:
    look = _root(
        """
        query { paper(id: "1") { title a: authors { ...Who } ... on Paper { versions { version } } } }
        fragment Who on Authorship { researcher { id } }
        """
    )
    assert look.selects("authors")
    assert look.selects("authors", "researcher")
    assert look.selects("versions", "version")
    assert not look.selects("authors", "institutions")
    assert not look.selects("a")  # an alias is not the field's name
    assert not look.selects("title", "anything")


def test_connections_nodes_and_edges() -> None:
    nodes = _root("{ papers { totalCount nodes { authors { institutions { id } } } } }")
    edges = _root("{ papers { edges { node { authors { name } } } } }")
    assert wants_total(nodes) and not wants_total(edges)
    assert selects_node(nodes, "authors", "institutions")
    assert selects_node(edges, "authors") and not selects_node(edges, "authors", "institutions")


def test_answers_are_per_set_of_merged_nodes_not_per_first_node() -> None:
    """One fragment's field node merged with different siblings in two places: the answers differ."""
    doc = parse(
        """
        query { a: paper(id: "1") { ...F } b: paper(id: "1") { ...F authors { institutions { id } } } }
        fragment F on Paper { authors { name } }
        """
    )
    fragments = {d.name.value: d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)}
    fragment_authors = fragments["F"].selection_set.selections[0]
    operation = doc.definitions[0]
    assert isinstance(operation, OperationDefinitionNode) and isinstance(fragment_authors, FieldNode)
    b = operation.selection_set.selections[1]
    assert isinstance(b, FieldNode) and b.selection_set is not None
    own_authors = b.selection_set.selections[1]
    assert isinstance(own_authors, FieldNode)
    alone = Lookahead((fragment_authors,), fragments)
    merged = Lookahead((fragment_authors, own_authors), fragments)
    assert not alone.selects("institutions")
    assert merged.selects("institutions")
    assert not alone.selects("institutions")  # the merged answer did not stick to the shared first node


def test_answers_keep_no_document_alive() -> None:
    """A flood of distinct documents leaves nothing here once the parse cache lets them go."""
    import gc
    import weakref

    look = _root('{ paper(id: "1") { authors { name } } }')
    node = weakref.ref(look.nodes[0])
    assert look.selects("authors") and look.selects("authors")  # the second from the table
    del look
    gc.collect()
    assert node() is None


def test_walks_leave_the_table_with_their_document() -> None:
    """Nor does the table keep entries for documents gone: it holds no more walks than live documents have."""
    import gc

    from resolvers import pagination

    look = _root('{ paper(id: "1") { authors { name } versions { version } } }')
    assert look.selects("authors", "name") and look.only("versions") is not None
    keys = [key for key in pagination._WALKS if key[0] == (id(look.nodes[0]),)]
    assert len(keys) == 2
    del look
    gc.collect()
    assert not any(key in pagination._WALKS for key in keys)
