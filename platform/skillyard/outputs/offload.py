"""Offloading large results (§6.4): a successful result over 12,000 characters of JSON goes to a workspace
file and the caller gets a receipt that keeps the fields that matter."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..envelope import add_warning
from .safe_write import safe_write

if TYPE_CHECKING:
    from ..invoke.run import Run

log = masked_logger("skillyard.offload")
OFFLOAD_LIMIT = 12_000
#: Fields the receipt keeps untouched (§6.4), plus the outcome flags.
KEPT = (
    "filename",
    "local_path",
    "download_url",
    "abs_url",
    "media",
    "ref",  # a top-level artifact's reference (§6.3): the model can name the file without a lookup
    "ok",
    "success",
    "images",
    "videos",
    "files",
    "audios",
    "display_md",
    "display_only",  # without it an offloaded exclusive block would be merged as a plain one (§6.2)
)
OFFLOAD_DIR = "offload"
SAMPLE_LIMIT = 2_000


def _sample(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False)
    return value if len(text) <= SAMPLE_LIMIT else text[:SAMPLE_LIMIT] + "…"


def _arrays(envelope: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each list of the result with its count and first item: the top-level ones by name, and those one object
    down by dotted path (``data.rows`` of §6.1's ``{"success": true, "data": {...}}``)."""
    candidates: list[tuple[str, Any]] = []
    for key, value in envelope.items():
        if key not in KEPT:
            candidates.append((key, value))
            if isinstance(value, dict):
                candidates.extend((f"{key}.{inner}", item) for inner, item in value.items())
    return {
        path: {"count": len(items), "sample": _sample(items[0]) if items else None}
        for path, items in candidates
        if isinstance(items, list)
    }


def receipt_for(envelope: dict[str, Any], offload_file: Path) -> dict[str, Any]:
    """The receipt that replaces an offloaded result."""
    receipt = {k: envelope[k] for k in KEPT if k in envelope}
    receipt.update(
        offloaded=True,
        offload_file=str(offload_file),
        fields=list(envelope),
        arrays=_arrays(envelope),
        note=f"The full result is in {offload_file.name}; read that file for the rest.",
    )
    return receipt


async def offload_large_result(envelope: dict[str, Any], run: Run) -> dict[str, Any]:
    """Replace a large successful result by a receipt; skills that page their own output opt out (offload: false)."""
    if not envelope.get("ok") or not run.skill.offload or not run.policy.offload:
        return envelope
    text = json.dumps(envelope, ensure_ascii=False)
    if len(text) <= OFFLOAD_LIMIT:
        return envelope
    name = f"{OFFLOAD_DIR}/{run.skill.name.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    try:
        path = safe_write(Path(run.context["workspace_dir"]), name, text)
    except (OSError, ValueError) as exc:  # e.g. a file (or a symlink out) named "offload" in the workspace
        log.warning("could not offload the result of %r: %s", run.skill.name, exc)
        add_warning(envelope, f"the result is large but could not be offloaded to {OFFLOAD_DIR}/ ({exc})")
        return envelope
    return receipt_for(envelope, path)
