"""Encryption of secret config values with Fernet (cryptography); the key never leaves this module's callers."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from ..errors import SkillyardError


def load_key(home: Path, configured: str | None) -> bytes:
    """``SKILLYARD_SECRET_KEY`` when set, else ``SKILLYARD_HOME/secret.key`` (created 0600 on first use)."""
    if configured:
        return configured.encode()
    path = home / "secret.key"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(Fernet.generate_key())
    return path.read_bytes().strip()


class Cipher:
    """Encrypts and decrypts config values."""

    def __init__(self, key: bytes) -> None:
        try:
            self._fernet = Fernet(key)
        except ValueError:
            raise SkillyardError(
                "SKILLYARD_SECRET_KEY is not a valid Fernet key (32 url-safe base64-encoded bytes); "
                "generate one with: python -c "
                "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
            ) from None

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise SkillyardError(
                "a stored secret cannot be decrypted with the current key; restore the SKILLYARD_SECRET_KEY "
                "(or SKILLYARD_HOME/secret.key) it was saved with, or set the config again"
            ) from None
