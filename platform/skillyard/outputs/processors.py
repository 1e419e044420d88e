"""Default plugin: the result post-processing chain, in order — materialize URLs → register artifacts →
collect stray workspace files → offload large results. Third-party processors slot in between by order.

The processors' modules (storage, the HTTP stack) load when the chain is registered, that is when a host is
made, not when the CLI imports the plugins to list commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ..invoke.run import Run

MATERIALIZE, REGISTER, COLLECT, OFFLOAD = 100, 200, 300, 400


async def materialize_remote_urls(envelope: dict[str, Any], run: Run) -> dict[str, Any]:
    """Download the remote files a result points to into the session workspace (§6.3 step 1).

    Skills whose results are data that merely contain links (records with a URL column) opt out with frontmatter
    ``materialize: false``."""
    if not run.skill.materialize or not _mentions_url(envelope):
        return envelope
    from .materialize import materialize_urls

    settings = run.yard.settings
    return await materialize_urls(
        envelope,
        Path(run.context["workspace_dir"]),
        allow_private=settings.allow_private_urls,
        max_bytes=settings.max_download_bytes,
    )


def _mentions_url(value: Any) -> bool:
    """Whether any string in a result contains ``://`` (most results have no URL: skip the full walk)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "://" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


@hookimpl
def register_result_processors(register: Any) -> None:
    from .artifacts import collect_artifacts, register_artifacts
    from .offload import offload_large_result

    register(MATERIALIZE, "materialize_urls", materialize_remote_urls)
    register(REGISTER, "register_artifacts", register_artifacts)
    register(COLLECT, "collect_artifacts", collect_artifacts)
    register(OFFLOAD, "offload_large_result", offload_large_result)
