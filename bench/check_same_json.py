"""Every benchmarked server answers the ResearcherPage with the floor's JSON, for random researchers.

    .venv/bin/python -m bench.check_same_json --database-url ... [--servers floor,wovepaper,postgraphile] [--n 20]

The floor and the API are compared as parsed JSON. PostGraphile answers its own equivalent query
(bench/postgraphile_queries.py); its response is mapped onto the same shape first. Exit 1 on any
difference, printing the first one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import asyncpg
import httpx

from bench.run import body_for, running, sample_variables, servers


async def researcher_ids(database_url: str, n: int, seed: float) -> list[str]:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SELECT setseed($1)", seed)
        rows = await conn.fetch(
            """(SELECT id FROM researchers WHERE paper_count >= 24 ORDER BY random() LIMIT $1)
               UNION ALL (SELECT id FROM researchers WHERE paper_count BETWEEN 1 AND 23 ORDER BY random() LIMIT 3)""",
            n - 3,
        )
    finally:
        await conn.close()
    return [str(r["id"]) for r in rows]


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: only in {'second' if key not in a else 'first'}"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def fetch(url: str, path: str, server: str, variables: dict[str, Any], operation: str = "ResearcherPage") -> Any:
    body = body_for(server, operation, variables)
    response = httpx.post(url + path, content=body, headers={"content-type": "application/json"}, timeout=30)
    response.raise_for_status()
    data = response.json()
    if "errors" in data:
        raise AssertionError(f"{server} answered errors: {data['errors']}")
    if server == "postgraphile":
        from bench.postgraphile_queries import to_contract_shape

        return to_contract_shape(data)
    return data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--servers", default="floor,wovepaper,postgraphile")
    parser.add_argument("--operations", default="ResearcherPage,PaperPage,PaperList")
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    operations = args.operations.split(",")
    cases: dict[str, list[dict[str, Any]]] = {}
    for operation in operations:
        if operation == "ResearcherPage":
            ids = asyncio.run(researcher_ids(args.database_url, args.n, 0.17))
            cases[operation] = [{"id": i} for i in ids]
        else:
            cases[operation] = asyncio.run(sample_variables(args.database_url, operation, args.n, 0.17))
    if "postgraphile" in args.servers:
        from bench.postgraphile_queries import apply_functions

        asyncio.run(apply_functions(args.database_url))
    configured = servers(args.database_url, None)
    answers: dict[tuple[str, str], list[Any]] = {}
    for name in args.servers.split(","):
        server = configured[name]
        with running(server) as (_pid, url):
            for operation in operations:
                # PostGraphile answers the researcher page only.
                if name == "postgraphile" and operation != "ResearcherPage":
                    continue
                answers[(name, operation)] = [fetch(url, server.path, name, v, operation) for v in cases[operation]]
    failed = False
    for (name, operation), got in answers.items():
        if name == "floor":
            continue
        for variables, mine, floor in zip(cases[operation], got, answers[("floor", operation)], strict=True):
            diff = first_difference(mine, floor)
            if diff:
                print(f"{name} {operation} differs from the floor for {variables}: {diff}")
                failed = True
                break
        else:
            size = len(json.dumps(answers[("floor", operation)]))
            print(f"{name} {operation}: same JSON as the floor for {len(got)} requests ({size} bytes)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
