"""Value expressions of contract spec §9 (``inputs.title``, ``evidence.tags.0.id`` …) and the §11 platform fields."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

#: §11: the login-identity fields ``platform.<field>`` may read (case-sensitive).
PLATFORM_FIELDS: tuple[str, ...] = ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath")
#: §11: identity fields that exist but are never open to contracts (configuration ``platform.hidden``).
HIDDEN_PLATFORM_FIELDS: tuple[str, ...] = ("passportId", "clientId", "sessionType", "adminUser", "adminCompany")


def open_platform_fields(hidden: Iterable[str] = HIDDEN_PLATFORM_FIELDS) -> frozenset[str]:
    """The platform fields contracts may read: every §11 field the ``[agent] platform_hidden`` setting does not list
    (§11: fields are closed by configuration, not by nature; by default the five of HIDDEN_PLATFORM_FIELDS)."""
    return (frozenset(PLATFORM_FIELDS) | frozenset(HIDDEN_PLATFORM_FIELDS)) - frozenset(hidden)


class Prefix(StrEnum):
    """The prefix of an expression; the value is the text before the first dot."""

    INPUTS = "inputs"
    OUTPUTS = "outputs"
    SHARED = "shared"
    SESSION = "session"
    PRIOR = "prior"
    PLATFORM = "platform"
    EVIDENCE = "evidence"
    #: Only in ``verify.args``: the request arguments of the original write call.
    CALL = "call"


#: The source type recorded when an ``args.*.from`` binding succeeds (§9), by prefix.
PREFIX_SOURCE: dict[Prefix, str] = {
    Prefix.INPUTS: "NODE_OUTPUT",
    Prefix.OUTPUTS: "NODE_OUTPUT",
    Prefix.SHARED: "SHARED",
    Prefix.SESSION: "SESSION",
    Prefix.PRIOR: "PRIOR_TASK",
    Prefix.PLATFORM: "PLATFORM",
    Prefix.EVIDENCE: "EVIDENCE",
}

_ARG_PREFIXES = tuple(p for p in Prefix if p is not Prefix.CALL)


class ExpressionError(ValueError):
    """An expression that §9 does not allow; the message names the text and the allowed prefixes."""


@dataclass(frozen=True)
class Expression:
    """A parsed expression: ``prefix`` and the dotted ``parts`` after it (``[]`` stays inside a part).

    ``evidence.tags.0.id`` → ``Expression(EVIDENCE, ("tags", "0", "id"))``: the first part is the extract key;
    ``prior.article:42.title`` → ``Expression(PRIOR, ("article:42", "title"))``.
    """

    prefix: Prefix
    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return ".".join((self.prefix.value, *self.parts))

    @property
    def head(self) -> str:
        """The first part: the key (inputs/outputs/shared/session/evidence), entity type (prior) or field."""
        return self.parts[0]

    @property
    def path(self) -> str:
        """The parts after the prefix, dotted again (``lines[].code``)."""
        return ".".join(self.parts)

    def __str__(self) -> str:
        return self.text


def parse_expression(text: str, *, allow_call: bool = False) -> Expression:
    """Parse ``<prefix>.<path>``; ``call.`` only when ``allow_call`` (``verify.args``). Raises ExpressionError."""
    allowed = tuple(Prefix) if allow_call else _ARG_PREFIXES
    names = ", ".join(f"{p.value}." for p in allowed)
    raw = text.strip()
    head, dot, rest = raw.partition(".")
    try:
        prefix = Prefix(head)
    except ValueError:
        prefix = None
    if prefix is None or prefix not in allowed:
        where = "" if prefix is None else " (call. is only allowed in verify.args)"
        raise ExpressionError(f"unknown prefix {head + dot!r} in {raw!r}{where}; use one of {names}")
    parts = tuple(rest.split(".")) if rest else ()
    if not dot or not parts or any(not p for p in parts):
        raise ExpressionError(f"{raw!r} has an empty path after {prefix.value + '.'!r}; write e.g. '{prefix}.key'")
    if prefix is Prefix.PLATFORM and len(parts) != 1:
        raise ExpressionError(f"{raw!r}: platform. takes exactly one field, e.g. 'platform.userId'")
    return Expression(prefix, parts)
