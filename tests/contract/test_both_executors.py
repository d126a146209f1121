"""The FastExecutor and Strawberry's default executor (what serves with WOVEPAPER_FAST_EXECUTOR off) give the same
JSON (data and errors) for every operation of the contract, and for randomised documents cut from them (fields
dropped, aliases added) on the demo data."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from graphql import FieldNode, NameNode, SelectionSetNode, Visitor, parse, print_ast, visit
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from db.pool import create_pool
from resolvers.context import Context
from schema import build_schema, fast_executor
from settings import Settings
from tests.contract.conftest import SITE_OPERATIONS, operation_text, variables_for

Run = Any


@pytest.fixture(scope="module")
async def executors(demo_database_url: str, demo_ids: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    settings = Settings(DATABASE_URL=demo_database_url)
    # No masking extension: graphql-core's own messages are compared.
    generic = build_schema(settings.model_copy(update={"fast_executor": False}), extensions=[])
    fast = build_schema(settings, extensions=[])
    assert generic.execution_context_class is StrawberryGraphQLCoreExecutionContext, "the switch turns it off"
    assert fast.execution_context_class is fast_executor.FastExecutor, "on by default"
    pool = await create_pool(demo_database_url)

    async def run(schema: Any, document: str, variables: dict[str, Any]) -> Any:
        result = await schema.execute(document, variable_values=variables, context_value=Context.create(pool, settings))
        # Through JSON: the FastExecutor's answers may hold JSON PostgreSQL wrote (orjson.Fragment), as it is sent.
        return orjson.loads(orjson.dumps(result.data)), sorted((e.message, str(e.path)) for e in result.errors or [])

    yield {"generic": generic, "fast": fast, "run": run, "ids": demo_ids}
    await pool.close()


@pytest.mark.parametrize("name", SITE_OPERATIONS)
async def test_every_contract_operation_answers_the_same(executors: dict[str, Any], name: str) -> None:
    variables = variables_for(name, executors["ids"])
    document = operation_text(name)
    generic = await executors["run"](executors["generic"], document, variables)
    fast = await executors["run"](executors["fast"], document, variables)
    assert fast == generic


class _Cut(Visitor):
    """Drops some fields of every selection set (keeping one at least) and aliases some of the rest."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def leave_selection_set(self, node: SelectionSetNode, *_: Any) -> SelectionSetNode:
        kept = [s for s in node.selections if self.rng.random() < 0.7] or [node.selections[0]]
        return SelectionSetNode(selections=tuple(kept))

    def leave_field(self, node: FieldNode, *_: Any) -> FieldNode:
        if node.alias is None and self.rng.random() < 0.2:
            return dataclasses.replace(node, alias=NameNode(value=f"a_{node.name.value}"))
        return node


READ_OPERATIONS = ("ResearcherPage", "PaperPage", "InstitutionPage", "PaperList", "ResearchersList", "Search")


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("name", READ_OPERATIONS)
async def test_randomised_documents_answer_the_same(executors: dict[str, Any], name: str, seed: int) -> None:
    rng = random.Random(f"{name}-{seed}")
    document = print_ast(visit(parse(operation_text(name)), _Cut(rng)))
    variables = variables_for(name, executors["ids"])
    generic = await executors["run"](executors["generic"], document, variables)
    fast = await executors["run"](executors["fast"], document, variables)
    assert fast == generic, document
