"""Encryption of secret config values with Fernet (cryptography): a key ring, newest key first, so values saved
under an older key still decrypt and rotation moves them onto the newest. Key values never appear in messages."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from ..errors import SkillyardError

KEYS_ENV = "SKILLYARD_SECRET_KEYS"
KEY_ENV = "SKILLYARD_SECRET_KEY"
KEY_FILE = "secret.key"
KEY_FILE_SOURCE = "key file"
GENERATE = "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"


@dataclass(frozen=True)
class KeyRing:
    """The Fernet keys in use, newest first, and where they came from: ``SKILLYARD_SECRET_KEYS``,
    ``SKILLYARD_SECRET_KEY`` or the key file (``file`` is then its path)."""

    keys: tuple[bytes, ...] = field(repr=False)
    source: str
    file: Path | None = None

    def describe(self) -> str:
        """Where the keys come from, for messages."""
        return f"the key file {self.file}" if self.file is not None else self.source

    def with_new_key(self) -> KeyRing:
        """The same ring with a freshly generated key in front."""
        return replace(self, keys=(Fernet.generate_key(), *self.keys))


def load_keys(home: Path, keys: str | None = None, key: str | None = None) -> KeyRing:
    """The key ring: ``SKILLYARD_SECRET_KEYS`` (comma-separated, newest first) when set, it wins over
    ``SKILLYARD_SECRET_KEY`` (one key); else ``SKILLYARD_HOME/secret.key`` (one key a line, newest first; created
    0600 with one new key on first use). A bad key anywhere is an error naming its position."""
    if keys is not None and keys.strip():
        entries = [entry.strip() for entry in keys.split(",")]
        return KeyRing(_checked(entries, lambda n: f"{KEYS_ENV}: key {n} of {len(entries)}"), KEYS_ENV)
    if key is not None and key.strip():
        return KeyRing(_checked([key.strip()], lambda n: KEY_ENV), KEY_ENV)
    return read_key_file(home / KEY_FILE, create=True)


def read_key_file(path: Path, *, create: bool = False) -> KeyRing:
    """The keys of a key file (blank lines ignored); ``create`` makes it with one new key when it is missing."""
    if create and not path.exists():
        _create_key_file(path)
    try:
        text = path.read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise SkillyardError(
            f"the key file {path} is not text: it must hold Fernet keys, one a line, newest first; restore it "
            f"from a backup (or generate a key with: {GENERATE})"
        ) from None
    except OSError as exc:
        raise SkillyardError(f"cannot read the key file {path} ({exc.strerror or exc}); check its rights") from None
    numbered = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not numbered:
        raise SkillyardError(
            f"the key file {path} holds no key; restore it from a backup (secrets stored with its keys cannot be "
            "decrypted without them), or delete it to have a new key generated"
        )
    lines = {i: n for i, (n, _) in enumerate(numbered, 1)}
    entries = [line for _, line in numbered]
    where = f"the key file {path}"
    return KeyRing(
        _checked(entries, lambda n: f"key {n} of {len(entries)} (line {lines[n]}) in {where}"),
        KEY_FILE_SOURCE,
        path,
    )


def _checked(entries: Sequence[str], position: Callable[[int], str]) -> tuple[bytes, ...]:
    """``entries`` as keys, each a valid Fernet key; the error names the position (``position(n)``), never the key."""
    keys = []
    for n, entry in enumerate(entries, 1):
        where = position(n)
        if not entry:
            raise SkillyardError(
                f"{where} is empty; list the keys separated by commas, newest first, without empty entries"
            )
        try:
            Fernet(entry.encode())
        except (ValueError, UnicodeEncodeError):
            newest = " (the newest: it encrypts)" if n == 1 and len(entries) > 1 else ""
            raise SkillyardError(
                f"{where}{newest} is not a valid Fernet key (32 url-safe base64-encoded bytes); "
                f"generate one with: {GENERATE}"
            ) from None
        keys.append(entry.encode())
    return tuple(keys)


def write_key_file(path: Path, keys: Sequence[bytes]) -> None:
    """Replace the key file atomically: a 0600 temp file beside it, fsynced, renamed over it."""
    data = b"".join(key + b"\n" for key in keys)
    temp = _write_temp(path, data)
    try:
        os.replace(temp, path)
    except BaseException:
        _discard(temp)
        raise
    _sync_folder(path.parent)


def _create_key_file(path: Path) -> None:
    """A new key file with one key; when another process creates it first, theirs stays (link(2) never replaces)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path, Fernet.generate_key() + b"\n")
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    except OSError:  # no hard links on this filesystem: an exclusive rename is the next best
        if not path.exists():
            os.replace(temp, path)
    finally:
        _discard(temp)


def _write_temp(path: Path, data: bytes) -> Path:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        _discard(temp)
        raise
    return temp


def _sync_folder(folder: Path) -> None:
    """The rename survives a crash (POSIX; a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class Cipher:
    """Encrypts with the newest key of a ring and decrypts with any of them (``MultiFernet``)."""

    def __init__(self, keys: KeyRing | bytes) -> None:
        if not isinstance(keys, KeyRing):
            keys = KeyRing(_checked([keys.decode("utf-8", "replace")], lambda n: KEY_ENV), KEY_ENV)
        self.ring = keys
        self._fernet = MultiFernet([Fernet(key) for key in self.ring.keys])

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise SkillyardError(
                f"a stored secret cannot be decrypted with any key of {self.ring.describe()}; restore the key it was "
                f"saved with (add it to {KEYS_ENV}, after the newest, or as a line of SKILLYARD_HOME/{KEY_FILE}), "
                "or set the config again"
            ) from None

    def rotate(self, token: str) -> str:
        """``token`` re-encrypted with the newest key; :class:`InvalidToken` when no key of the ring opens it."""
        return self._fernet.rotate(token.encode()).decode()
