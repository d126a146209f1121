"""The warm path's limit (bench/warm.py): uvicorn + Starlette answering POST /graphql with a constant body, the
file named by BENCH_CONSTANT_BODY, read once at start-up."""

from __future__ import annotations

import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def create() -> Starlette:
    body = Path(os.environ["BENCH_CONSTANT_BODY"]).read_bytes()

    async def graphql(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])
