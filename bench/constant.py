"""The warm path's limits (bench/warm.py): uvicorn + Starlette answering POST /graphql

- with a constant body, the file named by BENCH_CONSTANT_BODY, read once at start-up (the request is not read);
- or, with BENCH_CONSTANT_ANSWERS (a JSON object: request body -> answer), by reading the request's body and
  sending the answer stored for it: the least any cache of whole answers does.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def create() -> Starlette:
    answers_path = os.environ.get("BENCH_CONSTANT_ANSWERS")
    if answers_path:
        answers = {k.encode(): v.encode() for k, v in orjson.loads(Path(answers_path).read_bytes()).items()}

        async def looked_up(request: Request) -> Response:
            return Response(answers[await request.body()], media_type="application/json")

        return Starlette(routes=[Route("/graphql", looked_up, methods=["POST"])])

    body = Path(os.environ["BENCH_CONSTANT_BODY"]).read_bytes()

    async def graphql(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])
