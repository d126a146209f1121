"""Every argument of every field checked before its resolver runs (resolvers/inputs.py says what is checked).

The check is a field extension that only reshapes converted arguments (`map_arguments`): it adds no resolver
to the field's chain, so the fast executor's plan and the field's own resolver are unchanged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from strawberry.extensions.field_extension import FieldExtension
from strawberry.types.base import StrawberryList, StrawberryOptional, get_object_definition
from strawberry.types.lazy_type import LazyType

from resolvers.inputs import check_arguments


class CheckedArguments(FieldExtension):
    def map_arguments(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        check_arguments(kwargs)
        return kwargs


def _named_type(type_: object) -> object:
    while True:
        if isinstance(type_, StrawberryList | StrawberryOptional):
            type_ = type_.of_type
        elif isinstance(type_, LazyType):
            type_ = type_.resolve_type()
        else:
            return type_


def check_arguments_everywhere(roots: Iterable[type]) -> None:
    """Give every field with arguments, on the types reachable from `roots`, the CheckedArguments extension
    (once: the types are module-level and outlive each schema built from them)."""
    seen: set[object] = set()
    todo: list[object] = list(roots)
    while todo:
        cls = todo.pop()
        definition = get_object_definition(cls) if cls not in seen else None
        seen.add(cls)
        if definition is None:
            continue
        for field in definition.fields:
            if field.arguments and not any(isinstance(e, CheckedArguments) for e in field.extensions):
                field.extensions.append(CheckedArguments())
            todo.append(_named_type(field.type))
