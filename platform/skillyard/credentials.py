"""Credentials: which names hold them, and masking a run's own credential values wherever they could show.

Two name rules. Parameters models see follow the spec's list (§5.2), so an email ``signature`` or a ``private``
flag stays a parameter. Stored configs follow a wider one (``db_passwd``, ``cookie``, ``bearer``, ``*_pem`` …) plus
the names a skill declares (``metadata.skillyard.secret_configs``): those are encrypted at rest, masked when
listed and kept out of a subprocess's ``SKILL_CONTEXT``.

A run's own credential values (6 characters or more) are masked, with their base64, hex and URL-encoded forms, in
every field of its envelope (success or failure, nested), so in offload files and records too, and in the
log lines its modules write while it runs (:func:`masked_logger`). A run without credentials pays nothing.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import logging
import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

#: §5.2: a parameter whose name contains one of these (case-insensitive substring) is a credential.
SECRET_SUBSTRINGS = ("key", "token", "secret", "password", "credential", "auth")
#: Config keys that are credentials too (stored encrypted), beyond the spec's list.
CONFIG_SECRET_SUBSTRINGS = (
    *SECRET_SUBSTRINGS,
    "passwd",
    "pwd",
    "passphrase",
    "cookie",
    "bearer",
    "private_key",
    "pem",
    "session_key",
    "webhook",
)
_SECRET_RX = re.compile("|".join(SECRET_SUBSTRINGS), re.IGNORECASE)
_CONFIG_SECRET_RX = re.compile("|".join(CONFIG_SECRET_SUBSTRINGS), re.IGNORECASE)
#: Shorter values are not masked: "on", "1234" would turn ordinary text into stars.
MIN_MASKED = 6
MASK = "***"


def looks_secret(name: str) -> bool:
    """True when a parameter name contains a credential substring (the spec's rule, before ``x-secret``)."""
    return bool(_SECRET_RX.search(name))


def secret_config(name: str, declared: Iterable[str] = ()) -> bool:
    """True when a config key holds a credential: the wider rule, or a name the skill declares secret (an entry
    ending in ``*`` declares every key starting with what comes before it: ``alias_*``)."""
    if _CONFIG_SECRET_RX.search(name):
        return True
    lowered = name.lower()
    for entry in declared:
        pattern = entry.lower()
        if lowered == pattern or (pattern.endswith("*") and lowered.startswith(pattern[:-1])):
            return True
    return False


def _forms(value: str) -> set[str]:
    """The value and the encodings it travels in: base64 (standard and URL-safe, padded or not), hex, URL."""
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), quote_plus(value), raw.hex(), raw.hex().upper()}
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode("ascii")
        forms.update((text, text.rstrip("=")))
    return {f for f in forms if len(f) >= MIN_MASKED}


class Masker:
    """Replaces a run's credential values (in all their forms) by ``***`` in text and in nested JSON values."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = tuple(v for v in values if isinstance(v, str) and len(v) >= MIN_MASKED)
        forms = set().union(*(_forms(v) for v in self.values))
        ordered = sorted(forms, key=len, reverse=True)  # longest first: a value inside another's form stays whole
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    @classmethod
    def of(cls, values: Iterable[str]) -> Masker | None:
        """A masker for ``values``, or None when none is long enough to mask (the common case: no credential).
        Built once per set of values: every encoded form and one regular expression cost more than many a run they
        guard, and a role's secrets come back run after run."""
        return _masker_of(tuple(values))

    def text(self, text: str) -> str:
        assert self._pattern is not None
        return self._pattern.sub(MASK, text)

    def value(self, value: Any) -> Any:
        """``value`` with every string in it (keys included) masked; other values as they are."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


#: The masker of the run in progress in this task (None: it has no credentials), read by the log filter.
current_masker: contextvars.ContextVar[Masker | None] = contextvars.ContextVar("skillyard_masker", default=None)


class _MaskingFilter(logging.Filter):
    """Masks the running run's credentials in a record (its formatted message), at every verbosity."""

    def filter(self, record: logging.LogRecord) -> bool:
        masker = current_masker.get()
        if masker is not None:
            record.msg = masker.text(record.getMessage())
            record.args = ()
            if record.exc_info and record.exc_info[1] is not None:
                record.exc_text = masker.text(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


_FILTER = _MaskingFilter()


@functools.lru_cache(maxsize=128)
def _masker_of(values: tuple[str, ...]) -> Masker | None:
    masker = Masker(values)
    return masker if masker._pattern is not None else None


@contextlib.contextmanager
def mask_secrets(values: Iterable[str]) -> Iterator[None]:
    """Mask ``values`` too (with the running run's own credentials) in the lines of masked loggers while the block
    runs: for secrets that are no config of the running skill (a URL's token, another skill's credentials)."""
    running = current_masker.get()
    token = current_masker.set(Masker.of((*(running.values if running is not None else ()), *values)))
    try:
        yield
    finally:
        current_masker.reset(token)


def masked_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the masking filter: for modules that log what skills produced."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
