"""A graphql-core executor with a fast path for plain attribute fields.

graphql-core spends several microseconds per field building ``GraphQLResolveInfo``, ``Path``
objects, argument dicts and going through ``complete_value``. For a page of ~800 values that
is most of a request's CPU. This executor reads "basic" Strawberry fields (no resolver, no
extensions), resolver fields marked ``metadata={"prefetched": "<attr>"}`` whose attribute
is already set, and ``metadata={"derived": True}`` fields (a function of the source alone) straight off the
source object, and completes exactly-typed values inline.

Anything unusual - a None in a non-null position, a value of the wrong type, an awaitable, an
Exception value, a raising attribute, abstract types, ``@defer``/``@stream``, fragment
arguments, any field middleware - goes through graphql-core's own completion for that field
(or list item), so results, errors and null propagation are graphql-core's.

It relies on non-public graphql-core 3.3.2 methods (``execute_fields``, ``execute_field``,
``collect_subfields``, ``handle_field_error``, ``complete_value``, ``complete_list_item_value``,
``complete_awaitable_value``, ``complete_awaitable_list_item_value``, ``build_resolve_info``)
and on Strawberry 0.341.2 internals (the ``_get_basic_result`` resolver and the
``strawberry-definition`` extension key): both libraries are pinned, and
tests/unit/test_fast_executor.py compares this executor with the generic one.
"""

from __future__ import annotations

import dis
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from math import isfinite
from operator import attrgetter
from typing import Any, Final

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
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.executor import Executor, to_nodes
from graphql.pyutils import Path, Undefined
from graphql.pyutils.gather_with_cancel import gather_with_cancel
from graphql.type import GraphQLField
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

__all__ = ["FastExecutor", "make_fast", "reads_info"]

DEFINITION_KEY: Final = "strawberry-definition"

# Field kinds in a plan.
_GENERIC: Final = 0
_TYPENAME: Final = 1
_BASIC: Final = 2
_PREFETCHED: Final = 3

# Type codes of a completion spec.
_STR: Final = 0
_INT: Final = 1
_BOOL: Final = 2
_FLOAT: Final = 3
_SCALAR: Final = 4
_OBJ: Final = 5
_LIST: Final = 6
_OTHER: Final = 7

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1


class _Slow:
    """Marks a value the fast path declines; graphql-core completes it instead."""


_SLOW: Final = _Slow()

# (nullable, code, detail): detail is the leaf/object GraphQL type, or the item spec for lists.
Spec = tuple[bool, int, Any]
# (response name, field details, field definition, kind, getter, spec)
# (response name, field details, field definition, kind, getter, spec, and the spec's three parts again,
# flattened so the hot loop unpacks once)
PlanEntry = tuple[
    str, FieldDetailsList, GraphQLField | None, int, Callable[[Any], Any] | None, Spec | None, bool, int, Any
]

_ALLOWED_DIRECTIVES: Final = frozenset({"include", "skip"})


def _spec(type_: GraphQLOutputType) -> Spec:
    nullable = not is_non_null_type(type_)
    if not nullable:
        type_ = type_.of_type  # type: ignore[union-attr]
    if is_list_type(type_):
        return (nullable, _LIST, _spec(type_.of_type))
    if type_ is GraphQLString or type_ is GraphQLID:
        return (nullable, _STR, type_)
    if type_ is GraphQLInt:
        return (nullable, _INT, type_)
    if type_ is GraphQLBoolean:
        return (nullable, _BOOL, type_)
    if type_ is GraphQLFloat:
        return (nullable, _FLOAT, type_)
    if is_leaf_type(type_):
        return (nullable, _SCALAR, type_)
    if is_object_type(type_):
        assert isinstance(type_, GraphQLObjectType)
        if type_.is_type_of is None:
            return (nullable, _OBJ, (type_, None, False))
        definition = (type_.extensions or {}).get(DEFINITION_KEY)
        # Strawberry's generated is_type_of (for types with interfaces) never reads `info`; a
        # user-supplied one might, so it gets the field's real GraphQLResolveInfo, as in graphql-core.
        generated = definition is not None and getattr(definition, "is_type_of", True) is None
        return (nullable, _OBJ, (type_, type_.is_type_of, not generated and reads_info(type_.is_type_of)))
    return (nullable, _OTHER, type_)


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


def _static_plan(field_def: GraphQLField) -> tuple[int, Callable[[Any], Any] | None, Spec | None]:
    """How a schema field can be read, worked out once per field definition (they live as long as the schema)."""
    cached = _STATIC.get(id(field_def))
    if cached is not None and cached[0] is field_def:
        return cached[1]
    static: tuple[int, Callable[[Any], Any] | None, Spec | None] = (_GENERIC, None, None)
    definition = (field_def.extensions or {}).get(DEFINITION_KEY)
    resolve = field_def.resolve
    if definition is None:
        pass
    elif (
        resolve is not None and getattr(resolve, "__name__", None) == "_get_basic_result" and definition.is_basic_field
    ):
        static = (_BASIC, _getter_for(definition, definition.python_name), _spec(field_def.type))
    else:
        metadata = getattr(definition, "metadata", None)
        attr = metadata.get("prefetched") if isinstance(metadata, Mapping) else None
        plain = not field_def.args and not definition.extensions and not getattr(definition, "permission_classes", None)
        derive = _derived(definition) if isinstance(metadata, Mapping) and metadata.get("derived") else None
        if isinstance(attr, str) and plain:
            static = (_PREFETCHED, attrgetter(attr), _spec(field_def.type))
        elif derive is not None and plain:
            static = (_BASIC, derive, _spec(field_def.type))
    # Keep the definition alive with its entry so its id cannot be reused by another one.
    _STATIC[id(field_def)] = (field_def, static)
    return static


def make_fast(base_cls: type[Executor[Any]]) -> type[Executor[Any]]:
    """Return a subclass of ``base_cls`` (an Executor class) with the fast path installed."""

    class FastExecutor(base_cls):  # type: ignore[valid-type,misc]
        _fast_plans: dict[int, tuple[GroupedFieldSet, list[PlanEntry]]]

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Plans are per request: grouped field sets are per request objects, memoized by
            # collect_subfields, so a list of 24 papers builds its plan once.
            self._fast_plans = {}
            manager = self.middleware_manager
            self._fast_enabled = manager is None or not manager.middlewares

        # --- planning -------------------------------------------------------------------

        def _plan(self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet) -> list[PlanEntry]:
            cached = self._fast_plans.get(id(grouped_field_set))
            if cached is not None:
                return cached[1]
            plan = [self._plan_field(parent_type, name, fdl) for name, fdl in grouped_field_set.items()]
            # Keep the grouped field set alive with its plan so its id cannot be reused.
            self._fast_plans[id(grouped_field_set)] = (grouped_field_set, plan)
            return plan

        def _plan_field(self, parent_type: GraphQLObjectType, name: str, fdl: FieldDetailsList) -> PlanEntry:
            generic: PlanEntry = (name, fdl, None, _GENERIC, None, None, True, _OTHER, None)
            for details in fdl:
                if details.defer_usage is not None or details.fragment_variable_values is not None:
                    return generic
                for directive in details.node.directives or ():
                    if directive.name.value not in _ALLOWED_DIRECTIVES:
                        return generic
            field_name = fdl[0].node.name.value
            if field_name == "__typename":
                return (name, fdl, None, _TYPENAME, None, None, True, _OTHER, None)
            field_def = self.schema.get_field(parent_type, field_name)
            if field_def is None:
                return generic
            kind, getter, spec = _static_plan(field_def)
            if kind == _GENERIC or spec is None:
                return generic
            return (name, fdl, field_def, kind, getter, spec, *spec)

        # --- execution ------------------------------------------------------------------

        def execute_fields(
            self,
            parent_type: GraphQLObjectType,
            source_value: Any,
            path: Path | None,
            grouped_field_set: GroupedFieldSet,
            position_context: Any,
        ) -> Any:
            if position_context is not None or not self._fast_enabled:
                return super().execute_fields(parent_type, source_value, path, grouped_field_set, position_context)
            plan = self._plan(parent_type, grouped_field_set)
            is_awaitable = self.is_awaitable
            results: dict[str, Any] = {}
            awaitable_fields: list[str] = []
            type_name = parent_type.name
            try:
                for name, fdl, field_def, kind, getter, spec, nullable, code, detail in plan:
                    if kind >= _BASIC:
                        assert getter is not None and spec is not None and field_def is not None
                        try:
                            value = getter(source_value)
                        except Exception as raw_error:
                            self.handle_field_error(raw_error, field_def.type, fdl, Path(path, name, type_name))
                            results[name] = None
                            continue
                        # Inline completion of the common cases; anything else goes to _fast_field.
                        if code == _STR:
                            if type(value) is str:
                                results[name] = value
                                continue
                        elif code == _INT:
                            if type(value) is int and _INT_MIN <= value <= _INT_MAX:
                                results[name] = value
                                continue
                        elif code == _BOOL:
                            if type(value) is bool:
                                results[name] = value
                                continue
                        elif code == _FLOAT:
                            if type(value) is float and isfinite(value):
                                results[name] = value
                                continue
                        elif code == _SCALAR:
                            if value is not None and not isinstance(value, Exception) and not is_awaitable(value):
                                try:
                                    coerced = detail.coerce_output_value(value)
                                except Exception:
                                    coerced = None  # graphql-core's completion raises it again, located
                                if coerced is not None and coerced is not Undefined:
                                    results[name] = coerced
                                    continue
                        elif code == _OBJ:
                            object_type, is_type_of, needs_info = detail
                            if (
                                value is not None
                                and not needs_info
                                and not isinstance(value, Exception)
                                and not is_awaitable(value)
                                and (is_type_of is None or is_type_of(value, None) is True)
                            ):
                                grouped, new_defer_usages, forbidden = self.collect_subfields(object_type, fdl)
                                if not new_defer_usages and not forbidden:
                                    field_path = Path(path, name, type_name)
                                    try:
                                        result = self.execute_fields(object_type, value, field_path, grouped, None)
                                    except Exception as raw_error:
                                        self.handle_field_error(raw_error, field_def.type, fdl, field_path)
                                        results[name] = None
                                        continue
                                    if type(result) is dict:
                                        results[name] = result
                                        continue
                                    results[name] = self._await_completed(result, field_def.type, fdl, field_path)
                                    awaitable_fields.append(name)
                                    continue
                        elif code == _LIST and (type(value) is list or type(value) is tuple):
                            field_path = Path(path, name, type_name)
                            try:
                                result = self._complete_list(detail, parent_type, field_def, fdl, field_path, value)
                            except Exception as raw_error:
                                self.handle_field_error(raw_error, field_def.type, fdl, field_path)
                                results[name] = None
                                continue
                            if type(result) is list:
                                results[name] = result
                                continue
                            results[name] = self._await_completed(result, field_def.type, fdl, field_path)
                            awaitable_fields.append(name)
                            continue
                        if value is None:
                            if kind == _PREFETCHED:
                                # Not prefetched: the field's resolver (a DataLoader) answers.
                                result = self.execute_field(
                                    parent_type, source_value, fdl, Path(path, name, type_name), None
                                )
                            elif nullable:
                                results[name] = None
                                continue
                            else:
                                result = self._fast_field(
                                    parent_type, field_def, fdl, Path(path, name, type_name), value, spec
                                )
                        else:
                            result = self._fast_field(
                                parent_type, field_def, fdl, Path(path, name, type_name), value, spec
                            )
                    elif kind == _TYPENAME:
                        results[name] = type_name
                        continue
                    else:
                        result = self.execute_field(parent_type, source_value, fdl, Path(path, name, type_name), None)
                        if result is Undefined:
                            continue
                    results[name] = result
                    if is_awaitable(result):
                        awaitable_fields.append(name)
            except Exception:
                if awaitable_fields:
                    self.settle_in_background([results[field] for field in awaitable_fields])
                raise

            if not awaitable_fields:
                return results

            async def get_results() -> dict[str, Any]:
                if len(awaitable_fields) == 1:
                    field = awaitable_fields[0]
                    results[field] = await results[field]
                else:
                    awaited = await gather_with_cancel(*(results[field] for field in awaitable_fields))
                    results.update(zip(awaitable_fields, awaited, strict=True))
                return results

            return get_results()

        def _fast_field(
            self,
            parent_type: GraphQLObjectType,
            field_def: GraphQLField,
            fdl: FieldDetailsList,
            path: Path,
            value: Any,
            spec: Spec,
        ) -> Any:
            """Complete an already-read field value; mirrors execute_field after the resolver call."""
            return_type = field_def.type
            try:
                completed = self._complete_fast(spec, parent_type, field_def, fdl, path, value)
            except Exception as raw_error:
                self.handle_field_error(raw_error, return_type, fdl, path)
                return None
            if completed is _SLOW:
                return self._complete_generic(parent_type, field_def, fdl, path, value)
            if self.is_awaitable(completed):
                return self._await_completed(completed, return_type, fdl, path)
            return completed

        def _complete_fast(
            self,
            spec: Spec,
            parent_type: GraphQLObjectType,
            field_def: GraphQLField,
            fdl: FieldDetailsList,
            path: Path,
            value: Any,
            info: Any = None,
        ) -> Any:
            """The completed value, an awaitable of it, or _SLOW (nothing done yet) to decline.

            ``info`` is the field's resolve info when the caller has one (list items share the list
            field's, as in graphql-core); it is built only for an is_type_of that may read it.
            """
            nullable, code, detail = spec
            if value is None:
                return None if nullable else _SLOW
            if code == _STR:
                return value if type(value) is str else _SLOW
            if code == _INT:
                return value if type(value) is int and _INT_MIN <= value <= _INT_MAX else _SLOW
            if code == _BOOL:
                return value if type(value) is bool else _SLOW
            if code == _FLOAT:
                return value if type(value) is float and math.isfinite(value) else _SLOW
            if isinstance(value, Exception) or self.is_awaitable(value):
                return _SLOW
            if code == _SCALAR:
                try:
                    coerced = detail.coerce_output_value(value)
                except Exception:
                    return _SLOW
                return _SLOW if coerced is None or coerced is Undefined else coerced
            if code == _OBJ:
                object_type, is_type_of, needs_info = detail
                if is_type_of is not None:
                    if needs_info and info is None:
                        info = self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
                    if is_type_of(value, info) is not True:
                        return _SLOW
                grouped, new_defer_usages, forbidden = self.collect_subfields(object_type, fdl)
                if new_defer_usages or forbidden:
                    return _SLOW
                return self.execute_fields(object_type, value, path, grouped, None)
            if code == _LIST:
                if type(value) is not list and type(value) is not tuple:
                    return _SLOW
                return self._complete_list(detail, parent_type, field_def, fdl, path, value)
            return _SLOW

        def _complete_list(
            self,
            item_spec: Spec,
            parent_type: GraphQLObjectType,
            field_def: GraphQLField,
            fdl: FieldDetailsList,
            path: Path,
            items: list[Any] | tuple[Any, ...],
        ) -> Any:
            is_awaitable = self.is_awaitable
            item_type = field_def.type
            if is_non_null_type(item_type):
                item_type = item_type.of_type
            item_type = item_type.of_type  # type: ignore[union-attr]
            completed: list[Any] = []
            append = completed.append
            awaitable_indices: list[int] = []
            nullable, code, detail = item_spec
            # One resolve info for the whole list, as graphql-core's complete_list_value has.
            info = (
                self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
                if code == _OBJ and detail[2] and items
                else None
            )
            # Lists of objects (a page's papers, their authors) are the other common case.
            object_type: GraphQLObjectType | None = None
            grouped: GroupedFieldSet = {}
            is_type_of = None
            if code == _OBJ:
                object_type, is_type_of, _ = detail
                grouped, new_defer_usages, forbidden = self.collect_subfields(object_type, fdl)
                if new_defer_usages or forbidden:
                    object_type = None
            try:
                for index, item in enumerate(items):
                    # Leaf lists (categories, topics) are the common case: no Path needed.
                    if code == _STR and type(item) is str:
                        append(item)
                        continue
                    if (
                        object_type is not None
                        and item is not None
                        and not isinstance(item, Exception)
                        and not is_awaitable(item)
                        and (is_type_of is None or is_type_of(item, info) is True)
                    ):
                        item_path = Path(path, index, None)
                        try:
                            result = self.execute_fields(object_type, item, item_path, grouped, None)
                        except Exception as raw_error:
                            self.handle_field_error(raw_error, item_type, fdl, item_path)
                            append(None)
                            continue
                        if type(result) is dict:
                            append(result)
                        else:
                            append(self._await_completed(result, item_type, fdl, item_path))
                            awaitable_indices.append(index)
                        continue
                    if item is None and nullable:
                        append(None)
                        continue
                    item_path = path.add_key(index, None)
                    try:
                        result = self._complete_fast(item_spec, parent_type, field_def, fdl, item_path, item, info)
                    except Exception as raw_error:
                        self.handle_field_error(raw_error, item_type, fdl, item_path)
                        append(None)
                        continue
                    if result is _SLOW:
                        if info is None:
                            info = self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
                        if is_awaitable(item):
                            append(self.complete_awaitable_list_item_value(item, item_type, fdl, info, item_path, None))
                            awaitable_indices.append(index)
                        elif self.complete_list_item_value(item, completed, item_type, fdl, info, item_path, None):
                            awaitable_indices.append(index)
                        continue
                    if is_awaitable(result):
                        append(self._await_completed(result, item_type, fdl, item_path))
                        awaitable_indices.append(index)
                        continue
                    append(result)
            except Exception:
                if awaitable_indices:
                    self.settle_in_background([completed[i] for i in awaitable_indices])
                raise

            if not awaitable_indices:
                return completed

            async def get_completed() -> list[Any]:
                awaited = await gather_with_cancel(*(completed[i] for i in awaitable_indices))
                for i, sub_result in zip(awaitable_indices, awaited, strict=True):
                    completed[i] = sub_result
                return completed

            return get_completed()

        def _await_completed(
            self, completed: Awaitable[Any], return_type: GraphQLOutputType, fdl: FieldDetailsList, path: Path
        ) -> Awaitable[Any]:
            async def await_completed() -> Any:
                try:
                    return await completed
                except Exception as raw_error:
                    self.handle_field_error(raw_error, return_type, fdl, path)
                    return None

            return await_completed()

        def _complete_generic(
            self,
            parent_type: GraphQLObjectType,
            field_def: GraphQLField,
            fdl: FieldDetailsList,
            path: Path,
            result: Any,
        ) -> Any:
            """graphql-core's execute_field from the point where the resolver has returned."""
            return_type = field_def.type
            info = self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
            try:
                if self.is_awaitable(result):
                    return self.complete_awaitable_value(return_type, fdl, info, path, result, None)
                completed = self.complete_value(return_type, fdl, info, path, result, None)
                if self.is_awaitable(completed):
                    return self._await_completed(completed, return_type, fdl, path)
            except Exception as raw_error:
                self.handle_field_error(raw_error, return_type, fdl, path)
                return None
            return completed

    FastExecutor.__name__ = FastExecutor.__qualname__ = f"Fast{base_cls.__name__}"
    return FastExecutor


# The executor the schema installs: Strawberry's execution context with the fast path.
FastExecutor = make_fast(StrawberryGraphQLCoreExecutionContext)
