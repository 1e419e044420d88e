"""The error of the datatable skill's field layer: a field definition or a value was refused (spec §7.1, §7.5)."""

from __future__ import annotations

__all__ = ["FieldError"]


class FieldError(ValueError):
    """A field definition or a value was refused; the message says what was wrong and how to fix it."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
