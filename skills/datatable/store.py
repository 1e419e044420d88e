"""Storage model and structure actions of the datatable skill (spec §7.1, §7.3).

Plain async functions over an asyncpg connection. The handler takes the connection from the platform's session with
:func:`raw_connection`; every function that writes runs inside ``conn.transaction()``, which is a SAVEPOINT when the
session already has a transaction open, so a failed action leaves nothing behind and the caller still commits.

Storage model:

* one PostgreSQL schema per organisation, ``org_data_<org id lower-cased, only a-z and 0-9 kept>``;
* each logical table is a real table named by its (Chinese) title, with the system columns ``id bigserial primary
  key`` and ``created_at timestamptz default now()``;
* the business meaning of fields (type, required, unique, options, precision, scale, order) lives in the metadata
  tables ``_dt_tables`` and ``_dt_fields`` inside the schema, never inferred from information_schema.

Decisions:

* ``required`` is metadata only (checked by the row validator on insert, §7.5), not ``NOT NULL``: a required field
  can be added to a table that already has rows, and updates do not re-check it.
* ``unique`` is a real UNIQUE constraint (named ``_dt_uq_<field id>`` so renames do not matter): on_conflict=skip and
  duplicate refusal rely on it.
* A type change converts every value through its text form (``CAST(btrim(text) AS new_type)``; 多选 splits on
  , ， 、 ; ；) and is checked first with ``pg_input_is_valid`` (PostgreSQL 16+), so a change that would fail reports
  how many rows are in the way and changes nothing. Options of 单选 / 多选 are checked the same way. Fewer decimal
  places round half away from zero, as writes do (§7.5); too many digits before the point are refused.
* Identifiers are always double-quoted by :func:`quote_ident`; values always travel as ``$n`` parameters.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import asyncpg

from .fields import TYPES, FieldDef, FieldError, check_identifier, parse_field

__all__ = [
    "MAX_FIELDS",
    "META_TABLES",
    "StoreError",
    "TableInfo",
    "add_field",
    "changes_type",
    "create_table",
    "delete_field",
    "delete_table",
    "ensure_schema",
    "list_columns",
    "list_tables",
    "load_fields",
    "quote_ident",
    "raw_connection",
    "raw_connection_probing",
    "register_sql_table",
    "resolve_table",
    "schema_for",
    "update_field",
]

#: Business fields per table. PostgreSQL allows 1600 columns; a table with more than 200 fields is a design error.
MAX_FIELDS = 200
#: The metadata tables inside each org schema; the SQL channel should refuse them (pass as forbidden_tables).
META_TABLES: frozenset[str] = frozenset({"_dt_tables", "_dt_fields"})
_META_PREFIX = "_dt_"
_SCHEMA_RE = re.compile(r"org_data_[a-z0-9]+")
_MAX_SCHEMA_BYTES = 63
#: First key of the two-key advisory locks this module takes (the second is hashtext(schema)).
_LOCK_CLASS = 0x6474  # "dt"
_SELECT_TYPES = frozenset({"单选", "多选"})
_MULTI_SPLIT = r"\s*[,，、;；]\s*"


class StoreError(ValueError):
    """An action was refused or failed; the message says what was wrong and how to fix it.

    ``error_type`` is ``recoverable`` (change the parameters and it works), ``config`` (deployment / setup problem) or
    ``transient``; ``non_retriable`` is True only when retrying with the same input cannot work for deployment
    reasons; ``need_param`` names the parameter to fix.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "recoverable",
        non_retriable: bool = False,
        need_param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.non_retriable = non_retriable
        self.need_param = need_param


@dataclass(frozen=True)
class TableInfo:
    """A resolved table. ``fields`` holds its business fields when they were read together with the table (in the
    same transaction, by :func:`permissions.table_access`), so the row functions need not read them again."""

    id: str
    title: str
    schema: str
    fields: tuple[FieldDef, ...] | None = dataclass_field(default=None, compare=False, repr=False)

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.title)}"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "schema": self.schema, "qualified": self.qualified}


def quote_ident(name: str) -> str:
    """A PostgreSQL quoted identifier: ``"name"`` with embedded double quotes doubled."""
    if "\x00" in name:
        raise StoreError("an identifier cannot contain a NUL character")
    return '"' + name.replace('"', '""') + '"'


async def raw_connection(session: Any) -> asyncpg.Connection:
    """The asyncpg connection under a SQLAlchemy AsyncSession, inside the session's transaction.

    SQLAlchemy's asyncpg adapter sends BEGIN only with the first statement, so one trivial statement is run first:
    without it the actions here would run outside the session's transaction (and commit on their own). The
    session's commit / rollback then decides, and each action is a SAVEPOINT inside it.
    """
    conn, _ = await raw_connection_probing(session, ())
    return conn


async def raw_connection_probing(
    session: Any, relations: Sequence[str]
) -> tuple[asyncpg.Connection, tuple[bool, ...]]:
    """:func:`raw_connection` whose first statement (the one that starts the session's transaction) also tells
    which of ``relations`` (qualified, quoted names) exist, as ``to_regclass`` would: one round trip for both."""
    connection = await session.connection()
    if relations:
        checks = ", ".join(f"to_regclass(${i}) IS NOT NULL" for i in range(1, len(relations) + 1))
        row = (await connection.exec_driver_sql(f"SELECT {checks}", tuple(relations))).one()
        found = tuple(bool(value) for value in row)
    else:
        await connection.exec_driver_sql("SELECT 1")
        found = ()
    raw = await connection.get_raw_connection()
    return raw.driver_connection, found


# --------------------------------------------------------------------------------------------------------------------
# Schema


def schema_for(org_id: Any) -> str:
    """``org_data_<org id lower-cased with everything but a-z and 0-9 removed>``."""
    text = org_id if isinstance(org_id, str) else ("" if org_id is None else str(org_id))
    cleaned = re.sub(r"[^a-z0-9]", "", text.lower())
    if not cleaned:
        raise StoreError(
            f"no organisation id (got {org_id!r}); the datatable skill needs runtime_context org_id to pick the "
            "organisation's schema — run it from an organisation's conversation or configure org_id",
            error_type="config",
            non_retriable=True,
        )
    schema = "org_data_" + cleaned
    if len(schema) > _MAX_SCHEMA_BYTES:
        raise StoreError(
            f"the organisation id {org_id!r} is too long for a schema name ({len(schema)} > {_MAX_SCHEMA_BYTES} "
            "characters); use an organisation id of at most 54 letters and digits",
            error_type="config",
            non_retriable=True,
        )
    return schema


def _check_schema(schema: str) -> str:
    if not isinstance(schema, str) or not _SCHEMA_RE.fullmatch(schema):
        raise StoreError(
            f"schema must look like org_data_<lower-case letters and digits>, got {schema!r}; build it with "
            "schema_for(org_id)",
            error_type="config",
            non_retriable=True,
        )
    return schema


def _meta(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


async def _lock(conn: asyncpg.Connection, schema: str) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_CLASS, schema)


async def _has_metadata(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _meta(schema, "_dt_fields")))


async def ensure_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Create the org schema and its metadata tables when missing; idempotent and safe under concurrency."""
    _check_schema(schema)
    if await _has_metadata(conn, schema):
        return
    tables, fields = _meta(schema, "_dt_tables"), _meta(schema, "_dt_fields")
    async with conn.transaction():
        await _lock(conn, schema)  # concurrent CREATE SCHEMA IF NOT EXISTS can still collide; serialise
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {tables} (
                id uuid PRIMARY KEY,
                title text NOT NULL UNIQUE,
                created_at timestamptz NOT NULL DEFAULT now()
            )"""
        )
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {fields} (
                id uuid PRIMARY KEY,
                table_id uuid NOT NULL REFERENCES {tables} (id) ON DELETE CASCADE,
                title text NOT NULL,
                uidt text NOT NULL,
                required boolean NOT NULL DEFAULT false,
                "unique" boolean NOT NULL DEFAULT false,
                options text[] NOT NULL DEFAULT '{{}}',
                "precision" integer,
                scale integer,
                position integer NOT NULL,
                UNIQUE (table_id, title)
            )"""
        )


# --------------------------------------------------------------------------------------------------------------------
# Tables


def _table_title(name: Any) -> str:
    try:
        title = check_identifier(name, "table")
    except FieldError as exc:
        raise StoreError(str(exc), need_param="table_name") from None
    if title.lower().startswith(_META_PREFIX):
        raise StoreError(
            f"table names starting with {_META_PREFIX} are reserved for the skill's metadata; choose another name",
            need_param="table_name",
        )
    return title


def _parse_fields(fields: Any) -> list[FieldDef]:
    if not isinstance(fields, Sequence) or isinstance(fields, str | bytes):
        raise StoreError(
            'fields must be a list of field definitions like [{"title": "姓名", "uidt": "文本"}]', need_param="fields"
        )
    if not fields:
        raise StoreError('fields is empty; give at least one field, e.g. {"title": "姓名", "uidt": "文本"}')
    if len(fields) > MAX_FIELDS:
        raise StoreError(f"{len(fields)} fields given; a table has at most {MAX_FIELDS}", need_param="fields")
    parsed: list[FieldDef] = []
    errors: list[str] = []
    for index, spec in enumerate(fields):
        try:
            parsed.append(parse_field(spec))
        except FieldError as exc:
            errors.append(f"fields[{index}]: {exc}")
    seen: set[str] = set()
    for field in parsed:
        if field.title in seen:
            errors.append(f"field {field.title!r} is defined twice; give each field once")
        seen.add(field.title)
    if errors:
        raise StoreError("; ".join(errors), need_param="fields")
    return parsed


def _unique_name(field_id: uuid.UUID) -> str:
    return f"_dt_uq_{field_id.hex}"


def _column_sql(field: FieldDef) -> str:
    return f"{quote_ident(field.title)} {field.pg_type()}"


async def _insert_field_meta(
    conn: asyncpg.Connection, schema: str, table_id: str, field_id: uuid.UUID, field: FieldDef, position: int
) -> None:
    await conn.execute(
        f"""INSERT INTO {_meta(schema, "_dt_fields")}
            (id, table_id, title, uidt, required, "unique", options, "precision", scale, position)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)""",
        field_id,
        uuid.UUID(table_id),
        field.title,
        field.uidt,
        field.required,
        field.unique,
        list(field.options),
        field.precision,
        field.scale,
        position,
    )


async def create_table(conn: asyncpg.Connection, schema: str, title: Any, fields: Any) -> dict[str, Any]:
    """Create a table; ``{id, title}``, or the existing table with ``already_exists: True`` when the title is taken."""
    _check_schema(schema)
    title = _table_title(title)
    parsed = _parse_fields(fields)
    await ensure_schema(conn, schema)
    async with conn.transaction():
        await _lock(conn, schema)
        existing = await conn.fetchval(f"SELECT id FROM {_meta(schema, '_dt_tables')} WHERE title = $1", title)
        if existing is not None:
            return {"id": str(existing), "title": title, "already_exists": True}
        if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", _meta(schema, title)):
            raise StoreError(
                f"a table {title!r} exists in the database but is not registered with the datatable skill (made "
                "outside it); choose another table name",
                need_param="table_name",
            )
        table_id = str(uuid.uuid4())
        field_ids = [uuid.uuid4() for _ in parsed]
        columns = [
            "id bigserial PRIMARY KEY",
            "created_at timestamptz NOT NULL DEFAULT now()",
            *(_column_sql(f) for f in parsed),
            *(
                f"CONSTRAINT {quote_ident(_unique_name(fid))} UNIQUE ({quote_ident(f.title)})"
                for fid, f in zip(field_ids, parsed, strict=True)
                if f.unique
            ),
        ]
        await conn.execute(f"CREATE TABLE {_meta(schema, title)} ({', '.join(columns)})")
        await conn.execute(
            f"INSERT INTO {_meta(schema, '_dt_tables')} (id, title) VALUES ($1, $2)", uuid.UUID(table_id), title
        )
        for position, (fid, field) in enumerate(zip(field_ids, parsed, strict=True), start=1):
            await _insert_field_meta(conn, schema, table_id, fid, field, position)
    return {"id": table_id, "title": title}


async def list_tables(conn: asyncpg.Connection, schema: str) -> list[dict[str, Any]]:
    """``[{id, title, schema, qualified}]`` in creation order (empty when the org has no tables yet)."""
    _check_schema(schema)
    if not await _has_metadata(conn, schema):
        return []
    rows = await conn.fetch(f"SELECT id, title FROM {_meta(schema, '_dt_tables')} ORDER BY created_at, title")
    return [TableInfo(str(r["id"]), r["title"], schema).as_dict() for r in rows]


def _as_uuid(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


async def resolve_table(
    conn: asyncpg.Connection, schema: str, table_id: Any = None, table_name: Any = None
) -> TableInfo:
    """The table by UUID (``table_id``) or exact title (``table_name``, or a ``table_id`` that is not a UUID)."""
    _check_schema(schema)
    has_meta = await _has_metadata(conn, schema)
    wanted = table_id if table_id not in (None, "") else table_name
    if wanted not in (None, "") and has_meta:
        key = _as_uuid(wanted)
        if key is not None:
            row = await conn.fetchrow(f"SELECT id, title FROM {_meta(schema, '_dt_tables')} WHERE id = $1", key)
        elif isinstance(wanted, str):
            row = await conn.fetchrow(
                f"SELECT id, title FROM {_meta(schema, '_dt_tables')} WHERE title = $1", wanted.strip()
            )
        else:
            row = None
        if row is not None:
            return TableInfo(str(row["id"]), row["title"], schema)
    titles = (
        [r["title"] for r in await conn.fetch(f"SELECT title FROM {_meta(schema, '_dt_tables')} ORDER BY created_at")]
        if has_meta
        else []
    )
    available = "; tables are: " + ", ".join(titles) if titles else "; this organisation has no tables yet"
    if wanted in (None, ""):
        raise StoreError(
            "table_id is required (the table's UUID from list_tables, or its exact title)" + available,
            need_param="table_id",
        )
    raise StoreError(
        f"no table {wanted!r}{available}; pass table_id from list_tables or the exact title", need_param="table_id"
    )


async def _field_rows(conn: asyncpg.Connection, schema: str, table_id: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"""SELECT id, title, uidt, required, "unique", options, "precision", scale, position
            FROM {_meta(schema, "_dt_fields")} WHERE table_id = $1 ORDER BY position, title""",
        uuid.UUID(table_id),
    )


def _field_def(row: Mapping[str, Any]) -> FieldDef:
    return FieldDef(
        title=row["title"],
        uidt=row["uidt"],
        required=row["required"],
        unique=row["unique"],
        options=tuple(row["options"] or ()),
        precision=row["precision"],
        scale=row["scale"],
    )


async def load_fields(conn: asyncpg.Connection, schema: str, table_id: str) -> list[FieldDef]:
    """The table's business fields in position order, from the metadata tables."""
    _check_schema(schema)
    return [_field_def(r) for r in await _field_rows(conn, schema, table_id)]


async def list_columns(conn: asyncpg.Connection, schema: str, table_id: str) -> list[dict[str, Any]]:
    """``[{title, uidt, required, unique, options, precision, scale}]`` in position order (metadata, not catalog)."""
    return [f.as_dict() for f in await load_fields(conn, schema, table_id)]


async def delete_table(conn: asyncpg.Connection, schema: str, table_id: Any) -> bool:
    """Drop the table and its metadata. Refused while views or other objects depend on it."""
    table = await resolve_table(conn, schema, table_id)
    async with conn.transaction():
        await _lock(conn, schema)
        try:
            async with conn.transaction():
                await conn.execute(f"DROP TABLE IF EXISTS {table.qualified}")
        except asyncpg.DependentObjectsStillExistError as exc:
            raise StoreError(
                f"table {table.title!r} is used by other objects ({exc.detail or exc}); drop those views first",
                need_param="table_id",
            ) from None
        await conn.execute(f"DELETE FROM {_meta(schema, '_dt_tables')} WHERE id = $1", uuid.UUID(table.id))
    return True


# --------------------------------------------------------------------------------------------------------------------
# Fields


def _one_field(spec: Any, param: str = "field") -> FieldDef:
    try:
        return parse_field(spec)
    except FieldError as exc:
        raise StoreError(str(exc), need_param=param) from None


def _find(rows: Sequence[asyncpg.Record], title: Any) -> asyncpg.Record:
    wanted = title.strip() if isinstance(title, str) else title
    for row in rows:
        if row["title"] == wanted:
            return row
    names = ", ".join(r["title"] for r in rows) or "(none)"
    raise StoreError(f"no field {title!r} in this table; fields are: {names}", need_param="field_title")


async def add_field(conn: asyncpg.Connection, schema: str, table_id: Any, field: Any) -> dict[str, Any]:
    """Add a business field at the end; returns its definition."""
    table = await resolve_table(conn, schema, table_id)
    new = _one_field(field)
    async with conn.transaction():
        await _lock(conn, schema)
        rows = await _field_rows(conn, schema, table.id)
        if any(r["title"] == new.title for r in rows):
            raise StoreError(f"table {table.title!r} already has a field {new.title!r}; choose another name")
        if len(rows) >= MAX_FIELDS:
            raise StoreError(f"table {table.title!r} already has {len(rows)} fields; at most {MAX_FIELDS} are allowed")
        field_id = uuid.uuid4()
        await conn.execute(f"ALTER TABLE {table.qualified} ADD COLUMN {_column_sql(new)}")
        if new.unique:
            await conn.execute(
                f"ALTER TABLE {table.qualified} ADD CONSTRAINT {quote_ident(_unique_name(field_id))} "
                f"UNIQUE ({quote_ident(new.title)})"
            )
        position = max((r["position"] for r in rows), default=0) + 1
        await _insert_field_meta(conn, schema, table.id, field_id, new, position)
    return new.as_dict()


async def delete_field(conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any) -> dict[str, Any]:
    """Drop a business field (its data too); ``{deleted: True, field}``."""
    table = await resolve_table(conn, schema, table_id)
    async with conn.transaction():
        await _lock(conn, schema)
        row = _find(await _field_rows(conn, schema, table.id), field_title)
        try:
            async with conn.transaction():
                await conn.execute(f"ALTER TABLE {table.qualified} DROP COLUMN IF EXISTS {quote_ident(row['title'])}")
        except asyncpg.DependentObjectsStillExistError as exc:
            raise StoreError(
                f"field {row['title']!r} is used by other objects ({exc.detail or exc}); drop those views first",
                need_param="field_title",
            ) from None
        await conn.execute(f"DELETE FROM {_meta(schema, '_dt_fields')} WHERE id = $1", row["id"])
    return {"deleted": True, "field": row["title"]}


_PATCH_KEYS = frozenset({"title", "name", "uidt", "type", "required", "unique", "options", "precision", "scale"})


def _canonical(type_name: Any) -> str | None:
    if not isinstance(type_name, str):
        return None
    key = type_name.strip()
    return TYPES.get(key) or TYPES.get(key.lower().replace("-", "_").replace(" ", "_"))


def _patched(old: FieldDef, patch: Mapping[str, Any]) -> FieldDef:
    spec = old.as_dict()
    if "uidt" in patch or "type" in patch:
        new_type = patch.get("uidt", patch.get("type"))
        spec.pop("precision")
        spec.pop("scale")
        if _canonical(new_type) not in _SELECT_TYPES or old.uidt not in _SELECT_TYPES:
            spec.pop("options")
        spec.pop("uidt")
    for key, value in patch.items():
        spec[{"name": "title", "type": "uidt"}.get(key, key)] = value
    return _one_field(spec, "patch")


def _text_of(column: str, uidt: str) -> str:
    """SQL for the text form of a column's value (the start of every conversion)."""
    if uidt == "多选":
        return f"array_to_string({column}, ',')"
    if uidt == "数字":
        return f"trim_scale({column})::text"
    return f"{column}::text"


async def _convert_column(conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef) -> None:
    """Check and apply a type / option change of one column (under the old name)."""
    column = quote_ident(old.title)
    old_type, new_type = old.pg_type(), new.pg_type()
    text = _text_of(column, old.uidt)
    if new_type == "text[]":
        converted = (
            column
            if old_type == "text[]"
            else f"CASE WHEN btrim({text}) = '' THEN NULL "
            f"ELSE regexp_split_to_array(btrim({text}), '{_MULTI_SPLIT}') END"
        )
    elif new_type == "text":
        converted = text
    else:
        converted = f"CAST(NULLIF(btrim({text}), '') AS {new_type})"

    checks: list[str] = []
    params: list[Any] = []
    modern = conn.get_server_version().major >= 16
    if modern and old_type != new_type and new_type not in ("text", "text[]"):
        params.append(new_type)
        checks.append(f"(btrim({text}) = '' OR pg_input_is_valid(btrim({text}), ${len(params)}))")
    if modern and new.uidt == "JSON" and old.uidt != "JSON":
        checks.append(f"(btrim({text}) = '' OR pg_input_is_valid({text}, 'json'))")
    if new.uidt == "单选" and (old.uidt != "单选" or not set(old.options) <= set(new.options)):
        params.append(list(new.options))
        checks.append(f"({text} = '' OR {text} = ANY(${len(params)}::text[]))")
    if new.uidt == "多选" and (old.uidt != "多选" or not set(old.options) <= set(new.options)):
        params.append(list(new.options))
        checks.append(f"COALESCE({converted} <@ ${len(params)}::text[], true)")
    if checks:
        row = await conn.fetchrow(
            f"""SELECT count(*) AS bad, (array_agg(id ORDER BY id))[1:5] AS sample
                FROM {table.qualified} WHERE {column} IS NOT NULL AND NOT ({" AND ".join(checks)})""",
            *params,
        )
        if row["bad"]:
            allowed = f" (allowed options: {', '.join(new.options)})" if new.uidt in _SELECT_TYPES else ""
            raise StoreError(
                f"cannot change field {old.title!r} to {new.uidt}{allowed}: {row['bad']} row(s) hold values that "
                f"do not fit (row ids {', '.join(map(str, row['sample']))}{', …' if row['bad'] > 5 else ''}); "
                "fix or clear those values first, or add the missing options",
                need_param="patch",
            )
    if old_type != new_type:
        try:
            async with conn.transaction():
                await conn.execute(
                    f"ALTER TABLE {table.qualified} ALTER COLUMN {column} TYPE {new_type} USING {converted}"
                )
        except asyncpg.PostgresError as exc:
            state = exc.sqlstate or ""
            if not (state.startswith(("22", "23")) or state == "42804"):
                raise
            raise StoreError(
                f"cannot change field {old.title!r} to {new.uidt}: existing values do not convert ({exc}); "
                "fix or clear those values first",
                need_param="patch",
            ) from None


async def update_field(
    conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any, patch: Any
) -> dict[str, Any]:
    """Change a field: rename (title), uidt, required, unique, options, precision, scale; returns the new definition.

    A change the existing data cannot take (type, options, unique with duplicates) is refused with the number of rows
    in the way and leaves the table unchanged.
    """
    if not isinstance(patch, Mapping) or not patch:
        raise StoreError(
            'patch must be an object with the changes, e.g. {"title": "新名"} or {"uidt": "整数"}', need_param="patch"
        )
    unknown = sorted(str(k) for k in patch if k not in _PATCH_KEYS)
    if unknown:
        raise StoreError(
            f"unknown key(s) {', '.join(unknown)} in patch; use title, uidt, required, unique, options, precision, "
            "scale",
            need_param="patch",
        )
    table = await resolve_table(conn, schema, table_id)
    async with conn.transaction():
        await _lock(conn, schema)
        rows = await _field_rows(conn, schema, table.id)
        row = _find(rows, field_title)
        old = _field_def(row)
        new = _patched(old, patch)
        if new.title != old.title and any(r["title"] == new.title for r in rows):
            raise StoreError(f"table {table.title!r} already has a field {new.title!r}; choose another name")
        column = quote_ident(old.title)
        if (new.uidt, new.pg_type(), new.options) != (old.uidt, old.pg_type(), old.options):
            await _convert_column(conn, table, old, new)
        if new.unique != old.unique:
            if new.unique:
                dupes = await conn.fetchval(
                    f"""SELECT count(*) FROM (SELECT 1 FROM {table.qualified} WHERE {column} IS NOT NULL
                        GROUP BY {column} HAVING count(*) > 1) d"""
                )
                if dupes:
                    raise StoreError(
                        f"cannot make field {old.title!r} unique: {dupes} value(s) appear in more than one row; "
                        "remove the duplicates first",
                        need_param="patch",
                    )
                await conn.execute(
                    f"ALTER TABLE {table.qualified} ADD CONSTRAINT {quote_ident(_unique_name(row['id']))} "
                    f"UNIQUE ({column})"
                )
            else:
                names = await conn.fetch(
                    """SELECT c.conname FROM pg_constraint c
                       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attname = $2
                       WHERE c.conrelid = $1::regclass AND c.contype = 'u' AND c.conkey = ARRAY[a.attnum]""",
                    table.qualified,
                    old.title,
                )
                for name in names:
                    await conn.execute(f"ALTER TABLE {table.qualified} DROP CONSTRAINT {quote_ident(name['conname'])}")
        if new.title != old.title:
            await conn.execute(f"ALTER TABLE {table.qualified} RENAME COLUMN {column} TO {quote_ident(new.title)}")
        await conn.execute(
            f"""UPDATE {_meta(schema, "_dt_fields")} SET title = $2, uidt = $3, required = $4, "unique" = $5,
                options = $6, "precision" = $7, scale = $8 WHERE id = $1""",
            row["id"],
            new.title,
            new.uidt,
            new.required,
            new.unique,
            list(new.options),
            new.precision,
            new.scale,
        )
    return new.as_dict()


async def changes_type(conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any, patch: Any) -> bool:
    """Whether an update_field ``patch`` changes the field's type (a destructive change that needs 确认=true).

    A patch that cannot be read is left to :func:`update_field`, which explains what is wrong with it.
    """
    if not isinstance(patch, Mapping) or not ("uidt" in patch or "type" in patch):
        return False
    table = await resolve_table(conn, schema, table_id)
    old = _field_def(_find(await _field_rows(conn, schema, table.id), field_title))
    try:
        new = _patched(old, patch)
    except StoreError:
        return False
    return (new.uidt, new.pg_type()) != (old.uidt, old.pg_type())


#: PostgreSQL column types (format_type without modifiers) → logical types, for tables made on the SQL channel.
_SQL_TYPES = {
    "text": "文本",
    "character varying": "文本",
    "character": "文本",
    "smallint": "整数",
    "integer": "整数",
    "bigint": "整数",
    "numeric": "数字",
    "real": "数字",
    "double precision": "数字",
    "date": "日期",
    "timestamp with time zone": "日期时间",
    "timestamp without time zone": "日期时间",
    "time without time zone": "时间",
    "boolean": "勾选",
    "text[]": "多选",
}
#: precision/scale registered for numeric columns declared without them (and real / double precision).
UNCONSTRAINED_NUMERIC: tuple[int, int] = (38, 10)


async def register_sql_table(conn: asyncpg.Connection, schema: str, title: str) -> dict[str, Any]:
    """Register a table just made by CREATE TABLE on the SQL channel in the metadata; ``{id, title, fields}``.

    The SQL is the only description of such a table, so its columns' declared types are read once here (from
    pg_attribute, right after the statement) and mapped onto logical types: text types → 文本, integer types → 整数,
    numeric(p,s) → 数字 with that precision (numeric without one, real and double precision → 数字
    :data:`UNCONSTRAINED_NUMERIC`), date/timestamp/time, boolean → 勾选, text[] → 多选; anything else → 文本 (its
    values are then checked by PostgreSQL on write). UNIQUE constraints on one column are recorded as ``unique``.
    Afterwards the metadata is the table's description like for any other table.
    """
    _check_schema(schema)
    qualified = _meta(schema, title)
    columns = await conn.fetch(
        """SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type, a.atttypmod AS typmod,
                  EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conrelid = a.attrelid AND c.contype = 'u'
                          AND c.conkey = ARRAY[a.attnum]) AS is_unique
           FROM pg_attribute a
           WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
             AND a.attname NOT IN ('id', 'created_at')
           ORDER BY a.attnum""",
        qualified,
    )
    fields: list[FieldDef] = []
    for column in columns:
        uidt = _SQL_TYPES.get(column["type"], "文本")
        precision = scale = None
        if uidt == "数字":
            typmod = column["typmod"]
            if column["type"] == "numeric" and typmod >= 4:  # numeric's typmod: ((precision << 16) | scale) + 4
                precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
            else:
                precision, scale = UNCONSTRAINED_NUMERIC
        fields.append(FieldDef(column["name"], uidt, unique=column["is_unique"], precision=precision, scale=scale))
    await ensure_schema(conn, schema)
    async with conn.transaction():
        await _lock(conn, schema)
        table_id = str(uuid.uuid4())
        await conn.execute(
            f"INSERT INTO {_meta(schema, '_dt_tables')} (id, title) VALUES ($1, $2)", uuid.UUID(table_id), title
        )
        for position, field in enumerate(fields, start=1):
            await _insert_field_meta(conn, schema, table_id, uuid.uuid4(), field, position)
    return {"id": table_id, "title": title, "fields": [f.as_dict() for f in fields]}
