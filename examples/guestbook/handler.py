"""guestbook: write one entry with the run's database session and report the latest entries."""

import datetime as dt

from sqlalchemy import text

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS public.guestbook (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL,
    message    TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""


def _cell(value: str) -> str:
    """Make a value safe inside a markdown table cell."""
    return value.replace("|", "\\|").replace("\n", " ")


async def execute(input_data, runtime_context):
    db = runtime_context["db"]  # a live AsyncSession; only in-process async handlers get one
    await db.execute(text(CREATE_TABLE))
    await db.execute(
        text("INSERT INTO public.guestbook (name, message, created_at) VALUES (:name, :message, now())"),
        {"name": input_data["name"].strip(), "message": input_data["message"].strip()},
    )
    await db.commit()

    entries = (await db.execute(text("SELECT count(*) FROM public.guestbook"))).scalar_one()
    rows = (
        await db.execute(text("SELECT name, message, created_at FROM public.guestbook ORDER BY id DESC LIMIT 3"))
    ).all()

    latest = []
    table = ["| name | message | signed (UTC) |", "|---|---|---|"]
    for name, message, created_at in rows:
        utc = created_at.astimezone(dt.UTC)
        latest.append({"name": name, "message": message, "created_at": utc.isoformat()})
        table.append(f"| {_cell(name)} | {_cell(message)} | {utc:%Y-%m-%d %H:%M} |")
    return {
        "ok": True,
        "entries": entries,
        "latest": latest,
        "display_md": f"**Guestbook: {entries} entries**\n\n" + "\n".join(table),
    }
