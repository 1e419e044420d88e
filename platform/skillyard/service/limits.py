"""The largest request body: refused with the JSON error shape (413) before the app reads more of it."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


def _answer(limit: int) -> tuple[Message, Message]:
    body = json.dumps(
        {
            "error": "body_too_large",
            "detail": f"the request body is larger than {limit} bytes",
            "fix": "send a smaller body (the limit is [service] max_body_mb)",
        }
    ).encode()
    start = {
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    return start, {"type": "http.response.body", "body": body}


class BodyLimit:
    """ASGI middleware: a declared Content-Length over the limit is refused at once; a streamed body is counted and
    the request refused when it passes the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                for message in _answer(self.limit):
                    await send(message)
                return
        seen = 0
        started = exceeded = False

        async def counted() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    exceeded = True
                    raise BodyTooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if exceeded:  # the app caught BodyTooLarge (FastAPI answers 400 to a body it cannot read): ours instead
                if not started:
                    started = True
                    for answer in _answer(self.limit):
                        await send(answer)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if not started:
                for message in _answer(self.limit):
                    await send(message)
