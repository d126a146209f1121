"""Strawberry's argument conversion, planned once per field instead of worked out on every call.

Strawberry turns a resolver's GraphQL arguments into Python values (`get_arguments`) by inspecting each
argument's type on every call: resolving annotations, converting names, walking isinstance chains. For a list
filtered by an input object that was about a tenth of a cold page's CPU. The types do not change while the
schema lives, so `install()` gives Strawberry a `get_arguments` that plans each field's conversion the first time
the field is resolved and then only runs the plan. A field whose arguments use anything this module does not plan
(`Maybe`, `GlobalID`, an input with its own `from_input`, a type it does not know) keeps Strawberry's own
conversion, call for call; the values are the same either way (tests/unit/test_argument_conversion.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING
from typing import Any, Final

import strawberry.schema.schema_converter as schema_converter
from strawberry.relay.types import GlobalID
from strawberry.types.arguments import _is_leaf_type, _is_optional_leaf_type
from strawberry.types.base import (
    StrawberryList,
    StrawberryMaybe,
    StrawberryOptional,
    StrawberryType,
    has_object_definition,
)
from strawberry.types.enum import has_enum_definition
from strawberry.types.lazy_type import LazyType
from strawberry.types.unset import UNSET

Convert = Callable[[Any], Any]
# Per argument: (its GraphQL name, its Python name, how its value converts).
Plan = tuple[tuple[str, str, Convert], ...]


class _Unplanned(Exception):
    """A type this module leaves to Strawberry."""


def _same(value: Any) -> Any:
    return value


def _copied_list(value: Any) -> Any:
    # Strawberry copies leaf lists too: graphql-core shares one default value between requests.
    return None if value is None else UNSET if value is UNSET else list(value)


def _converter(type_: StrawberryType | type, registry: Mapping[object, Any], config: Any) -> Convert:
    """Mirrors `strawberry.types.arguments.convert_argument` for one type, decided now rather than per value."""
    if isinstance(type_, StrawberryMaybe) or type_ is GlobalID:
        raise _Unplanned
    if isinstance(type_, StrawberryOptional):
        return _converter(type_.of_type, registry, config)
    if isinstance(type_, StrawberryList):
        item = type_.of_type
        if _is_leaf_type(item, registry, skip_classes=(GlobalID,)) or _is_optional_leaf_type(
            item, registry, skip_classes=(GlobalID,)
        ):
            return _copied_list
        convert_item = _converter(item, registry, config)

        def convert_list(value: Any) -> Any:
            if value is None or value is UNSET:
                return value
            return [convert_item(x) for x in value]

        return convert_list
    if _is_leaf_type(type_, registry):
        return _same
    if isinstance(type_, LazyType):
        return _converter(type_.resolve_type(), registry, config)
    if has_enum_definition(type_):
        return _converter(type_.__strawberry_definition__, registry, config)
    if has_object_definition(type_):
        return _input_converter(type_, registry, config)
    raise _Unplanned


def _input_converter(cls: Any, registry: Mapping[object, Any], config: Any) -> Convert:
    definition = cls.__strawberry_definition__
    if definition.from_input is not None:
        raise _Unplanned
    implicit = (
        {f.python_name: None for f in definition.fields if f.default_value is MISSING and f.default_factory is MISSING}
        if definition.is_input
        else {}
    )
    fields = tuple(
        (
            config.name_converter.from_field(f),
            f.python_name,
            _converter(f.resolve_type(type_definition=definition), registry, config),
        )
        for f in definition.fields
    )

    def convert_input(value: Any) -> Any:
        if value is None or value is UNSET:
            return value
        kwargs = dict(implicit)
        for graphql_name, python_name, convert in fields:
            if graphql_name in value:
                kwargs[python_name] = convert(value[graphql_name])
        return cls(**kwargs)

    return convert_input


_UNPLANNED: Final = object()
_plans: dict[int, tuple[Any, Plan | object]] = {}


def _plan(field: Any, registry: Mapping[object, Any], config: Any) -> Plan | object:
    known = _plans.get(id(field))
    if known is not None and known[0] is field:
        return known[1]
    plan: Plan | object
    try:
        plan = tuple(
            (
                config.name_converter.from_argument(argument),
                argument.python_name,
                _converter(argument.type, registry, config),
            )
            for argument in field.arguments
        )
    except _Unplanned:
        plan = _UNPLANNED
    # The field is kept with its plan, so that its id is not reused by another field.
    _plans[id(field)] = (field, plan)
    return plan


_strawberry_get_arguments: Final = schema_converter.get_arguments


def get_arguments(
    *, field: Any, source: Any, info: Any, kwargs: Any, config: Any, scalar_registry: Mapping[object, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Strawberry's `get_arguments`, with the conversion planned once per field."""
    plan = _plan(field, scalar_registry, config)
    if plan is _UNPLANNED:
        return _strawberry_get_arguments(
            field=field, source=source, info=info, kwargs=kwargs, config=config, scalar_registry=scalar_registry
        )
    assert isinstance(plan, tuple)
    converted: dict[str, Any] = {}
    for graphql_name, python_name, convert in plan:
        if graphql_name in kwargs:
            converted[python_name] = convert(kwargs[graphql_name])
    for extension in field.extensions:
        converted = extension.map_arguments(converted)
    args: list[Any] = []
    resolver = field.base_resolver
    if resolver:
        if resolver.self_parameter:
            args.append(source)
        if parent := resolver.parent_parameter:
            converted[parent.name] = source
        if root := resolver.root_parameter:
            converted[root.name] = source
        if info_parameter := resolver.info_parameter:
            converted[info_parameter.name] = info
    return args, converted


def install() -> None:
    """Strawberry's resolvers look `get_arguments` up in their module on each call: point it here."""
    schema_converter.get_arguments = get_arguments
