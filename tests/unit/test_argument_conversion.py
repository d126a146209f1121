"""Arguments converted by a plan made once per field (schema/argument_conversion.py) are the values Strawberry's own
conversion gives, for every argument of the schema; what the plan does not cover keeps Strawberry's conversion."""

from __future__ import annotations

from typing import Any

import pytest
import strawberry
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
)
from graphql.utilities import coerce_input_value
from strawberry.relay import GlobalID

from resolvers.errors import BadUserInput
from resolvers.inputs import check_arguments
from schema import argument_conversion, build_schema
from settings import Settings

_SCALARS: dict[str, object] = {"String": "text", "ID": "an-id", "Int": 7, "Float": 0.5, "Boolean": True}
# Raw values tried, in turn, for a custom scalar: the first it parses is used.
_CANDIDATES: tuple[object, ...] = ("2024-02-03", "2024-02-03T04:05:06+00:00", "text", 7, 0.5, True, {"a": 1})


def _raw(type_: GraphQLInputType, full: bool) -> object:
    """A JSON value of `type_` as a client sends it: every input field set (`full`) or only the required ones."""
    if isinstance(type_, GraphQLNonNull):
        return _raw(type_.of_type, full)
    if isinstance(type_, GraphQLList):
        return [_raw(type_.of_type, full), _raw(type_.of_type, full)]
    if isinstance(type_, GraphQLEnumType):
        return next(iter(type_.values))
    if isinstance(type_, GraphQLInputObjectType):
        return {
            name: _raw(field.type, full)
            for name, field in type_.fields.items()
            if full or isinstance(field.type, GraphQLNonNull)
        }
    assert isinstance(type_, GraphQLScalarType)
    if type_.name in _SCALARS:
        return _SCALARS[type_.name]
    for candidate in _CANDIDATES:
        try:
            type_.parse_value(candidate)
        except Exception:  # noqa: BLE001,S112 - the next candidate
            continue
        return candidate
    raise AssertionError(f"no sample value for {type_.name}")


def _cases() -> list[tuple[str, dict[str, Any]]]:
    """(field, arguments as graphql-core passes them) for every field with arguments: all given and filled, only
    the required ones, and each nullable one given as null."""
    schema = build_schema(Settings())
    cases = []
    for type_ in schema._schema.type_map.values():
        if not isinstance(type_, GraphQLObjectType) or type_.name.startswith("__"):
            continue
        for name, field in type_.fields.items():
            if not field.args:
                continue
            where = f"{type_.name}.{name}"
            for full in (True, False):
                raw = {
                    arg_name: _raw(arg.type, full)
                    for arg_name, arg in field.args.items()
                    if full or isinstance(arg.type, GraphQLNonNull)
                }
                cases.append((where, {k: coerce_input_value(v, field.args[k].type) for k, v in raw.items()}))
            nulls = {k: None for k, arg in field.args.items() if not isinstance(arg.type, GraphQLNonNull)}
            if nulls:
                cases.append((where, nulls))
    return cases


_SCHEMA = build_schema(Settings())
_CASES = _cases()


def _field(where: str) -> Any:
    type_name, field_name = where.split(".")
    return _SCHEMA._schema.type_map[type_name].fields[field_name].extensions["strawberry-definition"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("where", "kwargs"), _CASES, ids=[f"{w}-{i}" for i, (w, _) in enumerate(_CASES)])
def test_every_argument_converts_as_strawberry_converts_it(where: str, kwargs: dict[str, Any]) -> None:
    field = _field(where)
    source, info = object(), object()
    common = {"field": field, "source": source, "info": info, "config": _SCHEMA.config}
    common["scalar_registry"] = _SCHEMA.schema_converter.scalar_registry
    planned = argument_conversion.get_arguments(kwargs=dict(kwargs), **common)
    theirs = argument_conversion._strawberry_get_arguments(kwargs=dict(kwargs), **common)
    assert planned == theirs
    assert [type(v) for v in planned[1].values()] == [type(v) for v in theirs[1].values()]


def test_the_schemas_arguments_are_planned_not_left_to_strawberry() -> None:
    registry = _SCHEMA.schema_converter.scalar_registry
    unplanned = sorted(
        where
        for where, _ in _CASES
        if argument_conversion._plan(_field(where), registry, _SCHEMA.config) is argument_conversion._UNPLANNED
    )
    assert unplanned == []
    assert len({where for where, _ in _CASES}) > 30


def test_a_list_of_leaves_is_a_fresh_copy_each_call() -> None:
    # graphql-core hands every request that omits a list the same default object.
    shared = ["a", "b"]
    copied = argument_conversion._copied_list(shared)
    assert copied == shared and copied is not shared


@strawberry.input
class Box:
    node: GlobalID | None = None
    label: str = "none"


@strawberry.input
class Loose:
    note: str | None
    tags: list[str] | None


@strawberry.type
class Query:
    @strawberry.field
    def loose(self, arg: Loose) -> str:
        return f"{arg.note}:{arg.tags}"

    @strawberry.field
    def echo(self, node: GlobalID) -> str:
        return f"{node.type_name}:{node.node_id}"

    @strawberry.field
    def boxed(self, box: Box) -> str:
        return f"{box.label}:{box.node.node_id if box.node else '-'}"

    @strawberry.field
    def words(self, words: list[str] | None = None, count: int = 1) -> str:
        return ",".join((words or []) * count)


def test_what_the_plan_does_not_cover_keeps_strawberrys_conversion() -> None:
    argument_conversion.install()
    schema = strawberry.Schema(Query)
    node = GlobalID("Paper", "12")
    result = schema.execute_sync(
        'query($n: ID!, $b: Box!) { echo(node: $n) boxed(box: $b) words(words: ["x", "y"], count: 2) }',
        variable_values={"n": str(node), "b": {"node": str(node), "label": "k"}},
    )
    assert result.errors is None
    assert result.data == {"echo": "Paper:12", "boxed": "k:12", "words": "x,y,x,y"}
    registry = schema.schema_converter.scalar_registry
    fields = {f.python_name: f for f in Query.__strawberry_definition__.fields}  # type: ignore[attr-defined]
    assert argument_conversion._plan(fields["echo"], registry, schema.config) is argument_conversion._UNPLANNED
    assert argument_conversion._plan(fields["boxed"], registry, schema.config) is argument_conversion._UNPLANNED
    assert isinstance(argument_conversion._plan(fields["words"], registry, schema.config), tuple)


def test_an_input_field_without_a_default_is_null_when_omitted() -> None:
    schema = strawberry.Schema(Query)
    field = next(f for f in Query.__strawberry_definition__.fields if f.python_name == "loose")  # type: ignore[attr-defined]
    common = {"field": field, "source": None, "info": None, "config": schema.config}
    common["scalar_registry"] = schema.schema_converter.scalar_registry
    for given in ({}, {"note": "n"}, {"tags": ["a"], "note": None}):
        planned = argument_conversion.get_arguments(kwargs={"arg": dict(given)}, **common)
        assert planned == argument_conversion._strawberry_get_arguments(kwargs={"arg": dict(given)}, **common)
        assert planned[1]["arg"] == Loose(note=given.get("note"), tags=given.get("tags"))  # type: ignore[arg-type]


@strawberry.input
class Inner:
    names: list[str]


@strawberry.input
class Outer:
    inner: Inner
    title: str | None = None


def test_refused_text_is_named_where_the_caller_put_it() -> None:
    with pytest.raises(BadUserInput, match=r"^`filter\.title` holds a NUL character"):
        check_arguments({"filter": Outer(inner=Inner(names=["ok"]), title="a\x00b")})
    with pytest.raises(BadUserInput, match=r"^`someFilter\.inner\.names\[1\]` is not valid Unicode"):
        check_arguments({"some_filter": Outer(inner=Inner(names=["ok", "\ud800"]))})
    check_arguments({"filter": Outer(inner=Inner(names=["ok"]), title="fine"), "first": 3, "on": None})
