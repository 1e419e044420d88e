"""The shared part of the fake vendor APIs: a real HTTP server on 127.0.0.1 that parses each request (query, JSON,
form or multipart body), records it and answers through the subclass's ``route``; scripted failures come next."""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from support.local_http import QuietHandler, serve


@dataclass
class Request:
    """One request as the fake saw it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # field -> (filename, content)
    raw: bytes = b""


def parse_request(handler: BaseHTTPRequestHandler) -> Request:
    parts = urlsplit(handler.path)
    length = int(handler.headers.get("Content-Length") or 0)
    raw = handler.rfile.read(length) if length else b""
    request = Request(
        handler.command,
        parts.path,
        dict(parse_qsl(parts.query)),
        {k.lower(): v for k, v in handler.headers.items()},
        raw=raw,
    )
    kind = request.headers.get("content-type", "")
    if "application/json" in kind and raw:
        request.json = json.loads(raw)
    elif "application/x-www-form-urlencoded" in kind:
        request.form = dict(parse_qsl(raw.decode()))
    elif "multipart/form-data" in kind:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {kind}\r\n\r\n".encode() + raw
        )
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            filename = part.get_filename()
            content = part.get_payload(decode=True) or b""
            if filename is not None:
                request.files[str(name)] = (filename, content)
            else:
                request.form[str(name)] = content.decode()
    return request


class FakeApi:
    """Subclasses implement ``route(request) -> (status, body, headers)``, the body a dict (sent as JSON) or bytes
    (a file, sent as the headers' Content-Type); every request is kept in ``requests``. ``fail_next`` holds answers
    given, in order, to the next requests of a path (a rate limit); ``slow`` the seconds a request whose path starts
    with a key waits before its answer (the other requests are answered meanwhile)."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.fail_next: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.slow: dict[str, float] = {}
        self.lock = threading.Lock()
        self.base = ""

    def route(self, request: Request) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        raise NotImplementedError

    def answer(self, request: Request) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        time.sleep(next((s for prefix, s in self.slow.items() if request.path.startswith(prefix)), 0.0))
        with self.lock:
            self.requests.append(request)
            scripted = self.fail_next.get(request.path)
            if scripted:
                status, body = scripted.pop(0)
                return status, body, {}
            return self.route(request)

    def sent(self, path_end: str) -> list[Request]:
        """The requests whose path ends with ``path_end``."""
        return [r for r in self.requests if r.path.endswith(path_end)]

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        api = self

        class Handler(QuietHandler):
            def _any(self) -> None:
                status, body, headers = api.answer(parse_request(self))
                if isinstance(body, bytes):
                    kind = headers.pop("Content-Type", "application/octet-stream")
                    self._send(status, body, kind, headers)
                else:
                    self._send(status, json.dumps(body).encode(), "application/json", headers)

            do_GET = do_POST = _any

        with serve(Handler) as base:
            self.base = base
            yield base
