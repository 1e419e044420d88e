"""Remote URL materialization (§6.3 step 1, outputs/materialize.py) and its address guard, called directly against
a real HTTP server on 127.0.0.1 (http.server in a thread); no test connects anywhere else."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from skillyard.outputs import address_guard
from skillyard.outputs.address_guard import private_address_kind
from skillyard.outputs.materialize import materialize_urls
from support.local_http import serve
from support.outputs_probes import files_in

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8

PDF = b"%PDF-1.7\n" + b"0" * 3000

HTML = b"<!DOCTYPE html><html><head><title>a page</title></head><body>hello</body></html>"

JSON = b'{"data": [1, 2, 3], "ok": true}'


class Files(BaseHTTPRequestHandler):
    """Answers by path (see ``_route``); every request is recorded so tests see what went over the wire."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        self.requests.append({"path": parts.path, "query": parts.query, "host": self.headers.get("Host")})
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up first (probes, caps)
            self._route(parts.path, parse_qs(parts.query))

    def _route(self, path: str, query: dict[str, list[str]]) -> None:
        segments = path.strip("/").split("/")
        head = segments[0]
        if head in ("img", "noext", "") or path == "/":
            self._send(200, PNG, "image/png")
        elif head == "bin":
            self._send(200, PDF, "application/octet-stream")
        elif head == "notype":
            self._send(200, PNG, None)
        elif head == "page":
            self._send(200, HTML, "text/html; charset=utf-8")
        elif head == "json":
            self._send(200, JSON, "application/json")
        elif path == "/lie/html-as-png":
            self._send(200, HTML, "image/png")
        elif path == "/lie/json-as-jpeg":
            self._send(200, JSON, "image/jpeg")
        elif path == "/lie/png-as-html":
            self._send(200, PNG, "text/html")
        elif head == "cd":
            self._send(200, PNG, "image/png", {"Content-Disposition": query["value"][0]})
        elif head == "status":
            self._send(int(segments[1]), b"nope", "text/plain")
        elif head == "redirect":
            self._send(302, b"", "text/plain", {"Location": query["to"][0]})
        elif head == "hops":  # /hops/<n>/<name>: n redirects, then a PNG
            left = int(segments[1])
            if left:
                self._send(302, b"", "text/plain", {"Location": f"/hops/{left - 1}/{segments[2]}"})
            else:
                self._send(200, PNG, "image/png")
        elif head == "delay":  # /delay/<seconds>/<name>
            time.sleep(float(segments[1]))
            self._send(200, PNG, "image/png")
        elif head == "slow":  # a first part, then a long pause before the rest
            self._send_headers(200, "image/png", {"Content-Length": str(len(PNG))})
            self.wfile.write(PNG[:100])
            self.wfile.flush()
            time.sleep(3)
            self.wfile.write(PNG[100:])
        elif head == "truncated":  # promises more than it sends, then closes
            self._send_headers(200, "image/png", {"Content-Length": str(len(PNG) * 10)})
            self.wfile.write(PNG)
        elif head == "big":  # /big/<bytes>, with Content-Length
            self._send(200, b"\0" * int(segments[1]), "application/octet-stream")
        elif head == "bigstream":  # /bigstream/<bytes>, no Content-Length: the size shows only while reading
            self._send_headers(200, "application/octet-stream", {})
            for _ in range(int(segments[1]) // 65536 + 1):
                self.wfile.write(b"\0" * 65536)
        else:
            self._send(404, b"no such route", "text/plain")

    def _send_headers(self, status: int, content_type: str | None, headers: dict[str, str]) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _send(self, status: int, body: bytes, content_type: str | None, headers: dict[str, str] | None = None) -> None:
        self._send_headers(status, content_type, {"Content-Length": str(len(body)), **(headers or {})})
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve(Files) as url:
        yield url


@pytest.fixture
def seen(server: str) -> list[dict[str, Any]]:
    Files.requests.clear()
    return Files.requests


async def run(envelope: dict[str, Any], ws: Path, **options: Any) -> dict[str, Any]:
    options = {"allow_private": True, "timeout": 5.0, **options}
    result = await materialize_urls(envelope, ws, **options)
    assert result is envelope
    return result


def _self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key (cert file, key file)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


@contextlib.contextmanager
def _tls_server(cert_file: Path, key_file: Path) -> Iterator[str]:
    """The test routes over HTTPS on 127.0.0.1 (the TLS handshake runs in the accepting thread)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def loopback_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a public test server: 127.0.0.1 passes the guard, every other address is judged for real."""
    real = private_address_kind
    monkeypatch.setattr(address_guard, "private_address_kind", lambda a: None if a == "127.0.0.1" else real(a))


def fake_resolver(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
    """Names in ``answers`` resolve to those addresses (without any DNS); other names resolve for real."""
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, **kwargs: Any) -> list[Any]:
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]
        return await real(host, port, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


async def test_explicit_fields_are_downloaded_and_recorded(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {
        "ok": True,
        "image_url": f"{server}/img/chart.png",
        "file_urls": [f"{server}/bin/report.pdf", f"{server}/bin/clip.mp4"],
    }
    original = dict(envelope)
    await run(envelope, ws)

    assert {k: envelope[k] for k in original} == original  # the URL fields stay as they were
    assert "warnings" not in envelope
    (image,) = envelope["images"]
    assert image == {
        "url": f"{server}/img/chart.png",
        "local_path": str(ws / "chart.png"),
        "filename": "chart.png",
        "media": "image",
        "size": len(PNG),
        "sha256": hashlib.sha256(PNG).hexdigest(),
        "content_type": "image/png",
    }
    assert (ws / "chart.png").read_bytes() == PNG
    (report,) = envelope["files"]
    assert (report["filename"], report["media"], report["content_type"]) == (
        "report.pdf",
        "file",
        "application/octet-stream",
    )
    (clip,) = envelope["videos"]  # octet-stream says nothing, so the extension decides the media type
    assert (clip["filename"], clip["media"]) == ("clip.mp4", "video")
    assert files_in(ws) == ["chart.png", "clip.mp4", "report.pdf"]


async def test_explicit_fields_download_pages_and_json_too(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {"download_url": f"{server}/page/terms.html", "result_url": f"{server}/json/result.json"}
    await run(envelope, ws)
    assert sorted(i["filename"] for i in envelope["files"]) == ["result.json", "terms.html"]


async def test_ambiguous_fields_are_probed_and_pages_skipped(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {
        "url": f"{server}/img/photo.png",
        "link": f"{server}/page/article.html",
        "href": f"{server}/json/api",
        "file": "report.pdf",  # a local name, not a link: left alone
        "image": "data:image/png;base64,iVBORw0KGgo=",
    }
    await run(envelope, ws)
    assert [i["filename"] for i in envelope["images"]] == ["photo.png"]
    assert "files" not in envelope and "warnings" not in envelope
    assert sorted(r["path"] for r in seen) == ["/img/photo.png", "/json/api", "/page/article.html"]
    assert files_in(ws) == ["photo.png"]


@pytest.mark.parametrize(
    ("path", "explicit_media"),
    [("/lie/html-as-png", "image"), ("/lie/json-as-jpeg", "image"), ("/lie/png-as-html", "file")],
)
async def test_lying_content_types(
    server: str, seen: list[dict[str, Any]], ws: Path, path: str, explicit_media: str
) -> None:
    """A probe skips anything that is, or claims to be, a page or JSON; explicit fields download regardless."""
    probed = {"src": server + path}
    await run(probed, ws)
    assert probed == {"src": server + path}
    assert files_in(ws) == []

    explicit = {"output_url": server + path}
    await run(explicit, ws)
    (item,) = [i for name in ("images", "files") for i in explicit.get(name, [])]
    assert item["media"] == explicit_media
    assert files_in(ws) == [item["filename"]]


async def test_links_in_text_are_probed(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {
        "output": f"Here is the chart: {server}/img/a.png. And the page {server}/page/p.html, for reference.",
        "message": f"图片见{server}/img/b.png。另见（{server}/img/c.png）",
        "display_md": f"![chart]({server}/img/d.png) and **{server}/img/e.png**",
        "data": {"nested": f"{server}/img/not-scanned.png"},
    }
    await run(envelope, ws)
    assert sorted(i["url"] for i in envelope["images"]) == [f"{server}/img/{n}.png" for n in "abcde"]
    assert files_in(ws) == [f"{n}.png" for n in "abcde"]
    assert envelope["output"].startswith("Here is the chart")  # the text is not rewritten


async def test_at_most_max_probed_links_per_result(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    text = " ".join(f"{server}/img/t{n}.png" for n in range(12))
    envelope = {"output": text, "urls": [f"{server}/img/x1.png", f"{server}/img/x2.png"]}
    await run(envelope, ws)
    names = sorted(i["filename"] for i in envelope["images"])
    assert names == sorted(["x1.png", "x2.png"] + [f"t{n}.png" for n in range(8)])  # explicit ones don't count
    assert len(seen) == 10

    seen.clear()
    fewer = {"output": text}
    await run(fewer, ws, max_probed=3)
    assert len(seen) == 3 and len(fewer["images"]) == 3


async def test_artifact_items_are_filled_in_place(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    kept = ws / "kept.png"
    kept.write_bytes(PNG)
    envelope: dict[str, Any] = {
        "images": [{"url": f"{server}/img/one.png", "caption": "first"}, "not an item"],
        "videos": [{"video_url": f"{server}/bin/movie.mp4", "url": f"{server}/page/watch.html"}],
        "files": [{"url": f"{server}/img/kept.png", "local_path": str(kept)}],
    }
    await run(envelope, ws)
    one = envelope["images"][0]
    assert one["caption"] == "first" and one["url"] == f"{server}/img/one.png"
    assert one["local_path"] == str(ws / "one.png") and one["sha256"] == hashlib.sha256(PNG).hexdigest()
    assert envelope["images"][1] == "not an item"
    movie = envelope["videos"][0]
    assert movie["url"] == f"{server}/page/watch.html"  # an existing url field is not overwritten
    assert (movie["filename"], movie["media"]) == ("movie.mp4", "video")
    assert envelope["files"] == [{"url": f"{server}/img/kept.png", "local_path": str(kept)}]
    # An item is one artifact, filled from its first URL; its other links are probed like any other (a page here).
    assert sorted(r["path"] for r in seen) == ["/bin/movie.mp4", "/img/one.png", "/page/watch.html"]
    assert files_in(ws) == ["kept.png", "movie.mp4", "one.png"]


async def test_running_twice_downloads_nothing_new(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {
        "image_url": f"{server}/img/once.png",
        "images": [{"src": f"{server}/img/item.png"}],
        "output": f"see {server}/img/text.png",
    }
    await run(envelope, ws)
    assert len(seen) == 3
    snapshot = repr(envelope)
    await run(envelope, ws)
    assert len(seen) == 3
    assert repr(envelope) == snapshot
    assert files_in(ws) == ["item.png", "once.png", "text.png"]


async def test_an_item_whose_file_is_gone_is_downloaded_again(
    server: str, seen: list[dict[str, Any]], ws: Path
) -> None:
    envelope = {"image_url": f"{server}/img/again.png"}
    await run(envelope, ws)
    (ws / "again.png").unlink()
    await run(envelope, ws)
    (item,) = envelope["images"]  # the same item, filled again, not a second one
    assert Path(item["local_path"]).read_bytes() == PNG


async def test_the_same_url_is_downloaded_once(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    url = f"{server}/img/same.png"
    envelope = {"image_url": url, "urls": [url, url], "url": url, "output": f"look: {url}"}
    await run(envelope, ws)
    assert len(seen) == 1 and len(envelope["images"]) == 1


async def test_existing_files_are_never_replaced(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    (ws / "pixel.png").write_bytes(b"the user's own file")
    envelope = {"image_urls": [f"{server}/img/pixel.png?v=1", f"{server}/img/pixel.png?v=2"]}
    await run(envelope, ws)
    assert (ws / "pixel.png").read_bytes() == b"the user's own file"
    assert sorted(i["filename"] for i in envelope["images"]) == ["pixel-1.png", "pixel-2.png"]
    assert files_in(ws) == ["pixel-1.png", "pixel-2.png", "pixel.png"]


@pytest.mark.parametrize(
    ("disposition", "expected"),
    [
        ('attachment; filename="../../x.png"', "x.png"),
        ('attachment; filename="/etc/passwd"', "passwd.png"),
        ('attachment; filename="..\\\\..\\\\win.png"', "win.png"),
        ("attachment; filename*=UTF-8''..%2F..%2F%E6%8A%A5%E5%91%8A.png", "报告.png"),
        ('attachment; filename=".hidden.png"', "hidden.png"),
        ('attachment; filename=".."', "cd.png"),
        ('attachment; filename="a\x7fb|c.png"', "a_b_c.png"),
        ("attachment", "cd.png"),
    ],
)
async def test_content_disposition_names_stay_in_the_workspace(
    server: str, seen: list[dict[str, Any]], ws: Path, disposition: str, expected: str
) -> None:
    envelope = {"file_url": f"{server}/cd?value={quote(disposition, safe='')}"}
    await run(envelope, ws)
    assert "warnings" not in envelope
    assert envelope["images"][0]["filename"] == expected
    assert files_in(ws) == [expected]
    assert files_in(ws.parent) == [f"ws/{expected}"]  # nothing written beside or above the workspace


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/noext", "noext.png"), ("/", "download.png"), ("/notype/", "download.bin"), ("/hops/3/final.png", "final.png")],
)
async def test_file_names_without_disposition(
    server: str, seen: list[dict[str, Any]], ws: Path, path: str, expected: str
) -> None:
    envelope = {"file_url": server + path}
    await run(envelope, ws)
    assert files_in(ws) == [expected]
    item = next(i for name in ("images", "files") for i in envelope.get(name, []))
    assert item["url"] == server + path  # the URL asked for, not the last redirect


@pytest.mark.parametrize(
    ("path", "options", "reason"),
    [
        ("/status/404", {}, "the server answered HTTP 404 Not Found"),
        ("/status/500", {}, "HTTP 500"),
        ("/truncated", {}, "the connection broke off"),
        ("/slow", {"timeout": 0.5}, "no complete answer within 0.5 s"),
        ("/big/3000000", {"max_bytes": 1_000_000}, "it is 2.9 MB, over the limit of 976.6 KB"),
        ("/bigstream/3000000", {"max_bytes": 1_000_000}, "it is larger than the limit of 976.6 KB"),
        ("/hops/6/x.png", {}, "more than 5 redirects (the last one to http://127.0.0.1:"),
        ("/redirect?to=ftp://example.com/x.png", {}, "after a redirect to ftp://example.com/x.png, only http and"),
        ("/redirect?to=file:///etc/passwd", {}, "only http and https links are downloaded, not file:"),
    ],
)
async def test_a_failed_download_leaves_the_url_and_a_warning(
    server: str, seen: list[dict[str, Any]], ws: Path, path: str, options: dict[str, Any], reason: str
) -> None:
    sep = "&" if "?" in path else "?"
    url = f"{server}{path}{sep}token=SECRET"
    envelope: dict[str, Any] = {"file_url": url, "warnings": ["an earlier warning"]}
    await run(envelope, ws, **options)
    assert envelope["file_url"] == url
    assert set(envelope) == {"file_url", "warnings"}  # no artifact array appears
    earlier, warning = envelope["warnings"]
    assert earlier == "an earlier warning"
    assert warning.startswith(f"could not download {server}{urlsplit(path).path}: ")
    assert reason in warning
    assert "SECRET" not in warning
    assert files_in(ws) == []  # no partial file, no temp file
    await run(envelope, ws, **options)  # tried again, failing the same way: said once
    assert envelope["warnings"] == [earlier, warning]
    assert files_in(ws) == []


@pytest.mark.parametrize("url", ["ftp://example.com/x.pdf", "file:///etc/passwd", "gopher://127.0.0.1:70/x"])
async def test_other_schemes_are_refused_without_connecting(seen: list[dict[str, Any]], ws: Path, url: str) -> None:
    envelope = {"file_url": url, "warnings": "a string warning"}
    await run(envelope, ws)
    assert envelope["warnings"][0] == "a string warning"
    assert "only http and https links are downloaded" in envelope["warnings"][1]
    assert files_in(ws) == [] and seen == []


async def test_other_downloads_go_on_when_one_fails(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {"urls": [f"{server}/status/404", f"{server}/img/fine.png"]}
    await run(envelope, ws)
    assert [i["filename"] for i in envelope["images"]] == ["fine.png"]
    assert len(envelope["warnings"]) == 1


async def test_downloads_run_concurrently_four_at_a_time(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    envelope = {"urls": [f"{server}/delay/0.4/{n}.png" for n in range(8)]}
    start = time.perf_counter()
    await run(envelope, ws)
    elapsed = time.perf_counter() - start
    assert len(envelope["images"]) == 8
    assert 0.8 <= elapsed < 2.5  # two waves of four (one at a time would take 3.2 s)


async def test_a_large_body_arrives_whole(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    """Bodies of many reads, with and without Content-Length, land byte for byte with the right digest."""
    size = 3 * 1024 * 1024 + 17
    streamed = (3 * 1024 * 1024 // 65536 + 1) * 65536  # /bigstream writes whole 64 KB blocks
    envelope = {"file_urls": [f"{server}/big/{size}", f"{server}/bigstream/{3 * 1024 * 1024}"]}
    await run(envelope, ws)
    assert "warnings" not in envelope
    by_size = {item["size"]: item for item in envelope["files"]}
    assert set(by_size) == {size, streamed}
    for length, item in by_size.items():
        assert Path(item["local_path"]).read_bytes() == b"\0" * length
        assert item["sha256"] == hashlib.sha256(b"\0" * length).hexdigest()


async def test_connections_hand_on_what_has_arrived(server: str, seen: list[dict[str, Any]]) -> None:
    """httpcore asks for 64 KB per read; a guarded connection returns what has arrived, up to READ_BYTES."""
    parts = urlsplit(server)
    assert parts.hostname is not None and parts.port is not None
    stream = await address_guard._CheckedBackend(allow_private=True).connect_tcp(parts.hostname, parts.port, 5.0)
    try:
        await stream.write(f"GET /big/{1 << 20} HTTP/1.1\r\nHost: {parts.netloc}\r\n\r\n".encode(), 5.0)
        received = b""
        while len(received) < 1 << 20:
            data = await stream.read(1024, 5.0)
            assert data, "the server closed the connection early"
            received += data
            if len(data) > 1024:
                break
        assert len(data) > 1024
        assert len(data) <= address_guard.READ_BYTES
    finally:
        await stream.aclose()


async def test_https_downloads_check_the_certificate(tmp_path: Path, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TLS goes through the guarded connection too: a trusted certificate downloads, an untrusted one is a
    warning and no file."""
    cert_file, key_file = _self_signed_certificate(tmp_path)
    size = 2 * 1024 * 1024 + 5
    with _tls_server(cert_file, key_file) as base:
        address_guard._ssl_context.cache_clear()  # built once per process: rebuilt with the test's trust
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        try:
            refused: dict[str, Any] = {"file_url": f"{base}/big/{size}"}
            await run(refused, ws)
            assert "files" not in refused and files_in(ws) == []
            assert "CERTIFICATE_VERIFY_FAILED" in refused["warnings"][0]

            address_guard._ssl_context.cache_clear()
            monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))  # the standard way to trust a private CA
            trusted: dict[str, Any] = {"file_url": f"{base}/big/{size}"}
            await run(trusted, ws)
        finally:
            address_guard._ssl_context.cache_clear()
    assert "warnings" not in trusted
    (item,) = trusted["files"]
    assert item["size"] == size and item["sha256"] == hashlib.sha256(b"\0" * size).hexdigest()


async def test_private_addresses_are_refused(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    port = server.rsplit(":", 1)[1]
    envelope = {
        "image_url": f"{server}/img/a.png?sig=SECRET",
        "file_url": f"http://localhost:{port}/img/b.png",
        "output": f"also http://[::1]:{port}/img/c.png",
    }
    await run(envelope, ws, allow_private=False)
    a, b, c = sorted(envelope["warnings"], key=lambda w: w.split("/img/")[1])
    assert a.startswith(f"could not download {server}/img/a.png: the host 127.0.0.1 is a loopback address; ")
    assert b.startswith(f"could not download http://localhost:{port}/img/b.png: the host localhost (")
    assert c.startswith(f"could not download http://[::1]:{port}/img/c.png: the host ::1 is a loopback address; ")
    assert all(
        w.endswith("only public addresses are downloaded unless the platform is configured to allow private ones")
        for w in (a, b, c)
    )
    assert "SECRET" not in a
    assert seen == [] and files_in(ws) == []  # refused before connecting


@pytest.mark.usefixtures("loopback_is_public")
async def test_every_redirect_target_is_checked(server: str, seen: list[dict[str, Any]], ws: Path) -> None:
    port = server.rsplit(":", 1)[1]
    fine = f"{server}/redirect?to={server}/img/ok.png"
    to_loopback = f"{server}/redirect?to=http://127.0.0.2:{port}/img/x.png"
    to_v6 = f"{server}/redirect?to=http://[::1]:{port}/img/y.png"
    envelope = {"urls": [fine, to_loopback, to_v6]}
    await run(envelope, ws, allow_private=False)
    assert [i["filename"] for i in envelope["images"]] == ["ok.png"]
    assert sorted(envelope["warnings"]) == [
        f"could not download {server}/redirect: after a redirect to http://127.0.0.2:{port}/img/x.png, the host "
        "127.0.0.2 is a loopback address; only public addresses are downloaded unless the platform is configured "
        "to allow private ones",
        f"could not download {server}/redirect: after a redirect to http://[::1]:{port}/img/y.png, the host ::1 is "
        "a loopback address; only public addresses are downloaded unless the platform is configured to allow "
        "private ones",
    ]
    assert sorted(r["path"] for r in seen) == ["/img/ok.png", "/redirect", "/redirect", "/redirect"]


@pytest.mark.usefixtures("loopback_is_public")
async def test_every_resolved_address_is_checked(
    server: str, seen: list[dict[str, Any]], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = server.rsplit(":", 1)[1]
    fake_resolver(monkeypatch, {"mixed.test": ["127.0.0.1", "10.0.0.7"]})
    envelope = {"file_url": f"http://mixed.test:{port}/img/m.png"}
    await run(envelope, ws, allow_private=False)
    assert "the host mixed.test (10.0.0.7) is a private address" in envelope["warnings"][0]
    assert seen == []


@pytest.mark.usefixtures("loopback_is_public")
async def test_the_connection_goes_to_the_checked_address(
    server: str, seen: list[dict[str, Any]], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pinned.test exists only in the fake resolver: the download works only if the socket is opened to the
    address that was checked, not by resolving the name again."""
    port = server.rsplit(":", 1)[1]
    fake_resolver(monkeypatch, {"pinned.test": ["127.0.0.1"]})
    envelope = {"file_url": f"http://pinned.test:{port}/img/p.png"}
    await run(envelope, ws, allow_private=False)
    assert "warnings" not in envelope
    assert [i["filename"] for i in envelope["images"]] == ["p.png"]
    assert seen == [{"path": "/img/p.png", "query": "", "host": f"pinned.test:{port}"}]


async def test_nothing_to_do_returns_the_envelope_untouched(ws: Path) -> None:
    envelope = {"ok": True, "output": "no links here", "file": "local.txt", "warnings": []}
    assert await materialize_urls(envelope, ws, allow_private=False) == {
        "ok": True,
        "output": "no links here",
        "file": "local.txt",
        "warnings": [],
    }


@pytest.mark.usefixtures("home")
async def test_a_skill_can_opt_out_of_materialization(
    server: str,
    seen: list[dict[str, Any]],
    make_skill: Any,
    skills_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    db_env: str,
) -> None:
    """``materialize: false``: links in a skill's results are data (a record's URL column), never fetched."""
    from skillyard import SkillYard

    monkeypatch.setenv("SKILLYARD_ALLOW_PRIVATE_URLS", "1")
    handler = {
        "handler.py": f'async def execute(input, ctx):\n    return {{"ok": True, "image_url": "{server}/img/a.png"}}\n'
    }
    make_skill("fetches", files=handler)
    make_skill("keeps", frontmatter="name: keeps\ndescription: Data with links.\nmaterialize: false", files=handler)
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        kept = await yard.run("keeps", {}, context={"session_id": "m-off"})
        assert seen == [] and kept["image_url"] == f"{server}/img/a.png"  # never fetched, the link kept
        fetched = await yard.run("fetches", {}, context={"session_id": "m-on"})
    assert seen and "warnings" not in fetched, fetched  # downloaded
