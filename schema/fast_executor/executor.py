"""The executor: graphql-core's, with plain fields read straight off their source and completed inline."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from math import isfinite
from typing import Any

from graphql import GraphQLObjectType, GraphQLOutputType, is_non_null_type
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path, Undefined
from graphql.pyutils.gather_with_cancel import gather_with_cancel
from graphql.type import GraphQLField, GraphQLResolveInfoHelpers
from orjson import Fragment
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from schema.fast_executor import shared
from schema.fast_executor.compiled import ZONES as _ZONES
from schema.fast_executor.compiled import compile_leaves, is_leaf
from schema.fast_executor.plan import (
    BASIC,
    BOOL,
    FLOAT,
    INT,
    INT_MAX,
    INT_MIN,
    LIST,
    OBJ,
    PASSTHROUGH,
    PREFETCHED,
    SCALAR,
    SLOW,
    STR,
    TYPENAME,
    Plan,
    Row,
    Spec,
    as_rows,
    plan_field,
)


async def _gather_fields(results: dict[str, Any], awaitable_fields: list[str]) -> dict[str, Any]:
    if len(awaitable_fields) == 1:
        field = awaitable_fields[0]
        results[field] = await results[field]
    else:
        awaited = await gather_with_cancel(*(results[field] for field in awaitable_fields))
        results.update(zip(awaitable_fields, awaited, strict=True))
    return results


async def _gather_items(completed: list[Any], awaitable_indices: list[int]) -> list[Any]:
    awaited = await gather_with_cancel(*(completed[i] for i in awaitable_indices))
    for i, sub_result in zip(awaitable_indices, awaited, strict=True):
        completed[i] = sub_result
    return completed


def _gather(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
    return gather_with_cancel(*values)


def _untracked(values: Sequence[Any]) -> None:
    """Work handed over after the answer is built: nothing is waiting for it any more."""


_DETACHED_HELPERS = GraphQLResolveInfoHelpers(gather=_gather, track=_untracked)


class FastExecutor(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context with the fast path: the executor the schema installs (unless
    WOVEPAPER_FAST_EXECUTOR is off)."""

    _fast_plans: dict[int, tuple[GroupedFieldSet, Plan]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Plans are per request: grouped field sets are per request objects, memoized by
        # collect_subfields, so a list of 24 papers builds its plan once.
        self._fast_plans = {}
        # Leaf-only objects completed this request, by (field set, source): an object met again (a co-author on
        # several papers of a page, an institution on several authors) gets the same answer.
        self._done: dict[tuple[int, int], tuple[Any, dict[str, Any]]] = {}
        manager = self.middleware_manager
        self._fast_enabled = manager is None or not manager.middlewares
        # Collections (and their plans) are shared across requests when no variable can change them.
        self._shared = shared.for_operation(self.operation, self.fragments) if self._fast_enabled else None
        # Answers written as JSON (an orjson.Fragment) pass through this executor untouched: tell the resolvers.
        # The same encoder (orjson) then writes the answer's datetimes and dates: they pass as they are (plan.py).
        self._passes_times = self._fast_enabled and hasattr(self.context_value, "passes_json")
        if self._passes_times:
            self.context_value.passes_json = True

    def build_response(self, data: dict[str, Any] | None) -> Any:
        """The answer, and the executor's one reference cycle broken: graphql-core keeps helpers bound to the
        executor on it, so that the executor, the request's context and everything they hold would wait for the
        collector's full pass. No resolver starts after this; work still settling in the background holds its own
        references."""
        response = super().build_response(data)
        self.async_helpers = _DETACHED_HELPERS
        return response

    def collect_subfields(self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList) -> Any:
        common = self._shared
        if common is None:
            return super().collect_subfields(return_type, field_details_list)
        key = (return_type, id(field_details_list))
        cached = self._relevant_sub_fields.get(key)
        if cached is not None:
            return cached[1]
        nodes, collection = common.collected_for(return_type, field_details_list)
        if collection is None:
            collection = super().collect_subfields(return_type, field_details_list)
            common.remember(return_type, nodes, collection)
        self._relevant_sub_fields[key] = (field_details_list, collection)
        return collection

    def _plan(self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet) -> Plan:
        common = self._shared
        entry = common.plans.get(id(grouped_field_set)) if common is not None else None
        if common is not None and entry is not None and entry[0] is grouped_field_set:
            if entry[1] is None:
                plan = self._new_plan(parent_type, grouped_field_set)
                common.plans[id(grouped_field_set)] = (grouped_field_set, plan)
                return plan
            found: Plan = entry[1]
            return found
        cached = self._fast_plans.get(id(grouped_field_set))
        if cached is not None:
            return cached[1]
        plan = self._new_plan(parent_type, grouped_field_set)
        # Keep the grouped field set alive with its plan so its id cannot be reused.
        self._fast_plans[id(grouped_field_set)] = (grouped_field_set, plan)
        return plan

    def _new_plan(self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet) -> Plan:
        entries = [plan_field(self.schema, parent_type, name, fdl) for name, fdl in grouped_field_set.items()]
        # Leaf-only: every field a __typename or an attribute read as an exact leaf (its `exact` type).
        leafy = all(is_leaf(e) for e in entries)
        leaves = compile_leaves(parent_type.name, entries)
        return as_rows(entries), leafy, (leaves[0], as_rows(leaves[1])) if leaves is not None else None

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
        entries, leafy, leaves = self._plan(parent_type, grouped_field_set)
        if leafy:
            key = (id(grouped_field_set), id(source_value))
            done = self._done.get(key)
            if done is not None and done[0] is source_value:
                return done[1]
        passes_times = self._passes_times
        # The leaves at once (compiled.py); the places of the other fields are held, in order, for the loop.
        read = leaves[0](source_value, passes_times) if leaves is not None else None
        if read is not None:
            results: dict[str, Any] = read
            entries = leaves[1]
        else:
            results = {}
        awaitable_fields: list[str] = []
        type_name = parent_type.name
        is_awaitable = self.is_awaitable
        # Whether every value was complete as read (no completion, no error): then a leaf-only answer is kept.
        plain = True
        try:
            for entry in entries:
                name, fdl, field_def, kind, getter, _, nullable, code, _, exact = entry
                if kind >= BASIC:
                    assert getter is not None and field_def is not None
                    try:
                        value = getter(source_value)
                    except Exception as raw_error:
                        self.handle_field_error(raw_error, field_def.type, fdl, Path(path, name, type_name))
                        results[name] = None
                        plain = False
                        continue
                    # Exactly typed leaves and nulls, most of a page's values, are complete as read (times too,
                    # for an encoder that writes them as the scalar would).
                    if type(value) is exact:
                        if (
                            (code != INT or INT_MIN <= value <= INT_MAX)
                            and (code != FLOAT or isfinite(value))
                            and (code != SCALAR or (passes_times and getattr(value, "tzinfo", None) in _ZONES))
                        ):
                            results[name] = value
                            continue
                    elif value is None and nullable and kind == BASIC:
                        results[name] = None
                        continue
                    plain = False
                    result = self._complete_read(entry, parent_type, source_value, path, value)
                elif kind == TYPENAME:
                    results[name] = type_name
                    continue
                else:
                    result = self.execute_field(parent_type, source_value, fdl, Path(path, name, type_name), None)
                    if result is Undefined:
                        results.pop(name, None)  # a place the leaf reader held
                        continue
                results[name] = result
                if is_awaitable(result):
                    awaitable_fields.append(name)
        except Exception:
            if awaitable_fields:
                self.settle_in_background([results[field] for field in awaitable_fields])
            raise
        if awaitable_fields:
            return _gather_fields(results, awaitable_fields)
        if leafy and plain:
            self._done[key] = (source_value, results)
        return results

    def _complete_read(
        self, entry: Row, parent_type: GraphQLObjectType, source_value: Any, path: Path | None, value: Any
    ) -> Any:
        """A field read off its source that is not an exact leaf: an object, a list, a scalar, or None."""
        name, fdl, field_def, kind, _, spec, nullable, code, detail, _ = entry
        assert field_def is not None and spec is not None
        if kind == PASSTHROUGH and type(value) is Fragment:
            return value  # the answer, written for this field node (resolvers/written.py)
        field_path = Path(path, name, parent_type.name)
        if code == LIST and (type(value) is list or type(value) is tuple):
            # A page's lists (its papers, their authors) straight to the list's completion.
            try:
                result = self._complete_list(detail, parent_type, field_def, fdl, field_path, value)
            except Exception as raw_error:
                self.handle_field_error(raw_error, field_def.type, fdl, field_path)
                return None
            if type(result) is list:
                return result
            return self._await_completed(result, field_def.type, fdl, field_path)
        if value is None:
            if kind >= PREFETCHED:
                # Not prefetched: the field's resolver (a DataLoader) answers.
                return self.execute_field(parent_type, source_value, fdl, field_path, None)
            if nullable:
                return None
        return self._fast_field(parent_type, field_def, fdl, field_path, value, spec)

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
        if completed is SLOW:
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
        """The completed value, an awaitable of it, or SLOW (nothing done yet) to decline.

        ``info`` is the field's resolve info when the caller has one (list items share the list
        field's, as in graphql-core); it is built only for an is_type_of that may read it.
        """
        nullable, code, detail = spec
        if value is None:
            return None if nullable else SLOW
        if code == STR:
            return value if type(value) is str else SLOW
        if code == INT:
            return value if type(value) is int and INT_MIN <= value <= INT_MAX else SLOW
        if code == BOOL:
            return value if type(value) is bool else SLOW
        if code == FLOAT:
            return value if type(value) is float and isfinite(value) else SLOW
        if isinstance(value, Exception) or self.is_awaitable(value):
            return SLOW
        if code == SCALAR:
            try:
                coerced = detail.coerce_output_value(value)
            except Exception:
                return SLOW
            return SLOW if coerced is None or coerced is Undefined else coerced
        if code == OBJ:
            object_type, is_type_of, needs_info = detail
            if is_type_of is not None:
                if needs_info and info is None:
                    info = self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
                if is_type_of(value, info) is not True:
                    return SLOW
            grouped, new_defer_usages, forbidden = self.collect_subfields(object_type, fdl)
            if new_defer_usages or forbidden:
                return SLOW
            return self.execute_fields(object_type, value, path, grouped, None)
        if code == LIST:
            if type(value) is not list and type(value) is not tuple:
                return SLOW
            return self._complete_list(detail, parent_type, field_def, fdl, path, value)
        return SLOW

    def _complete_list(
        self,
        item_spec: Spec,
        parent_type: GraphQLObjectType,
        field_def: GraphQLField,
        fdl: FieldDetailsList,
        path: Path,
        items: list[Any] | tuple[Any, ...],
    ) -> Any:
        nullable, code, detail = item_spec
        if code == STR and all(type(item) is str for item in items):
            return list(items)  # leaf lists (categories, topics): complete as they are
        item_type = field_def.type
        if is_non_null_type(item_type):
            item_type = item_type.of_type
        item_type = item_type.of_type  # type: ignore[union-attr]
        # One resolve info for the whole list, as graphql-core's complete_list_value has.
        info = None
        if code == OBJ and detail[2]:
            info = self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
        # Lists of objects (a page's papers, their authors) are the other common case: one field set for all.
        object_type, is_type_of, grouped = self._object_items(detail, fdl) if code == OBJ else (None, None, {})
        completed: list[Any] = []
        awaitable_indices: list[int] = []
        try:
            for index, item in enumerate(items):
                item_path = path.add_key(index, None)
                try:
                    if (
                        object_type is not None
                        and item is not None
                        and not isinstance(item, Exception)
                        and not self.is_awaitable(item)
                        and (is_type_of is None or is_type_of(item, info) is True)
                    ):
                        result = self.execute_fields(object_type, item, item_path, grouped, None)
                    elif item is None and nullable:
                        result = None
                    else:
                        result = self._complete_fast(item_spec, parent_type, field_def, fdl, item_path, item, info)
                except Exception as raw_error:
                    self.handle_field_error(raw_error, item_type, fdl, item_path)
                    completed.append(None)
                    continue
                if result is SLOW:
                    if info is None:
                        info = self.build_resolve_info(field_def, to_nodes(fdl), parent_type, path)
                    if self._complete_item_generic(item, completed, item_type, fdl, info, item_path):
                        awaitable_indices.append(index)
                elif type(result) is dict or not self.is_awaitable(result):
                    completed.append(result)
                else:
                    completed.append(self._await_completed(result, item_type, fdl, item_path))
                    awaitable_indices.append(index)
        except Exception:
            if awaitable_indices:
                self.settle_in_background([completed[i] for i in awaitable_indices])
            raise
        return _gather_items(completed, awaitable_indices) if awaitable_indices else completed

    def _object_items(self, detail: Any, fdl: FieldDetailsList) -> tuple[Any, Any, GroupedFieldSet]:
        """The object type, its is_type_of and the field set its items share; no type when they cannot."""
        object_type, is_type_of, _ = detail
        grouped, new_defer_usages, forbidden = self.collect_subfields(object_type, fdl)
        return (None, None, {}) if new_defer_usages or forbidden else (object_type, is_type_of, grouped)

    def _complete_item_generic(
        self, item: Any, completed: list[Any], item_type: Any, fdl: FieldDetailsList, info: Any, item_path: Path
    ) -> bool:
        """graphql-core's completion of one list item, appended to ``completed``; whether it is awaitable."""
        if self.is_awaitable(item):
            completed.append(self.complete_awaitable_list_item_value(item, item_type, fdl, info, item_path, None))
            return True
        return bool(self.complete_list_item_value(item, completed, item_type, fdl, info, item_path, None))

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
