"""How each schema field can be read: worked out once per field definition, per request per selection."""

from __future__ import annotations

import dis
import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from operator import attrgetter
from typing import Any, Final, NamedTuple

from graphql import (
    GraphQLBoolean,
    GraphQLFloat,
    GraphQLID,
    GraphQLInt,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLString,
    is_leaf_type,
    is_list_type,
    is_non_null_type,
    is_object_type,
)
from graphql.execution.collect_fields import FieldDetailsList
from graphql.type import GraphQLField, GraphQLSchema
from strawberry.schema.types.base_scalars import isoformat as strawberry_isoformat

DEFINITION_KEY: Final = "strawberry-definition"

# Field kinds in a plan.
GENERIC: Final = 0
TYPENAME: Final = 1
BASIC: Final = 2
PREFETCHED: Final = 3
# A prefetched field whose answer may also come already written as JSON (an orjson.Fragment), for one field node.
PASSTHROUGH: Final = 4

# Type codes of a completion spec.
STR: Final = 0
INT: Final = 1
BOOL: Final = 2
FLOAT: Final = 3
SCALAR: Final = 4
OBJ: Final = 5
LIST: Final = 6
OTHER: Final = 7

INT_MIN: Final = -(2**31)
INT_MAX: Final = 2**31 - 1


class Slow:
    """Marks a value the fast path declines; graphql-core completes it instead."""


SLOW: Final = Slow()

# (nullable, code, detail): detail is the leaf/object GraphQL type, or the item spec for lists.
Spec = tuple[bool, int, Any]


class PlanEntry(NamedTuple):
    """How one response field is read. A tuple, so that the executor's hot loop unpacks it in one step: the spec's
    three parts are repeated flattened for that."""

    name: str  # the response name
    fdl: FieldDetailsList
    field_def: GraphQLField | None  # None for generic fields and __typename
    kind: int  # GENERIC, TYPENAME, BASIC, PREFETCHED or PASSTHROUGH
    getter: Callable[[Any], Any] | None  # reads the value off the source
    spec: Spec | None
    nullable: bool
    code: int
    detail: Any
    exact: Any  # the Python type a value of a leaf field is complete as (None for other fields)


# A PlanEntry as a plain tuple, its fields in the same order: what the executor's loop unpacks for every field of
# every object, since CPython 3.11 unpacks an exact tuple in one specialised step and a NamedTuple about 2.5 times
# slower (a tenth of a toy page's execution).
Row = tuple[
    str, FieldDetailsList, GraphQLField | None, int, Callable[[Any], Any] | None, Spec | None, bool, int, Any, Any
]


def as_rows(entries: Sequence[PlanEntry]) -> list[Row]:
    return [tuple(entry) for entry in entries]


# A field set's entries as rows, whether every one is a __typename or an exact leaf read off the source, and its
# leaf reader with the rows it leaves to the executor (compiled.Leaves), when it has one.
Plan = tuple[list[Row], bool, Any]
_EXACT: Final[dict[int, type]] = {STR: str, INT: int, BOOL: bool, FLOAT: float}
# Strawberry's DateTime and Date scalars write a value with `isoformat`, and orjson writes a `datetime` in UTC (or
# naive) and a `date` to the same text: such values may pass to the response's encoder as they are
# (tests/unit/test_fast_executor.py holds the two writers to the same bytes).
_ISO_TYPES: Final[dict[str, type]] = {"DateTime": datetime, "Date": date}


def _passed_as(spec: Spec) -> type | None:
    """The Python type a value of a leaf field is complete as, before the response is encoded."""
    code, detail = spec[1], spec[2]
    if code == SCALAR and detail.serialize is strawberry_isoformat:
        return _ISO_TYPES.get(detail.name)
    return _EXACT.get(code)


_ALLOWED_DIRECTIVES: Final = frozenset({"include", "skip"})


def _spec(type_: GraphQLOutputType) -> Spec:
    nullable = not is_non_null_type(type_)
    if not nullable:
        type_ = type_.of_type  # type: ignore[union-attr]
    if is_list_type(type_):
        return (nullable, LIST, _spec(type_.of_type))
    if type_ is GraphQLString or type_ is GraphQLID:
        return (nullable, STR, type_)
    if type_ is GraphQLInt:
        return (nullable, INT, type_)
    if type_ is GraphQLBoolean:
        return (nullable, BOOL, type_)
    if type_ is GraphQLFloat:
        return (nullable, FLOAT, type_)
    if is_leaf_type(type_):
        return (nullable, SCALAR, type_)
    if is_object_type(type_):
        assert isinstance(type_, GraphQLObjectType)
        if type_.is_type_of is None:
            return (nullable, OBJ, (type_, None, False))
        definition = (type_.extensions or {}).get(DEFINITION_KEY)
        # Strawberry's generated is_type_of (for types with interfaces) never reads `info`; a
        # user-supplied one might, so it gets the field's real GraphQLResolveInfo, as in graphql-core.
        generated = definition is not None and getattr(definition, "is_type_of", True) is None
        return (nullable, OBJ, (type_, type_.is_type_of, not generated and reads_info(type_.is_type_of)))
    return (nullable, OTHER, type_)


def reads_info(is_type_of: Callable[..., Any]) -> bool:
    """Whether an ``is_type_of(obj, info)`` may read its ``info``: False only when provably unused."""
    code = getattr(getattr(is_type_of, "__func__", is_type_of), "__code__", None)
    if code is None or code.co_argcount < 2 or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return True
    name = code.co_varnames[code.co_argcount - 1]
    if name in code.co_cellvars:
        return True
    for instruction in dis.get_instructions(code):
        argval = instruction.argval
        if argval == name or (isinstance(argval, tuple) and name in argval):
            return True
    return False


def _getter_for(definition: Any, name: str) -> Callable[[Any], Any]:
    default_resolver = getattr(definition, "default_resolver", getattr)
    if default_resolver is getattr:
        return attrgetter(name)

    def get(source: Any) -> Any:
        return default_resolver(source, name)

    return get


def _derived(definition: Any) -> Callable[[Any], Any] | None:
    """The function of a ``metadata={"derived": True}`` field: a synchronous resolver of the source alone
    (schema/derived.py), read like an attribute."""
    resolver = getattr(definition, "base_resolver", None)
    if (
        resolver is None
        or resolver.is_async
        or resolver.arguments
        or resolver.info_parameter is not None
        or resolver.root_parameter is None
    ):
        return None
    func: Callable[[Any], Any] = resolver.wrapped_func
    return func


_STATIC: dict[int, tuple[GraphQLField, tuple[int, Callable[[Any], Any] | None, Spec | None]]] = {}


def static_plan(field_def: GraphQLField) -> tuple[int, Callable[[Any], Any] | None, Spec | None]:
    """How a schema field can be read, worked out once per field definition (they live as long as the schema)."""
    cached = _STATIC.get(id(field_def))
    if cached is not None and cached[0] is field_def:
        return cached[1]
    static: tuple[int, Callable[[Any], Any] | None, Spec | None] = (GENERIC, None, None)
    definition = (field_def.extensions or {}).get(DEFINITION_KEY)
    resolve = field_def.resolve
    if definition is None:
        pass
    elif (
        resolve is not None and getattr(resolve, "__name__", None) == "_get_basic_result" and definition.is_basic_field
    ):
        static = (BASIC, _getter_for(definition, definition.python_name), _spec(field_def.type))
    else:
        metadata = getattr(definition, "metadata", None)
        attr = metadata.get("prefetched") if isinstance(metadata, Mapping) else None
        plain = not field_def.args and not definition.extensions and not getattr(definition, "permission_classes", None)
        derive = _derived(definition) if isinstance(metadata, Mapping) and metadata.get("derived") else None
        json_attr = metadata.get("json") if isinstance(metadata, Mapping) else None
        if isinstance(json_attr, str) and plain:
            static = (PASSTHROUGH, _written_and_rows(json_attr, attr), _spec(field_def.type))
        elif isinstance(attr, str) and plain:
            static = (PREFETCHED, attrgetter(attr), _spec(field_def.type))
        elif derive is not None and plain:
            static = (BASIC, derive, _spec(field_def.type))
    # Keep the definition alive with its entry so its id cannot be reused by another one.
    _STATIC[id(field_def)] = (field_def, static)
    return static


def _written_and_rows(json_attr: str, attr: object) -> Callable[[Any], Any]:
    """(the written answer, the prefetched rows) of a source; no rows attribute: None, and the resolver answers."""
    if isinstance(attr, str):
        return attrgetter(json_attr, attr)
    written_of = attrgetter(json_attr)
    return lambda source: (written_of(source), None)


def _passthrough(both: Any, fdl: FieldDetailsList) -> tuple[int, Callable[[Any], Any]]:
    """A getter of the written answer when it was written for this very field node, else of the rows."""
    node = fdl[0].node if len(fdl) == 1 else None
    if node is None:
        # Merged from several nodes: no written answer is for all of them.
        return PREFETCHED, lambda source: both(source)[1]

    def get(source: Any) -> Any:
        written, rows = both(source)
        return written[1] if written is not None and written[0] is node else rows

    return PASSTHROUGH, get


def plan_field(schema: GraphQLSchema, parent_type: GraphQLObjectType, name: str, fdl: FieldDetailsList) -> PlanEntry:
    """The plan of one response field; generic (graphql-core's own path) for anything unusual."""
    generic = PlanEntry(name, fdl, None, GENERIC, None, None, True, OTHER, None, None)
    for details in fdl:
        if details.defer_usage is not None or details.fragment_variable_values is not None:
            return generic
        for directive in details.node.directives or ():
            if directive.name.value not in _ALLOWED_DIRECTIVES:
                return generic
    field_name = fdl[0].node.name.value
    if field_name == "__typename":
        return PlanEntry(name, fdl, None, TYPENAME, None, None, True, OTHER, None, None)
    field_def = schema.get_field(parent_type, field_name)
    if field_def is None:
        return generic
    kind, getter, spec = static_plan(field_def)
    if kind == GENERIC or spec is None:
        return generic
    if kind == PASSTHROUGH:
        kind, getter = _passthrough(getter, fdl)
    nullable, code, detail = spec
    return PlanEntry(name, fdl, field_def, kind, getter, spec, nullable, code, detail, _passed_as(spec))
