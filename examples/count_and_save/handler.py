"""count_and_save: the storing half of a two-skill pair; the counting half is the CLI skill word_count."""

from sqlalchemy import text


async def execute(input_data, runtime_context):
    counted = await runtime_context["call_skill"]("word_count", {"text": input_data["text"]})
    if not counted["ok"]:  # call_skill never raises: a failure comes back as an envelope
        return {"ok": False, "error": f"word_count failed: {counted['error']}", "error_type": "transient"}

    db = runtime_context["db"]
    await db.execute(
        text(
            "CREATE TABLE IF NOT EXISTS public.word_counts ("
            " id BIGSERIAL PRIMARY KEY, words INTEGER NOT NULL, lines INTEGER NOT NULL, chars INTEGER NOT NULL,"
            " created_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
    )
    row_id = (
        await db.execute(
            text("INSERT INTO public.word_counts (words, lines, chars) VALUES (:words, :lines, :chars) RETURNING id"),
            {k: counted[k] for k in ("words", "lines", "chars")},
        )
    ).scalar_one()
    await db.commit()
    return {"ok": True, "id": row_id, "words": counted["words"], "lines": counted["lines"], "chars": counted["chars"]}
