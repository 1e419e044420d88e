"""Reading a subprocess skill's stdout (§2.3): whole JSON → last-line JSON → media path line → plain output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..outputs.media import media_type

#: What stdout JSON nested past the depth Python's json reads makes (rather than a RecursionError of the host).
TOO_DEEP = {"ok": False, "error": "the skill printed JSON nested too deeply to read; print flatter JSON"}


def parse_stdout(stdout: str, cwd: str | None) -> Any:
    text = stdout.strip()
    if not text:
        return {"output": ""}
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        return dict(TOO_DEEP)
    last = text.splitlines()[-1].strip()
    try:
        value = json.loads(last)
        if isinstance(value, (dict, list)):
            return value
    except ValueError:
        pass
    except RecursionError:
        return dict(TOO_DEEP)
    candidate = Path(last)
    if not candidate.is_absolute() and cwd:
        candidate = Path(cwd) / candidate
    try:
        is_file = len(last) < 4096 and "\x00" not in last and candidate.is_file()
    except OSError:
        is_file = False
    if is_file:
        path = str(candidate.resolve())
        return {"output": stdout, "local_path": path, "filename": candidate.name, "media": media_type(path)}
    return {"output": stdout}
