"""Reads on replicas: the operation's one target chosen before it executes, and a writer's WAL position recorded
after a mutation (db/replicas/). Installed only when replicas are configured."""

from __future__ import annotations

from collections.abc import AsyncIterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from resolvers.context import Context


class ReadRouting(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        ec = self.execution_context
        context = ec.context
        # Not when the guard refused the operation (ec.result set): nothing runs, nothing is read.
        routed = isinstance(context, Context) and context.replicas is not None and ec.result is None
        write = False
        if routed:
            assert isinstance(context, Context)
            write = ec.operation_type is not OperationType.QUERY
            await context.route(write=write)
        yield
        if routed and write:
            assert isinstance(context, Context)
            await context.record_write()
