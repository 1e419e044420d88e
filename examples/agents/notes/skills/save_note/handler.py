"""save_note: append a note to notes/notes.json in the session workspace (a subfolder: not a user artifact)."""

import json
from pathlib import Path


def notes_file(ctx):
    folder = Path(ctx["workspace_dir"]) / "notes"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "notes.json"


async def execute(input_data, runtime_context):
    path = notes_file(runtime_context)
    notes = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    note = {"title": input_data["title"], "text": input_data["text"], "owner": input_data.get("owner", "")}
    notes.append(note)
    path.write_text(json.dumps(notes, ensure_ascii=False, indent=1), encoding="utf-8")
    return {"saved": True, "note": note}
