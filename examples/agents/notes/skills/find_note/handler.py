"""find_note: the notes with an exact title (``found`` is false when there is none)."""

import json
from pathlib import Path


async def execute(input_data, runtime_context):
    path = Path(runtime_context["workspace_dir"]) / "notes" / "notes.json"
    notes = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    hits = [n for n in notes if n["title"] == input_data["title"]]
    return {"found": bool(hits), "notes": hits}
