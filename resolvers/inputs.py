"""The text a caller sends, checked once before any resolver runs (schema/arguments.py applies it to every
argument of every field): PostgreSQL stores no NUL character and no unpaired surrogate, so either would
otherwise fail deep in a statement as a server error instead of a clear BAD_USER_INPUT."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from enum import Enum

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


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _check(value: object, where: str) -> None:
    if isinstance(value, str):
        if (problem := text_problem(value)) is not None:
            raise BadUserInput(f"`{where}` {problem}.")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type | Enum):
        # Input objects (PaperFilter, ...) are dataclasses: their fields are arguments too.
        for f in dataclasses.fields(value):
            _check(getattr(value, f.name), f"{where}.{_camel(f.name)}")


def check_arguments(arguments: Mapping[str, object]) -> None:
    """BadUserInput naming the first argument (or input field, or list entry) PostgreSQL could not take."""
    for name, value in arguments.items():
        _check(value, _camel(name))
