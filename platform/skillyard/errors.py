"""Exceptions raised by the host (never by a skill run: runs answer with failure envelopes)."""

from __future__ import annotations


class SkillyardError(Exception):
    """Base class: a problem the caller can fix; the message says what was wrong and how to fix it."""


class UnknownSkill(SkillyardError):
    """No skill, alias or tool name matches the requested name."""

    def __init__(self, name: str, known: list[str]) -> None:
        hint = ", ".join(sorted(known)[:20]) or "none"
        more = "" if len(known) <= 20 else f" and {len(known) - 20} more"
        super().__init__(
            f"unknown skill {name!r}: no skill, alias or tool name matches it. "
            f"Known skills: {hint}{more}. Run 'skillyard list' to see every skill and the roots searched."
        )
        self.name = name


class UnknownExecType(SkillyardError):
    """A skill declares an exec type no plugin registered."""


class DuplicateRegistration(SkillyardError):
    """Two plugins registered the same exec type, processor order or command."""


class InvalidInput(SkillyardError):
    """Malformed input at a public entry point (bad JSON, a non-object input, an unsafe path)."""


class CredentialNotInInput(SkillyardError):
    """§5.2: a credential offered for saving from a conversation does not appear in the user's message of that turn
    (the message says so; it never repeats the value)."""


class StorageError(SkillyardError):
    """The database could not be reached or set up."""
