"""The download server of the artifacts probes: files, pages and broken answers on 127.0.0.1, by path.

``server`` is its base URL (one server per test module), ``seen`` the paths requested during the test. The
fixtures are shared by every test folder through the root conftest; a module that defines its own ``server``
(tests/outputs/test_materialize.py, tests/executors/test_http.py) uses that one instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from support.local_http import QuietHandler, serve
from support.outputs_probes import HTML, JSON_BODY, MP3, PNG


class Files(QuietHandler):
    """Answers by path (see ``_route``); every request's path is recorded."""

    protocol_version = "HTTP/1.1"  # kept alive unless an answer ends by closing (chunked bodies need 1.1)
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.requests.append(parts.path)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route(parts.path, parse_qs(parts.query))

    def _route(self, path: str, query: dict[str, list[str]]) -> None:
        segments = path.strip("/").split("/")
        head = segments[0]
        if head in ("img", "noext"):  # noext: an image behind a URL without a file extension
            self._send(200, PNG, "image/png")
        elif head == "audio":
            self._send(200, MP3, "audio/mpeg")
        elif head == "page":
            self._send(200, HTML, "text/html; charset=utf-8")
        elif head == "json":
            self._send(200, JSON_BODY, "application/json")
        elif path == "/lie/html-as-png":
            self._send(200, HTML, "image/png")
        elif path == "/lie/json-as-jpeg":
            self._send(200, JSON_BODY, "image/jpeg")
        elif head == "ctype":  # /ctype/<quoted content type>/<name>: PNG bytes with that Content-Type
            body = HTML if "html" in unquote(segments[1]).lower() else PNG
            self._send(200, body, unquote(segments[1]))
        elif head == "cd":  # Content-Disposition given in the query, raw
            self._send(200, PNG, "image/png", {"Content-Disposition": query["v"][0]})
        elif head == "big":  # /big/<bytes>, with Content-Length
            self._send(200, b"\0" * int(segments[1]), "application/octet-stream")
        elif head == "bigstream":  # /bigstream/<bytes>, no Content-Length: the body ends when the connection does
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            for _ in range(int(segments[1]) // 65536 + 1):
                self.wfile.write(b"\0" * 65536)
        elif head == "truncated":  # promises more than it sends, then closes
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(PNG) * 10))
            self.end_headers()
            self.wfile.write(PNG)
        elif head == "redirect":
            self._send(302, b"", "text/plain", {"Location": query["to"][0]})
        elif head == "loop":
            self._send(302, b"", "text/plain", {"Location": "/loop/again"})
        elif head == "status":
            self._send(int(segments[1]), b"nope", "text/plain")
        elif head == "slow":  # 10 chunks of 64 KiB, 0.1 s apart
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(10 * 65536))
            self.end_headers()
            for _ in range(10):
                self.wfile.write(b"s" * 65536)
                self.wfile.flush()
                time.sleep(0.1)
        elif head == "slowpng":  # the same image, a little late, so that concurrent fetches overlap
            time.sleep(0.3)
            self._send(200, PNG, "image/png")
        elif head == "chunked-cut":  # a chunked body that stops before its last chunk
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(PNG), PNG))
            self.wfile.flush()
            self.close_connection = True
        elif head == "hangup":  # the connection closes before any response
            self.close_connection = True
        else:
            self._send(404, b"no such route", "text/plain")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve(Files) as url:
        yield url


@pytest.fixture
def seen(server: str) -> list[str]:
    Files.requests.clear()
    return Files.requests
