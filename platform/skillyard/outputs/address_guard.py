"""Connections for downloads that must reach only public hosts (SSRF guard): every address a host resolves to is
checked, and the socket is opened to a checked address, never to the name. The same connections read large blocks
(:class:`_LargeReads`), which is most of a local download's speed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpcore
import httpx

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: The most one read of a connection returns. httpcore asks for 64 KB; the event loop's socket reads are up to
#: 256 KB, so each is handed on whole.
READ_BYTES = 1 << 20


class RefusedDestination(Exception):
    """A host that must not be connected to, or cannot be resolved; the message says which and why."""


def private_address_kind(address: str) -> str | None:
    """Why downloads must not reach an IP address ("loopback", "private", …), or None for a public address.

    IPv4 addresses carried inside IPv6 ones (IPv4-mapped, 6to4, NAT64) are judged by the IPv4 address.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:  # what the socket reaches is the IPv4 address inside
            return private_address_kind(str(inner))
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("non-public", not ip.is_global),
    )
    return next((kind for kind, hit in checks if hit), None)


#: The switch that lets guarded connections reach loopback and private addresses (tests, internal deployments).
ALLOW_PRIVATE_ENV = "SKILLYARD_ALLOW_PRIVATE_URLS"


def private_hosts_allowed() -> bool:
    """Whether ``SKILLYARD_ALLOW_PRIVATE_URLS`` is on (the host's settings read the same variable)."""
    from ..settings import flag_env

    return flag_env(ALLOW_PRIVATE_ENV)


async def checked_addresses(host: str, port: int | None, allow_private: bool, purpose: str = "downloaded") -> list[str]:
    """Every address ``host`` resolves to; RefusedDestination when it cannot be resolved or, unless
    ``allow_private``, when any of them is not public (one private answer is enough to refuse). ``purpose`` says
    in the message what public addresses are for."""
    try:
        addresses = [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise RefusedDestination(f"the host {host} cannot be resolved ({exc.strerror or exc})") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private:
        for address in addresses:
            if kind := private_address_kind(address):
                shown = host if host == address else f"{host} ({address})"
                raise RefusedDestination(
                    f"the host {shown} is a {kind} address; only public addresses are {purpose} unless the "
                    "platform is configured to allow private ones"
                )
    return addresses


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """Resolves each host itself, checks every address it resolves to, then connects to one of those addresses.

    DNS rebinding: the socket is opened to an address that was checked, never to the host name, so a name that
    answers with a public address for the check and a private one for the connection cannot slip through. Every
    new connection goes through here, which covers the first request and each redirect target. TLS still checks
    the certificate against the host name: httpcore passes the name to the TLS layer separately.
    """

    def __init__(self, allow_private: bool) -> None:
        self._allow_private = allow_private
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        last_error: Exception | None = None
        for address in await self._addresses(host, port):
            try:
                stream = await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
                return _LargeReads(stream)
            except httpcore.ConnectError as exc:
                last_error = exc
        raise last_error or httpcore.ConnectError(f"no address to connect to for {host}")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)

    async def _addresses(self, host: str, port: int) -> list[str]:
        return await checked_addresses(host, port, self._allow_private)


class _LargeReads(httpcore.AsyncNetworkStream):
    """A connection whose reads return what has arrived, up to :data:`READ_BYTES`, however little httpcore asks
    for.

    httpcore reads a response body 64 KB at a time, and each read costs a cancel scope, an h11 event and a few
    generator layers, plus a copy when the 256 KB the event loop received is split into 64 KB pieces. On a fast
    link that per-read work, not the network, sets the speed: bench/bench_outputs.py went from about 0.75x to about
    1.05x of a plain httpx download with it. h11 takes data of any size, so a larger read changes nothing else.
    """

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max(max_bytes, READ_BYTES), timeout=timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout=timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        # Not wrapped: a TLS read returns one record (16 KB) whatever it asks for (measured here: 4 MB came in
        # 257 reads of at most 16 KB when 1 MB was asked), and asking for 1 MB only makes the ssl module allocate
        # a 1 MB buffer per read.
        return await self._inner.start_tls(ssl_context, server_hostname=server_hostname, timeout=timeout)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


#: httpcore's errors and the httpx errors its own transport raises for them, most specific first.
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _httpx_errors(request: httpx.Request) -> Iterator[None]:
    """Raise httpcore's errors as the httpx errors callers catch, as httpx's own transport does."""
    try:
        yield
    except Exception as exc:
        for core, mapped in _HTTPX_ERRORS:
            if isinstance(exc, core):
                raise mapped(str(exc), request=request) from exc
        raise


class GuardedTransport(httpx.AsyncBaseTransport):
    """httpx over an httpcore pool that connects through :class:`_CheckedBackend` (httpx's own transport takes no
    network backend)."""

    def __init__(self, allow_private: bool) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(),
            network_backend=_CheckedBackend(allow_private),
            max_connections=100,  # httpx's defaults; materialize_urls bounds active downloads itself
            max_keepalive_connections=20,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        with _httpx_errors(request):
            response = await self._pool.handle_async_request(
                httpcore.Request(
                    method=request.method,
                    url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
                    headers=request.headers.raw,
                    content=request.stream,
                    extensions=request.extensions,
                )
            )
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors(self._request):
            async for chunk in self._response.aiter_stream():
                yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default context, built once: loading the CA bundle costs milliseconds per client otherwise."""
    return httpx.create_ssl_context()
