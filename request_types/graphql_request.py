"""The GraphQL request as the edge parsed it (edge/request.py) and the persisted-documents step resolved it: what the
GraphQL view executes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GraphQLRequest:
    method: str
    query: str | None
    variables: dict[str, Any] | None
    operation_name: str | None
    extensions: dict[str, Any] | None
    document_id: str | None = None
    # Set by the persisted-documents step: "site" (the site's manifest) or "apq" (a registered document).
    persisted: str | None = None

    def with_document(self, query: str, persisted: str) -> GraphQLRequest:
        # Spelt out: dataclasses.replace costs more than the rest of a request answered from memory.
        return GraphQLRequest(
            self.method, query, self.variables, self.operation_name, self.extensions, self.document_id, persisted
        )
