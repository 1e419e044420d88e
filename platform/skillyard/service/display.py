"""§6.2 for agent turns on the web channel: the display blocks of the turn's tool results, merged as a skill turn
merges them (a ``display_only`` block replaces the model's text), and the text to show."""

from __future__ import annotations

from typing import Any

from ..outputs.display import DisplayMerge


def turn_display(turn: dict[str, Any], channel: str = "web") -> tuple[str, bool]:
    """(markdown, replaces_text) of a TurnResult dict's observations on ``channel``."""
    merge = DisplayMerge()
    for observation in turn.get("observations") or []:
        content = observation.get("content")
        if isinstance(content, dict):
            merge.add(content)
    block = merge.render(channel)
    return block.markdown, block.replaces_text


def turn_text(turn: dict[str, Any], channel: str = "web") -> str:
    """What the user reads: the reply with the display block appended, or the block alone when it is exclusive."""
    markdown, replaces = turn_display(turn, channel)
    reply = str(turn.get("reply") or "")
    if replaces:
        return markdown
    return "\n\n".join(part for part in (reply, markdown) if part)
