"""A field set's leaves read, checked and gathered by one function written for that field set.

Most of a page's values are leaves read off their source as they are (strings, numbers, flags, UTC times, lists of
strings, enums held as their values). The executor's loop spends more on choosing what to do with each field than on
the field itself: it unpacks the plan's entry, compares kinds and type codes, stores into the answer. A field set is
the same for every object of a list and, for documents whose collections are shared, for every request, so for a set
with enough leaves the plan also carries `leaves`, a function generated once that reads every leaf, checks each
one's type in one expression and returns the answer as a dict display in the selection's order, with a None in the
place of each other field (the executor fills those in). When any leaf is not exactly what it should be (a wrong
type, an int past 32 bits, a time in another zone, a getter that raises) it returns None and the executor's general
loop answers the whole object as before, so errors, paths and nulls stay graphql-core's."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import UTC
from math import isfinite
from typing import Any, Final

from graphql import GraphQLEnumType

from bounded import BoundedCache
from schema.fast_executor.plan import BASIC, BOOL, FLOAT, INT, INT_MAX, INT_MIN, LIST, SCALAR, STR, TYPENAME, PlanEntry

# (source, whether times may pass to the encoder) -> the answer with the other fields' places held, or None.
LeafReader = Callable[[Any, bool], dict[str, Any] | None]
# The reader and the entries it leaves to the executor.
Leaves = tuple[LeafReader, list[PlanEntry]]

# Fewer leaves than this: the general loop costs about what a call would.
MIN_LEAVES: Final = 4
# The zones a time may carry to pass to the encoder as it is (none: a date, or naive); see plan._ISO_TYPES.
ZONES: Final = (None, UTC)


def is_leaf(entry: PlanEntry) -> bool:
    """A __typename, or a field read off its source that is complete when its value has the plan's exact type."""
    return entry.kind == TYPENAME or (entry.kind == BASIC and entry.exact is not None)


def _strings(entry: PlanEntry) -> bool:
    """A field read off its source whose value is a list of non-null strings (categories, topics)."""
    return entry.kind == BASIC and entry.code == LIST and entry.detail[:2] == (False, STR)


def _is_enum(entry: PlanEntry) -> bool:
    """A field read off its source whose type is an enum."""
    return entry.kind == BASIC and entry.code == SCALAR and isinstance(entry.detail, GraphQLEnumType)


def _enum_names(entry: PlanEntry) -> tuple[frozenset[type], dict[Any, str]]:
    """An enum field's value types (strings, the enum's Python class) and each value with the name the enum writes
    for it, as its own serializer says, asked once when the reader is written."""
    enum_type = entry.detail
    python_class = getattr(enum_type, "wrapped_cls", None)
    candidates = [v.value for v in enum_type.values.values() if type(v.value) is str]
    if isinstance(python_class, type):
        candidates += list(python_class)  # type: ignore[call-overload]
    names: dict[Any, str] = {}
    for value in candidates:
        with contextlib.suppress(Exception):
            name = enum_type.serialize(value)
            if type(name) is str:
                names[value] = name
    return frozenset({str, *([python_class] if isinstance(python_class, type) else [])}), names


def _readable(entry: PlanEntry) -> bool:
    return (is_leaf(entry) and entry.kind == BASIC) or _strings(entry) or _is_enum(entry)


def _check(i: int, entry: PlanEntry) -> str:
    nullable, code = entry.nullable, entry.code
    value, exact = f"v{i}", f"t{i}"
    if _is_enum(entry):
        test = f"(type({value}) in k{i} and {value} in e{i})"
    elif code == LIST:
        # Every item exactly a string: one set of the items' types, made in C.
        test = f"(type({value}) is list and (not {value} or set(map(type, {value})) == STRINGS))"
    elif code == INT:
        test = f"(type({value}) is {exact} and {INT_MIN} <= {value} <= {INT_MAX})"
    elif code == FLOAT:
        test = f"(type({value}) is {exact} and isfinite({value}))"
    elif code == SCALAR:
        test = f"(passes_times and type({value}) is {exact} and getattr({value}, 'tzinfo', None) in ZONES)"
    else:
        assert code in (STR, BOOL)
        test = f"type({value}) is {exact}"
    return f"({value} is None or {test})" if nullable else test


def compile_leaves(type_name: str, entries: Sequence[PlanEntry]) -> Leaves | None:
    """The leaf reader of a field set of `type_name`, or None when it has too few leaves to be worth one."""
    leaves = {i for i, entry in enumerate(entries) if _readable(entry)}
    if len(leaves) < MIN_LEAVES:
        return None
    rest = [entry for i, entry in enumerate(entries) if i not in leaves and entry.kind != TYPENAME]
    # A reader is a function of the response names, the leaves' field definitions and the places of the others:
    # documents whose plans are made per request (their variables can change what they select) find it here.
    fields = tuple(entries[i].field_def for i in sorted(leaves))
    places = ((e.name, id(e.field_def) if i in leaves else e.kind == TYPENAME) for i, e in enumerate(entries))
    key = (type_name, *places)
    known = _READERS.get(key)
    if known is not None and all(a is b for a, b in zip(known[0], fields, strict=True)):
        return known[1], rest
    reader, size = _write_reader(type_name, entries, leaves)
    # The field definitions are kept with their reader, so that their ids are not reused by others.
    _READERS.put(key, (fields, reader), size)
    return reader, rest


# Readers by what they are written from (see compile_leaves), least recently used first out past READERS_BYTES.
# Response names come from clients: bounded by count (4,096), readers of distinct aliases held 90 MB in a worker.
# A reader is charged 6 bytes a character of its source and 6 KB: traced, one takes 4.5 to 5.5 and 5 KB (code, names).
READERS_BYTES: Final = 4 * 1024 * 1024
_READERS: BoundedCache[tuple[Any, ...], tuple[tuple[Any, ...], LeafReader]] = BoundedCache(READERS_BYTES)


def _write_reader(type_name: str, entries: Sequence[PlanEntry], leaves: set[int]) -> tuple[LeafReader, int]:
    """The reader, and the bytes it takes (about)."""
    namespace: dict[str, Any] = {"isfinite": isfinite, "ZONES": ZONES, "STRINGS": {str}}
    reads, checks, items = [], [], []
    for i, entry in enumerate(entries):
        # Response names are GraphQL names ([_A-Za-z][_0-9A-Za-z]*): safe as string literals.
        key = repr(entry.name)
        if i in leaves:
            namespace[f"g{i}"], namespace[f"t{i}"] = entry.getter, entry.exact
            reads.append(f"        v{i} = g{i}(source)")
            checks.append(_check(i, entry))
            if _strings(entry):
                # A list is answered as a copy, as graphql-core answers (None and [] stay themselves).
                items.append(f"{key}: v{i} and list(v{i})")
            elif _is_enum(entry):
                namespace[f"k{i}"], namespace[f"e{i}"] = _enum_names(entry)
                items.append(f"{key}: e{i}.get(v{i})")  # the enum's name for the value (None for None)
            else:
                items.append(f"{key}: v{i}")
        elif entry.kind == TYPENAME:
            items.append(f"{key}: {type_name!r}")
        else:
            items.append(f"{key}: None")
    source = "\n".join(
        [
            "def leaves(source, passes_times):",
            "    try:",
            *reads,
            "    except Exception:",
            "        return None",
            f"    if not ({' and '.join(checks)}):",
            "        return None",
            f"    return {{{', '.join(items)}}}",
        ]
    )
    exec(compile(source, f"<leaves of {type_name}>", "exec"), namespace)  # noqa: S102 - generated from the plan
    reader: LeafReader = namespace["leaves"]
    return reader, 6 * len(source) + 6 * 1024
