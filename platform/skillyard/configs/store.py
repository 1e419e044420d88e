"""Skill configs per (role, skill) in PostgreSQL; secret values encrypted; reads cached until changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import InvalidToken
from sqlalchemy import bindparam, delete, select, text
from sqlalchemy.dialects.postgresql import insert

from ..credentials import secret_config
from ..errors import CredentialNotInInput, InvalidInput, SkillyardError
from ..storage.database import Database
from ..storage.tables import skill_configs
from ..storage.text import unstorable
from .crypto import Cipher, KeyRing, write_key_file
from .keys import normalize_key

#: Serialises rotations sharing a database: each reads the key file after the one before it committed.
_ROTATE_LOCK = "skillyard:configs:rotate-key"
#: Every change is announced on this PostgreSQL channel (payload: role and skill as JSON), in its transaction:
#: a long-running process (``skillyard serve``) that LISTENs drops its cached read of that (role, skill).
CHANGED_CHANNEL = "skillyard_configs"
_NOTIFY = text(
    "SELECT pg_notify(:channel, json_build_object('role_id', CAST(:r AS text), 'skill', CAST(:s AS text))::text)"
)


#: The longest role, skill and key names (their columns' width).
MAX_NAME = 200


def _check_scope(role_id: Any, skill: Any) -> None:
    """Configs belong to a role (text, ``""`` for the default role) and a skill (a non-empty name)."""
    if not isinstance(role_id, str):
        raise InvalidInput(f"role must be text ('' for the default role), not {type(role_id).__name__}")
    if not isinstance(skill, str) or not skill.strip():
        raise InvalidInput(f"skill must be a skill's name, got {skill!r}")
    _check_name("the role", role_id)
    _check_name("the skill name", skill)


def _check_name(what: str, name: str) -> None:
    if len(name) > MAX_NAME:
        raise InvalidInput(f"{what} is {len(name)} characters long; use at most {MAX_NAME}")
    _check_text(what, name)


def _check_text(what: str, text: str) -> None:
    """Never shows the text: it may be a secret."""
    if unstorable(text):
        raise InvalidInput(
            f"{what} holds a NUL character or half of a surrogate pair, which cannot be stored; remove it"
        )


@dataclass(frozen=True)
class Rotation:
    """What :meth:`ConfigStore.rotate_key` did: how many stored secrets it re-encrypted, the keys now in use (newest
    first) and whether it added a new key (to the key file; keys from the environment are never changed)."""

    rotated: int
    ring: KeyRing
    key_added: bool


class ConfigStore:
    """Configs of every role; ``get`` is served from memory after the first read of a (role, skill).

    A key is stored encrypted when the config rule of :mod:`skillyard.credentials` says it is a credential, or the
    skill declares it secret (``declared(skill)``, from ``metadata.skillyard.secret_configs``). Rows stored in
    plain text before the rule covered them are encrypted the first time this process reads the table.
    """

    def __init__(
        self,
        database: Database,
        cipher_factory: Callable[[], Cipher],
        declared: Callable[[str], tuple[str, ...]] = lambda skill: (),
    ) -> None:
        self._db = database
        self._cipher_factory = cipher_factory
        self._cipher: Cipher | None = None
        self._declared = declared
        self._cache: dict[tuple[str, str], dict[str, str]] = {}
        self._plaintext_checked = False

    @property
    def cipher(self) -> Cipher:
        if self._cipher is None:
            self._cipher = self._cipher_factory()
        return self._cipher

    async def get(self, role_id: str, skill: str) -> dict[str, str]:
        """The decrypted configs of a skill for a role (empty when no database exists yet)."""
        key = (role_id, skill)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if not self._db.exists:
            return {}
        await self.encrypt_plaintext_secrets()
        sessions = await self._db.session_factory()
        async with sessions() as session:
            rows = (
                await session.execute(
                    select(skill_configs.c.key, skill_configs.c.value, skill_configs.c.secret).where(
                        skill_configs.c.role_id == role_id, skill_configs.c.skill == skill
                    )
                )
            ).all()
        values = {k: (self._decrypt(v) if secret else v) for k, v, secret in rows}
        self._cache[key] = values
        return values

    def _decrypt(self, token: str) -> str:
        """Decrypt with the keys loaded; when none opens ``token``, read the keys once more: a ``rotate-key`` of
        another process may have added one to the key file this process has not seen yet."""
        try:
            return self.cipher.decrypt(token)
        except SkillyardError:
            fresh = self._cipher_factory()
            if fresh.ring.keys == self.cipher.ring.keys:
                raise
            self._cipher = fresh
            return fresh.decrypt(token)

    def is_secret(self, skill: str, key: str) -> bool:
        """Whether ``key`` (normalized) of ``skill`` is a credential: the config rule, or declared by the skill."""
        return secret_config(normalize_key(key), self._declared(skill))

    async def set(self, role_id: str, skill: str, values: Mapping[str, Any]) -> dict[str, bool]:
        """Store values (credential-looking keys encrypted); return which keys were stored as secrets."""
        _check_scope(role_id, skill)
        if not isinstance(values, Mapping):
            raise InvalidInput(f"values must be a mapping such as {{'api_token': '…'}}, not {type(values).__name__}")
        rows = []
        stored: dict[str, bool] = {}
        for raw_key, value in values.items():
            key = normalize_key(str(raw_key))
            if not key:
                raise InvalidInput(f"config key {raw_key!r} is empty once normalized; use a name like api_token")
            _check_name(f"config key {key[:40]!r}", key)
            secret = secret_config(key, self._declared(skill))
            text = "" if value is None else str(value)
            _check_text(f"the value of {key!r}", text)
            rows.append(
                {
                    "role_id": role_id,
                    "skill": skill,
                    "key": key,
                    "secret": secret,
                    "value": self.cipher.encrypt(text) if secret else text,
                }
            )
            stored[key] = secret
        if not rows:
            return stored
        sessions = await self._db.session_factory()
        async with sessions() as session, session.begin():
            stmt = insert(skill_configs).values(rows)
            await session.execute(
                stmt.on_conflict_do_update(
                    index_elements=["role_id", "skill", "key"],
                    set_={
                        "value": stmt.excluded.value,
                        "secret": stmt.excluded.secret,
                        "updated_at": stmt.excluded.updated_at,
                    },
                )
            )
            await session.execute(_NOTIFY, {"channel": CHANGED_CHANNEL, "r": role_id, "s": skill})
        self._cache.pop((role_id, skill), None)
        return stored

    async def set_from_user(self, role_id: str, skill: str, key: str, value: Any, raw_input: str) -> dict[str, bool]:
        """§5.2: store one config a user gave in chat. A credential must appear, whole, in ``raw_input`` (the text
        the user typed in this turn); the value is stored without surrounding whitespace. See
        :meth:`skillyard.SkillYard.save_config_from_user`."""
        _check_scope(role_id, skill)
        if not isinstance(key, str):
            raise InvalidInput(f"key must be text such as 'api_token', not {type(key).__name__}")
        if not isinstance(raw_input, str):
            raise InvalidInput(f"raw_input must be the text of the user's message, not {type(raw_input).__name__}")
        typed = "" if value is None else str(value).strip()
        if not typed:
            raise InvalidInput(
                f"the value of {skill}.{normalize_key(key) or key} is empty; ask the user for the value and save what "
                "they type (use unset to remove a config)"
            )
        if self.is_secret(skill, key) and typed not in raw_input:
            raise CredentialNotInInput(
                f"{skill}.{normalize_key(key)} is a credential and the value given does not appear in the user's "
                "message of this turn: the user must type the value in this message to save it; credentials are "
                "never taken from earlier messages, generated or pieced together"
            )
        return await self.set(role_id, skill, {key: typed})

    async def listing(self, role_id: str, skill: str) -> dict[str, tuple[str, bool]]:
        """Each config key of a skill for a role with its value and whether it is stored as a secret."""
        _check_scope(role_id, skill)
        values = await self.get(role_id, skill)
        declared = self._declared(skill)
        return {key: (value, secret_config(key, declared)) for key, value in values.items()}

    async def encrypt_plaintext_secrets(self) -> int:
        """Encrypt the rows stored in plain text whose key the config rule (or the skill) now calls secret; once per
        process. Returns how many rows changed."""
        if self._plaintext_checked:
            return 0
        self._plaintext_checked = True
        sessions = await self._db.session_factory()
        async with sessions() as session, session.begin():
            rows = (
                await session.execute(
                    select(skill_configs.c.role_id, skill_configs.c.skill, skill_configs.c.key, skill_configs.c.value)
                    .where(skill_configs.c.secret.is_(False))
                    .with_for_update()
                )
            ).all()
            changed = [r for r in rows if secret_config(r.key, self._declared(r.skill))]
            for row in changed:
                await session.execute(
                    skill_configs.update()
                    .where(
                        skill_configs.c.role_id == row.role_id,
                        skill_configs.c.skill == row.skill,
                        skill_configs.c.key == row.key,
                    )
                    .values(value=self.cipher.encrypt(row.value), secret=True)
                )
        if changed:
            self._cache.clear()
        return len(changed)

    async def rotate_key(self) -> Rotation:
        """Re-encrypt every stored secret with the newest key, all or nothing (one transaction).

        With the key file a new key is generated and written at the top of the file (the old keys stay, so values
        saved under them by other hosts still decrypt) before the transaction commits; a failure leaves the rows and
        the file as they were. With keys from the environment the newest env key is used: the environment cannot be
        edited from here, so a rotation there means putting a new key first in ``SKILLYARD_SECRET_KEYS``.
        """
        await self.encrypt_plaintext_secrets()
        sessions = await self._db.session_factory()
        async with sessions() as session, session.begin():
            await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:lock))"), {"lock": _ROTATE_LOCK})
            ring = self._cipher_factory().ring  # read under the lock: a rotation just committed may have added a key
            if ring.file is not None:
                ring = ring.with_new_key()
            cipher = Cipher(ring)
            rows = (
                await session.execute(
                    select(skill_configs.c.role_id, skill_configs.c.skill, skill_configs.c.key, skill_configs.c.value)
                    .where(skill_configs.c.secret.is_(True))
                    .with_for_update()
                )
            ).all()
            updates = []
            for row in rows:
                try:
                    value = cipher.rotate(row.value)
                except InvalidToken:
                    raise SkillyardError(
                        f"the stored secret {row.skill}.{row.key} of role {row.role_id!r} cannot be decrypted with "
                        f"any key of {ring.describe()}, so nothing was re-encrypted: restore the key it was saved "
                        "with and run rotate-key again, or set (or unset) that config first"
                    ) from None
                updates.append({"r": row.role_id, "s": row.skill, "k": row.key, "v": value})
            if updates:
                await session.execute(
                    skill_configs.update()
                    .where(
                        skill_configs.c.role_id == bindparam("r"),
                        skill_configs.c.skill == bindparam("s"),
                        skill_configs.c.key == bindparam("k"),
                    )
                    .values(value=bindparam("v")),
                    updates,
                )
            if ring.file is not None:  # last before the commit: a failed write rolls the rows back
                try:
                    write_key_file(ring.file, ring.keys)
                except OSError as exc:
                    raise SkillyardError(
                        f"cannot write the key file {ring.file} ({exc.strerror or exc}), so nothing was "
                        "re-encrypted; check the rights on SKILLYARD_HOME and run rotate-key again"
                    ) from None
        self._cipher = cipher
        return Rotation(len(updates), ring, ring.file is not None)

    async def unset(self, role_id: str, skill: str, keys: list[str] | None = None) -> int:
        """Remove some keys (or all) of a skill's configs for a role; return how many rows went."""
        _check_scope(role_id, skill)
        sessions = await self._db.session_factory()
        stmt = delete(skill_configs).where(skill_configs.c.role_id == role_id, skill_configs.c.skill == skill)
        if keys:
            names = [normalize_key(k) for k in keys]
            for name in names:
                _check_name(f"config key {name[:40]!r}", name)
            stmt = stmt.where(skill_configs.c.key.in_(names))
        async with sessions() as session, session.begin():
            result = await session.execute(stmt)
            await session.execute(_NOTIFY, {"channel": CHANGED_CHANNEL, "r": role_id, "s": skill})
        self._cache.pop((role_id, skill), None)
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def invalidate(self, role_id: str | None = None, skill: str | None = None) -> None:
        """Drop cached reads (all, or one role/skill) so the next run reads the table again."""
        for key in list(self._cache):
            if (role_id is None or key[0] == role_id) and (skill is None or key[1] == skill):
                del self._cache[key]
