"""Derived fields (schema/derived.py) answer the same through the FastExecutor as through graphql-core: values,
nulls, errors and their paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import strawberry
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from schema.derived import derived
from schema.fast_executor import FastExecutor


@dataclass
class Row:
    id: int
    label: str | None


def _upper(root: Row) -> str:
    if root.id == 3:
        raise ValueError("no label for 3")
    return root.label.upper() if root.label is not None else None  # type: ignore[return-value]


def _double(root: Row) -> int:
    return root.id * 2


@strawberry.type
class Item:
    id: int
    upper: str = derived(_upper, description="The label, upper case.")
    double: int = derived(_double)

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, Row)


@strawberry.type
class Query:
    @strawberry.field(graphql_type=list[Item | None])
    def items(self) -> list[Row]:
        return [Row(1, "a"), Row(2, None), Row(3, "c"), Row(4, "d")]


GENERIC = strawberry.Schema(query=Query, execution_context_class=StrawberryGraphQLCoreExecutionContext)
FAST = strawberry.Schema(query=Query, execution_context_class=FastExecutor)


def _answer(schema: strawberry.Schema, query: str) -> tuple[Any, list[dict[str, Any]]]:
    result = schema.execute_sync(query)
    return result.data, sorted((e.formatted for e in result.errors or []), key=str)


@pytest.mark.parametrize("query", ["{ items { id upper double } }", "{ items { double } }", "{ items { upper } }"])
def test_same_answer_and_errors_as_graphql_core(query: str) -> None:
    assert _answer(FAST, query) == _answer(GENERIC, query)


def test_values_errors_and_null_propagation() -> None:
    data, errors = _answer(FAST, "{ items { id upper double } }")
    # Row 2: a null in a non-null field nulls its item; row 3: the raised error, located.
    assert data == {"items": [{"id": 1, "upper": "A", "double": 2}, None, None, {"id": 4, "upper": "D", "double": 8}]}
    assert [e["path"] for e in errors] == [["items", 1, "upper"], ["items", 2, "upper"]]
