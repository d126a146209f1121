"""The FastExecutor must give exactly graphql-core's data and errors, only faster.

Every case runs the same operation over freshly built, identical data through a schema with
the generic executor and one with the FastExecutor, and compares data and errors (message and
path). Bad-data cases cover each way a value can leave the fast path.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import gc
import math
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
import pytest
import strawberry
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from bounded import BoundedCache
from schema import fast_executor
from schema.fast_executor import FastExecutor, reads_info


@strawberry.enum
class Kind(enum.Enum):
    THEORY = "theory"
    EXPERIMENT = "experiment"


@strawberry.interface
class Node:
    id: strawberry.ID


@strawberry.type
class Person(Node):
    name: str
    nick: str | None
    age: int
    score: float | None
    born: dt.datetime | None
    kind: Kind
    tags: list[str]
    maybe_tags: list[str | None] | None
    friend_id: strawberry.Private[int] = 0
    prefetched_friend: strawberry.Private[Person | None] = None

    @strawberry.field(metadata={"prefetched": "prefetched_friend"})
    def friend(self, info: strawberry.Info) -> Person | None:
        if self.prefetched_friend is not None:
            return self.prefetched_friend
        return _load_person(info.context["people"], self.friend_id)


async def _load_person(people: dict[int, Person], person_id: int) -> Person | None:
    await asyncio.sleep(0)
    return people.get(person_id)


@strawberry.type
class Venue:
    """A type with its own is_type_of that reads `info`, as graphql-core passes it."""

    name: str
    kind: strawberry.Private[str] = "venue"

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return getattr(obj, "kind", None) == "venue" and info.parent_type.name == "Paper"


@strawberry.type
class Paper:
    title: str
    venue: Venue | None
    venues: list[Venue]
    year: int | None
    people: list[Person]
    maybe_people: list[Person | None] | None
    lead: Person
    co_lead: Person | None


@strawberry.type
class Query:
    @strawberry.field
    def papers(self, info: strawberry.Info) -> list[Paper]:
        return info.context["papers"]  # type: ignore[no-any-return]

    @strawberry.field
    async def async_papers(self, info: strawberry.Info) -> list[Paper] | None:
        await asyncio.sleep(0)
        return info.context["papers"]  # type: ignore[no-any-return]

    @strawberry.field
    def node(self, info: strawberry.Info, id: strawberry.ID) -> Node | None:
        return info.context["people"].get(int(id))  # type: ignore[no-any-return]


GENERIC = strawberry.Schema(query=Query)
FAST = strawberry.Schema(query=Query, execution_context_class=FastExecutor)


def person(i: int, *, prefetch: bool = True) -> Person:
    return Person(
        id=strawberry.ID(str(i)),
        name=f"Person {i}",
        nick=None if i % 2 else f"p{i}",
        age=20 + i,
        score=None if i % 3 == 0 else i / 4,
        born=dt.datetime(1990, 1, 1 + i % 27, tzinfo=dt.UTC),
        kind=Kind.THEORY if i % 2 else Kind.EXPERIMENT,
        tags=[f"t{i}", "shared"],
        maybe_tags=None if i % 4 == 0 else ["x", None],
        friend_id=(i + 1) % 9,
    )


def build(prefetch: bool = True) -> dict[str, Any]:
    people = {i: person(i) for i in range(9)}
    if prefetch:
        for p in people.values():
            p.prefetched_friend = people[p.friend_id]
    papers = [
        Paper(
            title=f"Paper {n}",
            venue=Venue(name=f"Venue {n}") if n else None,
            venues=[Venue(name="A"), Venue(name="B")],
            year=None if n == 1 else 2000 + n,
            people=[people[(n + k) % 9] for k in range(3)],
            maybe_people=[people[n], None],
            lead=people[n],
            co_lead=None if n == 2 else people[n + 3],
        )
        for n in range(3)
    ]
    return {"papers": papers, "people": people}


QUERY = """
query Page($withNick: Boolean!, $skipTags: Boolean!) {
  __typename
  papers {
    __typename
    title
    year
    venue { name }
    venues { name }
    ...PaperPeople
    lead { ...PersonFields friend { name friend { name } } }
    coLead { id, n: name }
  }
}
fragment PaperPeople on Paper {
  people {
    ...PersonFields
    ... on Person { tags @skip(if: $skipTags) }
    friend { __typename id name }
  }
  maybePeople { id name }
}
fragment PersonFields on Person {
  __typename
  id
  name
  alias: name
  nick @include(if: $withNick)
  age
  score
  born
  kind
  tags
  maybeTags
}
"""

ASYNC_QUERY = "{ asyncPapers { title people { name friend { id name } } lead { name tags } } }"
NODE_QUERY = '{ node(id: "4") { __typename id ... on Person { name friend { name } } } }'


def result_of(schema: strawberry.Schema, query: str, context: dict[str, Any], variables: dict[str, Any]) -> Any:
    result = schema.execute_sync(query, variable_values=variables, context_value=context)
    errors = [(e.message, e.path) for e in result.errors or []]
    return result.data, errors


async def aresult_of(schema: strawberry.Schema, query: str, context: dict[str, Any], variables: dict[str, Any]) -> Any:
    result = await schema.execute(query, variable_values=variables, context_value=context)
    errors = [(e.message, e.path) for e in result.errors or []]
    return result.data, errors


class Raising:
    """A Paper look-alike whose title raises: basic fields read attributes, so any object serves."""

    year = 2001
    maybe_people = None
    co_lead = None

    def __init__(self, people: list[Person]) -> None:
        self.people = people
        self.lead = people[0]

    @property
    def title(self) -> str:
        raise ValueError("title unavailable")


async def _value(v: Any) -> Any:
    await asyncio.sleep(0)
    return v


def _papers(d: dict[str, Any]) -> list[Any]:
    return d["papers"]  # type: ignore[no-any-return]


BAD_DATA: dict[str, Callable[[dict[str, Any]], None]] = {
    "clean": lambda d: None,
    "none in non-null leaf": lambda d: setattr(d["people"][1], "name", None),
    "none in non-null object": lambda d: setattr(_papers(d)[1], "lead", None),
    "none in non-null list item": lambda d: _papers(d)[0].people.insert(1, None),
    "none in nullable list item of leaves": lambda d: setattr(d["people"][2], "maybe_tags", [None, "a"]),
    "none in non-null leaf list item": lambda d: d["people"][2].tags.append(None),
    "string for int": lambda d: setattr(d["people"][0], "age", "12"),
    "float for int": lambda d: setattr(d["people"][0], "age", 1.5),
    "int out of 32-bit range": lambda d: setattr(d["people"][0], "age", 2**40),
    "bool for int": lambda d: setattr(d["people"][0], "age", True),
    "int for float": lambda d: setattr(d["people"][1], "score", 3),
    "nan for float": lambda d: setattr(d["people"][1], "score", math.nan),
    "int for string": lambda d: setattr(d["people"][1], "name", 42),
    "string for enum": lambda d: setattr(d["people"][1], "kind", "theory"),
    "string for datetime": lambda d: setattr(d["people"][1], "born", "yesterday"),
    "string for list": lambda d: setattr(d["people"][1], "tags", "abc"),
    "tuple for list": lambda d: setattr(d["people"][1], "tags", ("a", "b")),
    "raising property": lambda d: _papers(d).__setitem__(1, Raising(_papers(d)[1].people)),
    "wrong object type": lambda d: setattr(_papers(d)[0], "lead", Raising([d["people"][0]])),
    "is_type_of rejects object": lambda d: setattr(_papers(d)[1], "venue", Venue(name="x", kind="journal")),
    "is_type_of rejects list item": lambda d: _papers(d)[1].venues.append(Venue(name="x", kind="journal")),
    "exception value in leaf": lambda d: setattr(d["people"][3], "nick", ValueError("no nick")),
    "exception value in object": lambda d: setattr(_papers(d)[0], "co_lead", ValueError("no co-lead")),
    "exception value in list item": lambda d: _papers(d)[2].people.append(ValueError("gone")),
}


def _fresh(d: dict[str, Any], **changes: Any) -> None:
    """Add a person seen in exactly one place, so each awaitable attribute is read once."""
    extra = person(20)
    for name, value in changes.items():
        if name == "late_tag":
            extra.tags.append(value)
        else:
            setattr(extra, name, value)
    _papers(d)[1].people.append(extra)


AWAITABLE_DATA: dict[str, Callable[[dict[str, Any]], None]] = {
    "awaitable leaf": lambda d: _fresh(d, name=_value("Later")),
    "awaitable nullable leaf": lambda d: _fresh(d, nick=_value(None)),
    "awaitable non-null leaf none": lambda d: _fresh(d, name=_value(None)),
    "awaitable list item": lambda d: _fresh(d, late_tag=_value("late tag")),
    "awaitable failing": lambda d: _fresh(d, age=_fail()),
    "awaitable object": lambda d: setattr(_papers(d)[0], "co_lead", _value(person(21))),
    "awaitable non-null object none": lambda d: setattr(_papers(d)[0], "lead", _value(None)),
    "awaitable object list item": lambda d: _papers(d)[1].people.append(_value(person(22))),
}


async def _fail() -> int:
    await asyncio.sleep(0)
    raise RuntimeError("age service down")


VARIABLES = [{"withNick": True, "skipTags": False}, {"withNick": False, "skipTags": True}]


@pytest.mark.parametrize("variables", VARIABLES, ids=["include", "skip"])
@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_same_data_and_errors_as_graphql_core(case: str, variables: dict[str, Any]) -> None:
    outcomes = []
    for schema in (GENERIC, FAST):
        context = build()
        BAD_DATA[case](context)
        outcomes.append(result_of(schema, QUERY, context, variables))
    assert outcomes[0] == outcomes[1]
    data, errors = outcomes[1]
    if case == "clean":
        assert errors == [] and data["papers"][0]["people"][0]["name"] == "Person 0"


@pytest.mark.parametrize("case", sorted(AWAITABLE_DATA))
async def test_awaitables_as_graphql_core(case: str) -> None:
    outcomes = []
    for schema in (GENERIC, FAST):
        context = build()
        AWAITABLE_DATA[case](context)
        outcomes.append(await aresult_of(schema, QUERY, context, VARIABLES[0]))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("query", [QUERY, ASYNC_QUERY, NODE_QUERY], ids=["page", "async-root", "interface"])
@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetched", "resolver"])
async def test_prefetched_and_resolver_paths_agree(query: str, prefetch: bool) -> None:
    outcomes = [await aresult_of(schema, query, build(prefetch), VARIABLES[0]) for schema in (GENERIC, FAST)]
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][1] == []


def test_fast_path_skips_resolve_info_for_plain_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """On clean prefetched data only the root field and Venue's info-reading is_type_of build an info."""
    calls = {"generic": 0, "fast": 0}

    def counting(label: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def build_resolve_info(self: Any, *args: Any) -> Any:
            calls[label] += 1
            return original(self, *args)

        return build_resolve_info

    monkeypatch.setattr(
        FastExecutor, "build_resolve_info", counting("fast", StrawberryGraphQLCoreExecutionContext.build_resolve_info)
    )
    fast = result_of(FAST, QUERY, build(), VARIABLES[0])
    monkeypatch.setattr(
        StrawberryGraphQLCoreExecutionContext,
        "build_resolve_info",
        counting("generic", StrawberryGraphQLCoreExecutionContext.build_resolve_info),
    )
    generic = result_of(GENERIC, QUERY, build(), VARIABLES[0])
    assert fast == generic
    # root `papers`, plus one per `venue` object (2 non-null) and one per `venues` list (3)
    assert calls["fast"] == 1 + 2 + 3
    assert calls["generic"] > 100


def test_field_middleware_turns_the_fast_path_off() -> None:
    """An extension that wraps every field must see every field, so the fast path steps aside."""
    seen: list[str] = []

    class Spy(strawberry.extensions.SchemaExtension):
        def resolve(self, _next: Callable[..., Any], root: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(info.field_name)
            return _next(root, info, *args, **kwargs)

    spied = strawberry.Schema(query=Query, execution_context_class=FastExecutor, extensions=[Spy])
    fast = result_of(spied, QUERY, build(), VARIABLES[0])
    assert fast == result_of(GENERIC, QUERY, build(), VARIABLES[0])
    assert seen.count("title") == 3 and seen.count("name") > 10


def test_reads_info_is_false_only_when_info_is_provably_unused() -> None:
    class Row:
        @classmethod
        def ignores(cls, obj: Any, info: Any) -> bool:
            return isinstance(obj, Row)

        @classmethod
        def reads(cls, obj: Any, info: Any) -> bool:
            return info.field_name == "x"

        @classmethod
        def captures(cls, obj: Any, info: Any) -> bool:
            return (lambda: info)() is not None

    def variadic(obj: Any, *args: Any) -> bool:
        return True

    assert reads_info(Row.ignores) is False
    assert reads_info(Row.reads) is True
    assert reads_info(Row.captures) is True
    assert reads_info(variadic) is True
    assert reads_info(Venue.is_type_of) is True


# -- the real schema, on the demo data ----------------------------------------------------------------

REAL_OPERATIONS = ("ResearcherPage", "PaperList", "PaperPage", "InstitutionPage", "ResearchersList", "SitemapPage")


def _corrupt(papers: list[Any], how: str) -> None:
    """Break the second paper of a page after its authors are attached, as a buggy row could be."""
    if len(papers) < 2:
        return
    p = papers[1]
    authors = p.prefetched_authors
    if how == "none title":
        p.title = None
    elif how == "string for int":
        p.cited_by_count = "12"
    elif how == "float for int":
        p.cited_by_count = 1.5
    elif how == "none in leaf list":
        p.categories = [*p.categories, None]
    elif how == "string for datetime":
        p.published = "yesterday"
    elif how == "nan for float":
        p.significance_score = math.nan
    elif how == "exception value":
        p.abstract = ValueError("abstract withheld")
    elif how == "none author name" and authors:
        authors[0].name = None
    elif how == "none in object list" and authors is not None:
        authors.append(None)
    elif how == "wrong row type" and authors:
        authors[0].prefetched_researcher = papers[0]


REAL_CASES = (
    "clean",
    "none title",
    "string for int",
    "float for int",
    "none in leaf list",
    "string for datetime",
    "nan for float",
    "exception value",
    "none author name",
    "none in object list",
    "wrong row type",
)


@pytest.fixture(scope="module")
async def real(demo_database_url: str) -> Any:
    from db.pool import create_pool
    from resolvers.context import Context
    from schema import build_schema
    from settings import Settings
    from tests.contract.conftest import operation_text

    settings = Settings(DATABASE_URL=demo_database_url)
    # No masking extension: compare graphql-core's own messages.
    generic = build_schema(settings, extensions=[], execution_context_class=StrawberryGraphQLCoreExecutionContext)
    fast = build_schema(settings, extensions=[])
    assert fast.execution_context_class is fast_executor.FastExecutor, "the schema installs the FastExecutor"
    pool = await create_pool(demo_database_url)
    conn = await pool.acquire()
    try:
        heavy = await conn.fetchval("SELECT id FROM researchers ORDER BY paper_count DESC, id LIMIT 1")
        paper = await conn.fetchval("SELECT arxiv_id FROM papers ORDER BY author_count DESC, id LIMIT 1")
        institution = await conn.fetchval("SELECT ror_id FROM institutions ORDER BY paper_count DESC, id LIMIT 1")
    finally:
        await pool.release(conn)
    variables = {
        "ResearcherPage": {"id": str(heavy)},
        "PaperList": {"first": 24},
        "PaperPage": {"id": paper},
        "InstitutionPage": {"id": institution},
        "ResearchersList": {},
        "SitemapPage": {"kind": "RESEARCHER", "chunk": 0, "chunkSize": 50},
    }

    async def run(schema: Any, name: str) -> Any:
        context = Context.create(pool, settings)
        result = await schema.execute(operation_text(name), variable_values=variables[name], context_value=context)
        # Through JSON, as sent: the FastExecutor's answers may hold JSON PostgreSQL wrote (orjson.Fragment).
        return orjson.loads(orjson.dumps(result.data)), [(e.message, e.path) for e in result.errors or []]

    yield {"generic": generic, "fast": fast, "run": run}
    await pool.close()


@pytest.mark.parametrize("name", REAL_OPERATIONS)
async def test_real_schema_same_results_on_demo_data(real: Any, name: str) -> None:
    generic = await real["run"](real["generic"], name)
    fast = await real["run"](real["fast"], name)
    assert generic == fast
    assert fast[1] == [] and fast[0] is not None


@pytest.mark.parametrize("operation", ["ResearcherPage", "PaperList"])
@pytest.mark.parametrize("how", REAL_CASES)
async def test_real_schema_same_errors_on_bad_rows(
    real: Any, monkeypatch: pytest.MonkeyPatch, operation: str, how: str
) -> None:
    import resolvers.paper_authors
    import resolvers.papers

    original = resolvers.paper_authors.attach_authors

    def attach_then_corrupt(ctx: Any, papers: Any, *args: Any, **kwargs: Any) -> None:
        original(ctx, papers, *args, **kwargs)
        _corrupt(list(papers), how)

    monkeypatch.setattr(resolvers.paper_authors, "attach_authors", attach_then_corrupt)
    # Rows for both executors: the damage is done to rows (JSON written by PostgreSQL has none to damage).
    monkeypatch.setattr(resolvers.paper_authors, "authors_json", lambda node: None)
    monkeypatch.setattr(resolvers.papers, "written_nodes", lambda ctx, look: None)
    generic = await real["run"](real["generic"], operation)
    fast = await real["run"](real["fast"], operation)
    assert generic == fast
    if how not in ("clean", "string for int"):  # graphql-core's Int takes "12" as 12
        assert fast[1], "the corruption must surface as an error"


STATIC_QUERY = QUERY.replace(" @skip(if: $skipTags)", "").replace(" @include(if: $withNick)", "")


def _run_parsed(schema: strawberry.Schema, document: Any, variables: dict[str, Any], executor: Any) -> Any:
    from graphql import execute

    result = execute(
        schema._schema,
        document,
        context_value=build(),
        variable_values=variables,
        executor_class=executor,
    )
    assert not asyncio.iscoroutine(result)
    return result.data, [(e.message, e.path) for e in result.errors or []]  # type: ignore[union-attr]


def _counting_collections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from graphql.execution import executor as graphql_executor

    calls = [0]
    original = graphql_executor.collect_subfields

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(graphql_executor, "collect_subfields", counted)
    return calls


def test_a_document_without_directives_is_collected_once_for_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse cache hands every request of a document the same nodes: the second request collects nothing
    again, and answers as graphql-core does."""
    from graphql import parse

    document = parse(STATIC_QUERY)
    variables = {"withNick": True, "skipTags": False}
    calls = _counting_collections(monkeypatch)
    first = _run_parsed(FAST, document, variables, FastExecutor)
    assert calls[0] > 0
    calls[0] = 0
    second = _run_parsed(FAST, document, variables, FastExecutor)
    assert calls[0] == 0
    generic = _run_parsed(GENERIC, document, variables, StrawberryGraphQLCoreExecutionContext)
    assert first == second == generic
    assert generic[1] == [] and "nick" in generic[0]["papers"][0]["lead"]


def test_a_document_whose_variables_change_its_fields_is_collected_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """`@include`/`@skip` make a collection depend on the variables: the same parsed document with other variables
    gets its own fields, never another request's."""
    from graphql import parse

    document = parse(QUERY)
    calls = _counting_collections(monkeypatch)
    for variables in [*VARIABLES, *VARIABLES]:
        calls[0] = 0
        fast = _run_parsed(FAST, document, variables, FastExecutor)
        assert calls[0] > 0
        assert fast == _run_parsed(GENERIC, document, variables, StrawberryGraphQLCoreExecutionContext)
        lead = fast[0]["papers"][0]["lead"]
        assert ("nick" in lead) is variables["withNick"]


REPEATED_QUERY = "{ papers { people { id nick } lead { __typename id nick } maybePeople { id } } }"


@pytest.mark.parametrize(
    "damage",
    [None, ("nick", 42), ("nick", ValueError("no nick")), ("id", None)],
    ids=["clean", "int for string", "exception value", "none in non-null"],
)
def test_an_object_met_again_answers_as_graphql_core(damage: tuple[str, Any] | None) -> None:
    """The same person on several papers of a page: answered once and reused when every value was complete as
    read; when one was not, each place gets its own errors at its own path, as graphql-core gives them."""
    outcomes = []
    for schema in (GENERIC, FAST):
        context = build()
        if damage is not None:
            setattr(context["people"][1], *damage)
        outcomes.append(result_of(schema, REPEATED_QUERY, context, {}))
    assert outcomes[0] == outcomes[1]
    data, errors = outcomes[1]
    if damage is None:
        people = [p["id"] for paper in data["papers"] for p in paper["people"]]
        assert errors == [] and len(people) > len(set(people))  # someone is met more than once
    elif isinstance(damage[1], Exception):
        assert len({tuple(path) for _, path in errors}) >= 2  # person 1 is on several papers: an error at each


def test_what_is_shared_lives_as_long_as_the_parsed_document() -> None:
    """Nothing outlives the parse cache's copy of a document: a flood of distinct documents holds no memory here,
    and an equal document parsed again is another document (parsed nodes compare equal by content)."""
    import gc

    from graphql import parse

    from schema.fast_executor import shared

    gc.collect()
    before = len(shared._BY_OPERATION)
    document, again = parse(STATIC_QUERY), parse(STATIC_QUERY)
    for d in (document, again):
        _run_parsed(FAST, d, {"withNick": True, "skipTags": False}, FastExecutor)
    assert len(shared._BY_OPERATION) == before + 2
    del document, again, d
    gc.collect()
    assert len(shared._BY_OPERATION) == before


async def test_a_page_of_papers_reads_its_counts_like_attributes(real: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """PaperList on demo data: the one resolver the FastExecutor calls is the root `papers`; `totalCount` and
    `totalPages`, which the page holds, are read off it (schema/pagination.py)."""
    built: list[str] = []
    original = fast_executor.FastExecutor.build_resolve_info

    def build_resolve_info(self: Any, field_def: Any, field_nodes: Any, parent_type: Any, path: Any) -> Any:
        built.append(path.key)
        return original(self, field_def, field_nodes, parent_type, path)

    monkeypatch.setattr(fast_executor.FastExecutor, "build_resolve_info", build_resolve_info)
    data, errors = await real["run"](real["fast"], "PaperList")
    assert errors == [] and data["papers"]["totalCount"] > 0 and data["papers"]["totalPages"] > 0
    assert built == ["papers"]


class PassingContext(dict[str, Any]):
    """A context like the API's: its answers are encoded by orjson, so values orjson writes as GraphQL would pass."""

    passes_json = False


@strawberry.type
class Dated:
    at: dt.datetime | None
    on: dt.date | None


@strawberry.type
class DatedQuery:
    @strawberry.field
    def dated(self, info: strawberry.Info) -> list[Dated]:
        return info.context["dated"]  # type: ignore[no-any-return]


_KOLKATA = dt.timezone(dt.timedelta(hours=5, minutes=30))
TIMES = [
    dt.datetime(2026, 11, 26, 23, 48, 13, 611218, tzinfo=dt.UTC),
    dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    dt.datetime(1, 1, 1, tzinfo=dt.UTC),
    dt.datetime(999, 5, 6, 7, 8, 9, 1, tzinfo=dt.UTC),
    dt.datetime(2020, 2, 29, 0, 0, 0, 10),
    dt.datetime.max,
    dt.datetime.min,
    dt.datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=_KOLKATA),
    dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone(dt.timedelta(seconds=30))),
]
DATES = [dt.date(1, 1, 1), dt.date(2024, 2, 29), dt.date(999, 1, 1), dt.date.max, None, None, None, None, None]


def test_times_pass_to_the_encoder_only_where_it_writes_them_as_graphql_does() -> None:
    answers = []
    for executor in (StrawberryGraphQLCoreExecutionContext, FastExecutor):
        schema = strawberry.Schema(query=DatedQuery, execution_context_class=executor)
        context = PassingContext(dated=[Dated(at=t, on=d) for t, d in zip(TIMES, DATES, strict=True)])
        result = schema.execute_sync("{ dated { at on } }", context_value=context)
        assert result.errors is None
        answers.append((result.data, orjson.dumps(result.data)))
    (generic, generic_bytes), (fast, fast_bytes) = answers
    assert fast_bytes == generic_bytes
    assert all(type(row["at"]) is str for row in generic["dated"])
    # UTC and naive times, and dates, went out as they were read; the others were written as GraphQL writes them.
    passed = [type(row["at"]) is dt.datetime for row in fast["dated"]]
    assert passed == [True] * 7 + [False, False]
    assert [type(row["on"]) for row in fast["dated"][:4]] == [dt.date] * 4
    # A context that does not say its answers are encoded by orjson gets strings.
    schema = strawberry.Schema(query=DatedQuery, execution_context_class=FastExecutor)
    strings = schema.execute_sync("{ dated { at } }", context_value={"dated": [Dated(at=TIMES[0], on=None)]})
    assert strings.data == {"dated": [{"at": TIMES[0].isoformat()}]}


def test_objects_with_enough_leaves_are_read_by_one_generated_function(monkeypatch: pytest.MonkeyPatch) -> None:
    from schema.fast_executor import compiled, executor

    answered: list[str] = []

    def counting(type_name: str, entries: Any) -> Any:
        made = compiled.compile_leaves(type_name, entries)
        if made is None:
            return None
        read, rest = made

        def leaves(source: Any, passes_times: bool) -> Any:
            result = read(source, passes_times)
            answered.append(f"{type_name}:{'read' if result is not None else 'declined'}")
            return result

        return leaves, rest

    monkeypatch.setattr(executor, "compile_leaves", counting)
    fast = strawberry.Schema(query=Query, execution_context_class=FastExecutor)
    for case in ("clean", "int for string"):
        generic = result_of(GENERIC, QUERY, _damaged(case), VARIABLES[0])
        data, errors = result_of(fast, QUERY, _damaged(case), VARIABLES[0])
        assert (orjson.loads(orjson.dumps(data)), errors) == generic
        answered.append("--")
    # Clean people are read at once; the damaged one is declined and answered field by field, with its error.
    clean = answered[: answered.index("--")]
    assert clean and set(clean) == {"Person:read"}
    damaged = answered[answered.index("--") + 1 :]
    assert "Person:declined" in damaged and "Person:read" in damaged


def _damaged(case: str) -> dict[str, Any]:
    # A context whose answers orjson encodes (as the API's), so the people's UTC birth times are leaves too.
    context = PassingContext(build())
    BAD_DATA[case](context)
    return context


def test_a_document_planned_per_request_reuses_its_leaf_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    # QUERY has @include / @skip: its plans are made per request, its readers written once.
    from schema.fast_executor import compiled

    written: list[str] = []
    write = compiled._write_reader

    def counting(type_name: str, entries: Any, leaves: Any) -> Any:
        written.append(type_name)
        return write(type_name, entries, leaves)

    monkeypatch.setattr(compiled, "_write_reader", counting)
    monkeypatch.setattr(compiled, "_READERS", BoundedCache(compiled.READERS_BYTES))
    fast = strawberry.Schema(query=Query, execution_context_class=FastExecutor)
    for _ in range(3):
        data, errors = result_of(fast, QUERY, _damaged("clean"), VARIABLES[0])
        assert (orjson.loads(orjson.dumps(data)), errors) == result_of(GENERIC, QUERY, build(), VARIABLES[0])
    assert written and len(written) == len(set(written))


def test_readers_of_distinct_response_names_stay_within_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Response names come from clients: each new set of aliases writes a reader. They are held by what they take,
    # and what each is charged covers what it takes (traced), so the bound is the memory's.
    from schema.fast_executor import compiled

    readers: BoundedCache[Any, Any] = BoundedCache(256 * 1024)
    monkeypatch.setattr(compiled, "_READERS", readers)
    charged: list[int] = []
    write = compiled._write_reader

    def charging(type_name: str, entries: Any, leaves: Any) -> Any:
        reader, size = write(type_name, entries, leaves)
        charged.append(size)
        return reader, size

    monkeypatch.setattr(compiled, "_write_reader", charging)
    context = _damaged("clean")
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(40):
            aliases = " ".join(f"a{i}x{j}: name b{i}x{j}: age" for j in range(8))
            data, errors = result_of(FAST, f"{{ papers {{ people {{ {aliases} tags }} }} }}", context, {})
            assert not errors and data["papers"][0]["people"][0][f"a{i}x0"] == "Person 0"
        gc.collect()
        kept_readers = readers.bytes
        before = tracemalloc.get_traced_memory()[0]
        readers._entries.clear()  # what the readers took is what this frees
        gc.collect()
        freed = before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(charged) == 40
    assert freed <= kept_readers, (freed, kept_readers)
    assert 0 < kept_readers <= 256 * 1024 < sum(charged)  # some readers left: the bound held
