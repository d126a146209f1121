"""The text a caller sends, checked once before any resolver runs (schema/arguments.py applies it to every
argument of every field): PostgreSQL stores no NUL character and no unpaired surrogate, so either would
otherwise fail deep in a statement as a server error instead of a clear BAD_USER_INPUT."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from enum import Enum
from functools import cache
from typing import Final

from resolvers.errors import BadUserInput

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not take this text, or None when it can."""
    if "\x00" in value:
        return "holds a NUL character (\\u0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (an unpaired surrogate)"
    return None


def has_control_characters(value: str) -> bool:
    """Control characters (NUL, newlines, ...): never part of an id, a slug or a route."""
    return _CONTROL.search(value) is not None


@cache
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _input_fields(cls: type) -> tuple[tuple[str, str], ...]:
    """(attribute, GraphQL name) of each field of an input object class (a dataclass); none for other classes."""
    known = _FIELDS.get(cls)
    if known is None:
        plain = not dataclasses.is_dataclass(cls) or issubclass(cls, Enum)
        known = _FIELDS[cls] = () if plain else tuple((f.name, _camel(f.name)) for f in dataclasses.fields(cls))
    return known


_PLAIN: Final = frozenset({int, float, bool, type(None)})


def _problem(value: object) -> tuple[str, str] | None:
    """(where below `value`, what is wrong) of the first text in it PostgreSQL could not take; None when all can.
    The place is spelt only when there is a problem: most calls find none."""
    kind = type(value)
    if kind in _PLAIN:
        return None
    if isinstance(value, str):
        problem = text_problem(value)
        return None if problem is None else ("", problem)
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if (found := _problem(item)) is not None:
                return f"[{i}]{found[0]}", found[1]
        return None
    # Input objects (PaperFilter, ...) are dataclasses: their fields are arguments too.
    for name, graphql_name in _input_fields(kind):
        if (found := _problem(getattr(value, name))) is not None:
            return f".{graphql_name}{found[0]}", found[1]
    return None


def check_arguments(arguments: Mapping[str, object]) -> None:
    """BadUserInput naming the first argument (or input field, or list entry) PostgreSQL could not take."""
    for name, value in arguments.items():
        if (found := _problem(value)) is not None:
            raise BadUserInput(f"`{_camel(name)}{found[0]}` {found[1]}.")
