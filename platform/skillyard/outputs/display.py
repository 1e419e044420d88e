"""Display blocks (§6.2): ``display_md`` / ``display_only`` merged per turn, rendered only on rich channels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..catalog.requires import as_bool

#: Channels with a front end that renders markdown blocks; text channels fall back to the model's words.
RICH_CHANNELS = frozenset({"web", "web_admin"})


class DisplayBlock(NamedTuple):
    """What to show for a turn: the merged markdown, and whether it replaces the model's own text
    (``markdown, replaces = turn.display_md()`` works too)."""

    markdown: str
    replaces_text: bool


@dataclass
class DisplayMerge:
    """The display blocks of one turn, in order.

    A plain block is appended after the model's text. The first exclusive block (``display_only: true``)
    clears the plain blocks before it and replaces the model's text; after that only exclusive blocks are
    kept, so the exclusive answer is never diluted by later supplements.
    """

    blocks: list[str] = field(default_factory=list)
    exclusive: bool = False

    def add(self, envelope: Mapping[str, Any]) -> None:
        markdown = envelope.get("display_md")
        if not isinstance(markdown, str) or not markdown.strip():
            return
        only = as_bool(envelope.get("display_only", False))
        if only and not self.exclusive:
            self.blocks.clear()
            self.exclusive = True
        if only or not self.exclusive:
            self.blocks.append(markdown)

    def render(self, channel: str) -> DisplayBlock:
        """The merged block for a channel; text channels get nothing (the model restates the results)."""
        if channel not in RICH_CHANNELS or not self.blocks:
            return DisplayBlock("", False)
        return DisplayBlock("\n\n".join(self.blocks), self.exclusive)
