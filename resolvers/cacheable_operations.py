"""Which frontend-contract operations the whole-response cache may serve, read from their documents."""

from __future__ import annotations

from pathlib import Path

from graphql import FieldNode, OperationDefinitionNode, OperationType, parse, print_ast, visit
from graphql.language import Visitor

from db.cache.response_cache import CacheableOperation, document_hash

# Root fields whose result depends only on the entities it contains; any other root field (lists,
# paths, search) may change with any write, so its responses are dropped on every invalidation.
ENTITY_ROOT_FIELDS = frozenset({"paper", "researcher", "institution", "node", "nodes", "__typename"})
# Fields whose value depends on who asks: an operation selecting one is never cached.
VIEWER_FIELDS = frozenset(
    {
        "viewer",
        "me",
        "isFollowed",
        "isFollowing",
        "following",
        "follows",
        "viewerIsFollowing",
        "followingInstitutions",
        "feedUrl",
        "rotateFeedToken",
    }
)


class _FieldNames(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_field(self, node: FieldNode, *_: object) -> None:
        self.names.add(node.name.value)


def cacheable_operation(document: str) -> list[CacheableOperation]:
    """The cache entries for one document (as written and as printed), or none when it may not be cached."""
    doc = parse(document)
    operations = [d for d in doc.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1:
        return []
    op = operations[0]
    if op.operation is not OperationType.QUERY or op.name is None:
        return []
    names = _FieldNames()
    visit(doc, names)
    if names.names & VIEWER_FIELDS:
        return []
    roots = op.selection_set.selections
    is_list = not all(isinstance(s, FieldNode) and s.name.value in ENTITY_ROOT_FIELDS for s in roots)
    hashes = {document_hash(document), document_hash(print_ast(doc))}
    return [CacheableOperation(op.name.value, h, is_list) for h in sorted(hashes)]


def load_cacheable_operations(directory: Path) -> list[CacheableOperation]:
    """Every cacheable operation in `directory/*.graphql` (one operation per file)."""
    found: list[CacheableOperation] = []
    for path in sorted(directory.glob("*.graphql")):
        found += cacheable_operation(path.read_text())
    return found
