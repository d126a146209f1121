"""Statements over a batch of keys, with a second form for a batch of one.

PostgreSQL plans a prepared statement again on every execution for as long as it prefers a custom plan, and it
prefers one whenever an array parameter's length matters to the estimate: a custom plan sees the array, the generic
plan guesses ten elements. Most batches on a page hold one key (the page's researcher, the paper looked up, the
owner of a list), so their statement takes the key as a scalar and PostgreSQL keeps one generic plan for it
(a researcher with affiliations: 0.33 -> 0.08 ms of backend CPU an execution, bench/RESULTS.md).

A statement is written once, with `{keys}` where the keys are a set to select from (`{keys} AS k(id)`), `{keys_ord}`
where they are that set with their ordinal (`{keys_ord} AS k(owner_id, ord)`), or `{in_keys}` after a column that
must be one of them (`p.id {in_keys}`); the markers are replaced, not formatted, so SQL braces are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_MARKERS = ("{keys}", "{keys_ord}", "{in_keys}")


def _forms(pg_type: str, param: str) -> tuple[dict[str, str], dict[str, str]]:
    many = {
        "{keys}": f"unnest(${param}::{pg_type}[])",
        "{keys_ord}": f"unnest(${param}::{pg_type}[]) WITH ORDINALITY",
        "{in_keys}": f"= any(${param}::{pg_type}[])",
    }
    one = {
        "{keys}": f"(VALUES (${param}::{pg_type}))",
        "{keys_ord}": f"(VALUES (${param}::{pg_type}, 1::bigint))",
        "{in_keys}": f"= ${param}::{pg_type}",
    }
    return many, one


def _fill(template: str, forms: dict[str, str]) -> str:
    for marker in _MARKERS:
        template = template.replace(marker, forms[marker])
    return template


@dataclass(frozen=True, slots=True)
class Keyed:
    """One statement in both forms; `bind(keys)` picks the form and its argument."""

    many: str
    one: str

    @classmethod
    def of(cls, template: str, pg_type: str = "bigint", param: int = 1) -> Keyed:
        many, one = _forms(pg_type, str(param))
        return cls(_fill(template, many), _fill(template, one))

    def bind(self, keys: Sequence[Any]) -> tuple[str, Any]:
        return (self.one, keys[0]) if len(keys) == 1 else (self.many, list(keys))


def keyed(template: str, keys: Sequence[Any], pg_type: str = "bigint", param: int = 1) -> tuple[str, Any]:
    """A statement built at run time (its clauses vary) in the form for `keys`, with the keys' argument."""
    return Keyed.of(template, pg_type, param).bind(keys)
