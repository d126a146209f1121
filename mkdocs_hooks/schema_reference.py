"""The schema reference page, written from the committed SDL (frontend_contract/schema.graphql)."""

from __future__ import annotations

import re
from pathlib import Path

from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLType,
    GraphQLUnionType,
    build_schema,
    get_named_type,
)
from graphql.language import print_ast

ROOT = Path(__file__).resolve().parents[1]
SDL_PATH = ROOT / "frontend_contract" / "schema.graphql"
BUILT_IN = {"String", "Int", "Float", "Boolean", "ID"}


def _escaped(text: str) -> str:
    """Markdown from a description: `<` and `>` outside code spans shown as written, not read as HTML tags."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else part.replace("<", "&lt;").replace(">", "&gt;") for part in parts)


def _cell(text: str | None) -> str:
    """A description as one table cell: no line breaks, no column separators."""
    if not text:
        return ""
    return _escaped(" ".join(text.split())).replace("|", "\\|")


def _type_ref(type_: GraphQLType) -> str:
    named = get_named_type(type_)
    shown = f"`{type_}`"
    if named is None or named.name in BUILT_IN or named.name.startswith("__"):
        return shown
    return f"[{shown}](#{named.name.lower()})"


def _default(argument: GraphQLArgument | GraphQLInputField) -> str:
    if argument.default_value is None or argument.ast_node is None or argument.ast_node.default_value is None:
        return ""
    return f" = `{print_ast(argument.ast_node.default_value)}`"


def _arguments(args: dict[str, GraphQLArgument]) -> str:
    if not args:
        return ""
    parts = []
    for name, argument in args.items():
        part = f"`{name}`: {_type_ref(argument.type)}{_default(argument)}"
        if argument.description:
            part += f" ({_cell(argument.description)})"
        parts.append(part)
    return "<br>".join(parts)


def _deprecation(reason: str | None) -> str:
    return f" **Deprecated:** {_cell(reason)}" if reason else ""


def _fields_table(fields: dict[str, GraphQLField]) -> list[str]:
    lines = ["| field | type | arguments | description |", "| --- | --- | --- | --- |"]
    for name, field in fields.items():
        description = _cell(field.description) + _deprecation(field.deprecation_reason)
        lines.append(f"| `{name}` | {_type_ref(field.type)} | {_arguments(field.args)} | {description} |")
    return lines


def _input_table(fields: dict[str, GraphQLInputField]) -> list[str]:
    lines = ["| field | type | description |", "| --- | --- | --- |"]
    for name, field in fields.items():
        description = _cell(field.description) + _deprecation(field.deprecation_reason)
        lines.append(f"| `{name}` | {_type_ref(field.type)}{_default(field)} | {description} |")
    return lines


def _section(type_: GraphQLNamedType) -> list[str]:
    lines = [f"### {type_.name}", ""]
    if type_.description:
        lines += [_escaped(type_.description.strip()), ""]
    if isinstance(type_, GraphQLObjectType | GraphQLInterfaceType):
        if type_.interfaces:
            lines += ["Implements " + ", ".join(_type_ref(i) for i in type_.interfaces) + ".", ""]
        lines += _fields_table(type_.fields)
    elif isinstance(type_, GraphQLInputObjectType):
        lines += _input_table(type_.fields)
    elif isinstance(type_, GraphQLEnumType):
        lines += ["| value | description |", "| --- | --- |"]
        for name, value in type_.values.items():
            lines.append(f"| `{name}` | {_cell(value.description)}{_deprecation(value.deprecation_reason)} |")
    elif isinstance(type_, GraphQLUnionType):
        lines += ["One of " + ", ".join(_type_ref(t) for t in type_.types) + "."]
    elif isinstance(type_, GraphQLScalarType) and type_.specified_by_url:
        lines += [f"Specified by <{type_.specified_by_url}>."]
    return lines + [""]


KINDS: tuple[tuple[str, type], ...] = (
    ("Objects", GraphQLObjectType),
    ("Interfaces", GraphQLInterfaceType),
    ("Unions", GraphQLUnionType),
    ("Input objects", GraphQLInputObjectType),
    ("Enums", GraphQLEnumType),
    ("Scalars", GraphQLScalarType),
)


def render(schema: GraphQLSchema) -> str:
    """The page: the root types first, then every other named type by kind and name."""
    roots = [t for t in (schema.query_type, schema.mutation_type, schema.subscription_type) if t is not None]
    lines = [
        "# Schema reference",
        "",
        "Generated from `frontend_contract/schema.graphql`, the committed SDL the API serves (a test fails when it",
        "differs from the schema the code builds). Types, fields, arguments with their defaults, and descriptions.",
        "",
        "## Root types",
        "",
    ]
    for root in roots:
        lines += _section(root)
    others = [
        t
        for name, t in sorted(schema.type_map.items())
        if not name.startswith("__") and name not in BUILT_IN and t not in roots
    ]
    for title, kind in KINDS:
        of_kind = [t for t in others if isinstance(t, kind)]
        if of_kind:
            lines += [f"## {title}", ""]
            for type_ in of_kind:
                lines += _section(type_)
    return "\n".join(lines).rstrip() + "\n"


def render_committed() -> str:
    return render(build_schema(SDL_PATH.read_text()))
