"""The model clients: scripted turn files and a chat-completions server on 127.0.0.1 whose model name picks the
behaviour."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

API_KEY = "sk-test-0123456789-secret"


class ChatServer(BaseHTTPRequestHandler):
    """Speaks /v1/chat/completions; the requested model name picks the behaviour."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.requests.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
        if self.path != "/v1/chat/completions":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        model = body.get("model")
        if model == "text-model":
            return self._send(200, {"choices": [{"message": {"role": "assistant", "content": "Hello there."}}]})
        if model == "tool-model":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_abc", "type": "function", "function": {"name": "notes_search", "arguments": '{"q":'}},
                    {"id": "call_def", "type": "function", "function": {"name": "notes_read", "arguments": {"id": 1}}},
                ],
            }
            return self._send(200, {"choices": [{"message": message, "finish_reason": "tool_calls"}]})
        if model == "unauthorized":
            auth = self.headers.get("Authorization", "")
            message = f"Incorrect API key provided: {auth.removeprefix('Bearer ')}."
            return self._send(401, {"error": {"message": message, "type": "invalid_request_error"}})
        if model == "broken":
            return self._send(500, {"error": {"message": "the engine overheated"}})
        if model == "plain-500":
            return self._send(502, "Bad Gateway from the proxy", "text/plain")
        if model == "not-json":
            return self._send(200, "<html>welcome</html>", "text/html")
        if model == "slow":
            time.sleep(1.0)
            return self._send(200, {"choices": [{"message": {"content": "late"}}]})
        return self._send(400, {"error": {"message": f"unknown model {model}"}})

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = (json.dumps(payload) if content_type == "application/json" else payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
