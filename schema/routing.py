"""Reads on replicas, around an operation's execution: its one target chosen before it executes, and a writer's WAL
position recorded after a mutation (db/replicas/). The guard (schema/extensions.py) calls these once it has let the
operation through, when replicas are configured: an extension of their own would cost a request five times what
routing it does (bench/RESULTS.md, "Reads on replicas")."""

from __future__ import annotations

from strawberry.types import ExecutionContext
from strawberry.types.graphql import OperationType

from resolvers.context import Context


async def route(ec: ExecutionContext) -> bool:
    """Chooses the server the operation reads from; whether it writes (then `wrote` records it afterwards)."""
    context = ec.context
    if not isinstance(context, Context) or context.replicas is None or ec.result is not None:
        return False  # refused before execution (ec.result set): nothing runs, nothing is read
    write = ec.operation_type is not OperationType.QUERY
    await context.route(write=write)
    return write


async def wrote(ec: ExecutionContext) -> None:
    context = ec.context
    if isinstance(context, Context):
        await context.record_write()
