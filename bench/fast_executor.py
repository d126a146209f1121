"""The FastExecutor of two trees side by side on one toy page, no database: CPU per execution.

    .venv/bin/python -m bench.fast_executor <before tree> <after tree>

Both executors are loaded from their trees (`schema/fast_executor.py` or the `schema/fast_executor/` package),
their answers checked equal, then 15 alternated blocks of 40 executions each; prints medians and minimums.
A page: 24 papers x 8 authors x 1-3 institutions, 16 fields a paper (about 1,900 values).
"""

import asyncio
import importlib
import importlib.util
import os
import sys
import time

import strawberry
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext


def load(root, name):
    """The FastExecutor of the tree at `root` (trees that made it with `make_fast` included)."""
    pkg_dir = os.path.join(root, "schema", "fast_executor")
    if os.path.isdir(pkg_dir):
        sys.path.insert(0, root)
        for m in [k for k in sys.modules if k == "schema" or k.startswith("schema.")]:
            del sys.modules[m]
        mod = importlib.import_module("schema.fast_executor.executor")
        sys.path.pop(0)
        return mod.FastExecutor
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, "schema", "fast_executor.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_fast(StrawberryGraphQLCoreExecutionContext)


@strawberry.type
class Inst:
    id: str
    name: str
    country: str | None
    ror: str | None


@strawberry.type
class Author:
    id: str
    name: str
    slug: str
    h: int
    cites: int
    orcid: str | None
    position: int
    insts: list[Inst]


@strawberry.type
class Paper:
    id: str
    arxiv: str
    title: str
    abstract: str
    cats: list[str]
    primary: str
    doi: str | None
    journal: str | None
    comments: str | None
    cited: int
    score: float | None
    analysed: bool
    topics: list[str]
    authors: list[Author]
    summary: str | None
    version: int


def make():
    insts = [Inst(id=f"I{i}", name=f"Inst {i}", country="DE" if i % 2 else None, ror=None) for i in range(3)]
    return [
        Paper(
            id=f"P{p}",
            arxiv=f"2401.{p:05d}",
            title="A title " * 5,
            abstract="x" * 500,
            cats=["cs.LG", "stat.ML"],
            primary="cs.LG",
            doi=None,
            journal=None,
            comments="10 pages" if p % 3 else None,
            cited=p,
            score=0.5 if p % 2 else None,
            analysed=True,
            topics=["a", "b", "c"],
            authors=[
                Author(
                    id=f"R{a}",
                    name="Ann Lee",
                    slug="ann-lee",
                    h=a,
                    cites=10 * a,
                    orcid=None,
                    position=a,
                    insts=insts[: 1 + a % 3],
                )
                for a in range(8)
            ],
            summary=None,
            version=2,
        )
        for p in range(24)
    ]


DATA = make()


@strawberry.type
class Query:
    @strawberry.field
    def papers(self) -> list[Paper]:
        return DATA


Q = """{ papers { id arxiv title abstract cats primary doi journal comments cited score analysed topics summary version
  authors { id name slug h cites orcid position insts { id name country ror } } } }"""


async def run(schema, n):
    t = time.process_time()
    for _ in range(n):
        r = await schema.execute(Q)
        assert r.errors is None
    return (time.process_time() - t) / n * 1000


async def main():
    olds = load(sys.argv[1], "old_fx")
    news = load(sys.argv[2], "new_fx")
    so = strawberry.Schema(Query, execution_context_class=olds)
    sn = strawberry.Schema(Query, execution_context_class=news)
    ro = await so.execute(Q)
    rn = await sn.execute(Q)
    assert ro.data == rn.data
    o = []
    nn = []
    for _ in range(15):
        o.append(await run(so, 40))
        nn.append(await run(sn, 40))
    o.sort()
    nn.sort()
    print(
        f"before min {o[0]:.3f} med {o[7]:.3f} | after min {nn[0]:.3f} med {nn[7]:.3f} ms/exec | "
        f"after/before med {nn[7] / o[7]:.3f} min {nn[0] / o[0]:.3f}"
    )


asyncio.run(main())
