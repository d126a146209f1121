"""Row objects built from asyncpg records by column name.

A row type's constructor fields are matched to a result's columns by name (optionally with a prefix, where
one statement returns two row types whose column names would clash). The positions are looked up once per
result shape, so building a row costs one C-level item fetch per field: a statement may reorder, add or
drop columns without shifting a row's fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Generic, TypeVar

import asyncpg

T = TypeVar("T")


class ShapeError(LookupError):
    """A result lacks a column a row type needs, or names it twice."""


def constructor_fields(cls: type[Any]) -> tuple[str, ...]:
    """The dataclass fields a record must supply: those without a default (the rest are filled later)."""
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


class RowShape(Generic[T]):
    """How records become rows of one type: `build` one, `build_all` of a result."""

    __slots__ = ("_make", "_readers", "cls", "fields")

    def __init__(self, cls: type[T], fields: Sequence[str] | None = None) -> None:
        self.cls = cls
        self._make: Callable[..., T] = cls
        self.fields = tuple(fields) if fields is not None else constructor_fields(cls)
        # By (the result's column names, prefix): a handful of statements read each row type.
        self._readers: dict[tuple[tuple[str, ...], str], Callable[[asyncpg.Record], T]] = {}

    def reader(self, record: asyncpg.Record, prefix: str = "") -> Callable[[asyncpg.Record], T]:
        """A builder for every record shaped like this one (same columns in the same order)."""
        key = (tuple(record.keys()), prefix)
        read = self._readers.get(key)
        if read is None:
            read = self._readers[key] = self._new_reader(*key)
        return read

    def build(self, record: asyncpg.Record, prefix: str = "") -> T:
        return self.reader(record, prefix)(record)

    def build_all(self, records: Sequence[asyncpg.Record], prefix: str = "") -> list[T]:
        if not records:
            return []
        read = self.reader(records[0], prefix)
        return [read(r) for r in records]

    def _new_reader(self, keys: tuple[str, ...], prefix: str) -> Callable[[asyncpg.Record], T]:
        index = []
        for name in self.fields:
            column = prefix + name
            if keys.count(column) != 1:
                found = "twice" if column in keys else "not at all"
                raise ShapeError(f"{self.cls.__name__}.{name}: column {column!r} is in the result {found}")
            index.append(keys.index(column))
        make = self._make
        if len(index) == 1:
            only = index[0]
            return lambda r: make(r[only])
        get = itemgetter(*index)
        return lambda r: make(*get(r))


class CountedRows(list[T]):
    """A page's rows, with the whole list's count when the statement that read them counted it too (else None)."""

    __slots__ = ("total",)

    def __init__(self, rows: Sequence[T] = (), total: int | None = None) -> None:
        super().__init__(rows)
        self.total = total


def select_list(alias: str, fields: Sequence[str], *, prefix: str = "") -> str:
    """`alias.field AS prefix+field, ...` for a row type's fields."""
    return ", ".join(f"{alias}.{name} AS {prefix}{name}" if prefix else f"{alias}.{name}" for name in fields)
