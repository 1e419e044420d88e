"""HTTP exec type: one request described by a TOML file (see docs/http-skills.md), sent with httpx."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from ..catalog.http_spec import HttpSpecError, load_spec
from ..envelope import failure, input_rejected
from ..hookspecs import hookimpl
from ..invoke.context import config_value, host_env

if TYPE_CHECKING:
    from ..catalog.skill import Skill

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_\-]+)\}")
_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
BODY_EXCERPT = 500
MAX_REDIRECTS = 10


class MissingUrlField(ValueError):
    """The input lacks a field the URL template needs: the caller can fix that, unlike the spec."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"the URL needs input field(s) {', '.join(names)}")
        self.names = names


def _lookup(name: str, configs: Mapping[str, Any], declared: frozenset[str]) -> str:
    """``${VAR}``: the skill's configs, then the host environment for variables the skill declares only.

    An HTTP skill must not be able to send arbitrary host secrets to its own URL.
    """
    configured = config_value(name, configs)
    if configured is not None:
        return configured
    if name in declared:
        return host_env(name) or ""
    raise HttpSpecError(
        f"a header uses ${{{name}}}, which is neither in the skill's configs nor declared in "
        "metadata.openclaw.requires.env / primaryEnv; declare it there"
    )


def build_request(
    spec: Mapping[str, Any],
    input: Mapping[str, Any],
    configs: Mapping[str, Any],
    declared: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Method, URL, headers, query and body for httpx from the spec and the input."""
    req = spec["request"]
    remaining = {k: v for k, v in input.items() if not k.startswith("_")}
    used = set(_PLACEHOLDER.findall(req["url"]))
    missing = sorted(name for name in used if name not in remaining)
    if missing:
        raise MissingUrlField(missing)
    url = _PLACEHOLDER.sub(lambda m: quote(str(remaining[m.group(1)]), safe=""), req["url"])
    for name in used:
        remaining.pop(name, None)
    headers = {
        str(k): _VARIABLE.sub(lambda m: _lookup(m.group(1), configs, declared), str(v))
        for k, v in (req.get("headers") or {}).items()
    }
    query = {name: _wire(remaining.pop(name)) for name in (req.get("query") or []) if name in remaining}
    kwargs: dict[str, Any] = {
        "method": str(req.get("method", "GET")).upper(),
        "url": url,
        "headers": headers,
        "params": query,
    }
    if req["body"] == "json" and remaining:
        kwargs["json"] = remaining
    elif req["body"] == "form" and remaining:
        kwargs["data"] = {k: _wire(v) for k, v in remaining.items()}
    return kwargs


def _wire(value: Any) -> Any:
    """A query or form value: lists stay lists (httpx repeats the field), objects as JSON, never a Python repr."""
    if isinstance(value, list):
        return [json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v for v in value]
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return value  # str, numbers, booleans ("true"/"false") and None ("") as httpx writes them


_MISSING = object()


def extract(value: Any, path: str | None) -> Any:
    """A dotted path (``data.items.0``) into a JSON response; ``_MISSING`` when it leads nowhere."""
    for part in [p for p in (path or "").split(".") if p]:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _root_os_error(exc: BaseException) -> BaseException | None:
    """The most specific OSError behind a transport error.

    anyio wraps the real cause (``ConnectionRefusedError``) in a bare ``OSError('All connection attempts
    failed')``, so the first OSError in the chain is not the one that names what happened.
    """
    found: list[BaseException] = []
    pending, seen = [exc], set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError):
            found.append(current)
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
        pending += list(getattr(current, "exceptions", None) or ())  # an ExceptionGroup of attempts
    specific = [e for e in found if type(e) is not OSError]
    return next(iter(specific or found), None)


Origin = tuple[str, str, int | None]
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _host_fields(template: str) -> list[str]:
    """The input fields a URL template puts into its scheme, host or port."""
    scheme, sep, rest = template.partition("://")
    return _PLACEHOLDER.findall(scheme + sep + rest.split("/", 1)[0] if sep else template.split("/", 1)[0])


def literal_origin(template: str) -> Origin | None:
    """Scheme, host and port of a URL template whose host the author wrote out, or None when the input fills it."""
    if _host_fields(template):
        return None
    parts = urlsplit(template)
    scheme = parts.scheme.lower()
    return (scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme))


def _origin_of(url: Any) -> Origin:
    scheme = str(url.scheme).lower()
    return (scheme, str(url.host).lower(), url.port or _DEFAULT_PORTS.get(scheme))


async def _send(kwargs: dict[str, Any], origin: Origin | None, timeout: float, allow_private: bool) -> Any:
    """Send the request, following redirects one by one. A host the skill's author wrote is connected to as is;
    a host from the input, and every redirect that leaves the written host, goes through the SSRF guard of URL
    materialization (public addresses only, unless SKILLYARD_ALLOW_PRIVATE_URLS=1)."""
    import httpx

    from ..outputs.address_guard import GuardedTransport

    async with httpx.AsyncClient(timeout=timeout) as plain:
        guarded: httpx.AsyncClient | None = None
        try:
            request = plain.build_request(**kwargs)
            for _ in range(MAX_REDIRECTS + 1):
                if origin is not None and _origin_of(request.url) == origin:
                    client = plain
                else:
                    if guarded is None:
                        guarded = httpx.AsyncClient(timeout=timeout, transport=GuardedTransport(allow_private))
                    client = guarded
                response = await client.send(request)
                if not response.is_redirect or response.next_request is None:
                    return response
                await response.aclose()
                request = response.next_request
            raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=request)
        finally:
            if guarded is not None:
                await guarded.aclose()


class HttpExecutor:
    """Sends the request; non-2xx is a failure envelope with the status and a body excerpt."""

    async def run(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any], *, yard: Any) -> Any:
        assert skill.exec.config is not None
        try:
            spec = load_spec(skill.exec.config)
            kwargs = build_request(spec, input, ctx.get("skill_args") or {}, frozenset(skill.requires.credential_env))
        except HttpSpecError as exc:
            return failure(skill.name, f"HTTP skill {skill.name!r}: {exc}", error_type="config", non_retriable=True)
        except MissingUrlField as exc:
            field = exc.names[0]
            message = f"HTTP skill {skill.name!r}: {exc}; call it again with a value for {field!r}"
            return input_rejected(skill.name, message, field)
        timeout = float(spec["request"].get("timeout", 30))
        import httpx  # here: importing the plugin must not cost the HTTP stack (the CLI imports it)

        from ..outputs.address_guard import RefusedDestination

        origin = literal_origin(spec["request"]["url"])
        try:
            response = await _send(kwargs, origin, timeout, yard.settings.allow_private_urls)
        except RefusedDestination as exc:
            if origin is None:  # the host came from the input: the caller can send another
                fields = _host_fields(spec["request"]["url"])
                message = f"HTTP skill {skill.name!r} refused the address from its input: {exc}"
                return input_rejected(skill.name, message, fields[0] if fields else "")
            return failure(
                skill.name,
                f"HTTP skill {skill.name!r} was redirected away from {origin[1]} and refused: {exc}",
                refused_destination=True,
                error_type="recoverable",
                non_retriable=True,
            )
        except httpx.TooManyRedirects:
            return failure(
                skill.name,
                f"HTTP skill {skill.name!r}: more than {MAX_REDIRECTS} redirects from {kwargs['url'].split('?')[0]}",
                error_type="transient",
            )
        except httpx.TransportError as exc:
            cause = _root_os_error(exc)
            kind = cause.__class__.__name__ if cause else exc.__class__.__name__
            if isinstance(exc, httpx.ConnectError) and "refused" in str(exc).lower():
                kind = "ConnectionRefusedError"
            return failure(
                skill.name,
                f"HTTP skill {skill.name!r} could not reach {kwargs['url'].split('?')[0]}: {exc}",
                exception_type=kind,
                error_type="transient",
                timed_out=isinstance(exc, httpx.TimeoutException),
            )
        text = response.text
        if not response.is_success:
            return failure(
                skill.name,
                f"HTTP skill {skill.name!r}: {response.status_code} {response.reason_phrase}: {text[:BODY_EXCERPT]}",
                status=response.status_code,
                body_excerpt=text[:BODY_EXCERPT],
                error_type="transient" if response.status_code >= 500 or response.status_code == 429 else "recoverable",
            )
        try:
            data = response.json()
        except ValueError:
            return {"output": text, "status": response.status_code}
        except RecursionError:
            return failure(
                skill.name,
                f"HTTP skill {skill.name!r}: the response is JSON nested too deeply to read",
                status=response.status_code,
                body_excerpt=text[:BODY_EXCERPT],
                error_type="recoverable",
            )
        path = (spec.get("response") or {}).get("path")
        result = extract(data, path)
        if result is _MISSING:
            return failure(
                skill.name,
                f"HTTP skill {skill.name!r}: response.path {path!r} is not in the response "
                f"(top-level keys: {', '.join(list(data)[:10]) if isinstance(data, dict) else type(data).__name__})",
                status=response.status_code,
                error_type="config",
            )
        return result


@hookimpl
def register_exec_types(register: Any) -> None:
    register("HTTP", HttpExecutor())
