"""The baseline of bench/bench_serve.py: a bare Starlette endpoint in the same server that calls ``yard.run`` with
the body's input, without auth, rate limits, sessions or validation (added only with ``--bench-endpoint``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..yard import SkillYard


def add_bare_endpoint(app: FastAPI, yard: SkillYard) -> None:
    async def bare(request: Request) -> Response:
        body = json.loads(await request.body())
        envelope = await yard.run(request.path_params["name"], body.get("input") or {}, {"session_id": "bench"})
        return Response(json.dumps(envelope, default=str), media_type="application/json")

    # first in the table: the baseline pays no matching against the API routes
    app.router.routes.insert(0, Route("/bench/bare/{name}", bare, methods=["POST"]))
