"""A graphql-core executor with a fast path for plain attribute fields.

graphql-core spends several microseconds per field building ``GraphQLResolveInfo``, ``Path``
objects, argument dicts and going through ``complete_value``. For a page of ~800 values that
is most of a request's CPU. This executor reads "basic" Strawberry fields (no resolver, no
extensions), resolver fields marked ``metadata={"prefetched": "<attr>"}`` whose attribute
is already set, and ``metadata={"derived": True}`` fields (a function of the source alone) straight off the
source object, and completes exactly-typed values inline. A field marked ``metadata={"json": "<attr>"}`` (prefetched or
not) takes the answer held in that attribute, an ``orjson.Fragment`` PostgreSQL wrote (resolvers/written.py), as it is,
when it was written for that very field node; resolvers know the executor does this from ``context.passes_json``.

Anything unusual - a None in a non-null position, a value of the wrong type, an awaitable, an
Exception value, a raising attribute, abstract types, ``@defer``/``@stream``, fragment
arguments, any field middleware - goes through graphql-core's own completion for that field
(or list item), so results, errors and null propagation are graphql-core's.

It relies on non-public graphql-core 3.3.2 methods (``execute_fields``, ``execute_field``,
``collect_subfields``, ``handle_field_error``, ``complete_value``, ``complete_list_item_value``,
``complete_awaitable_value``, ``complete_awaitable_list_item_value``, ``build_resolve_info``)
and on Strawberry 0.341.2 internals (the ``_get_basic_result`` resolver and the
``strawberry-definition`` extension key): both libraries are pinned, and
tests/unit/test_fast_executor.py and tests/contract/test_both_executors.py compare this executor with the generic
one.

Everything that touches those internals is in this package: ``plan`` works out once per schema field how it
can be read, ``executor`` is the execution context that reads and completes, ``shared`` keeps a document's field
collections and their plans from one request to the next when no variable can change them.
docs/architecture/upgrading.md, "Upgrading Strawberry or graphql-core", says how to move either pin.
"""

from schema.fast_executor.executor import FastExecutor
from schema.fast_executor.plan import reads_info

__all__ = ["FastExecutor", "reads_info"]
