"""A real HTTP server on 127.0.0.1 for tests (never any other address)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # handlers still sleeping in slow endpoints must not hold up teardown

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up first (a test's timeout, a probe) is no error to print: printed, it lands in
        whatever the next test captures on stderr (an in-process CLI run's output)."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free port of 127.0.0.1 in a thread; yields the base URL."""
    httpd = _Server(("127.0.0.1", 0), handler)
    # polled every 50 ms, so that shutting a server down takes a moment, not the default half second
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with :meth:`_send` (what the probe servers share)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
