"""Fixtures of the channel tests: the shared ``host`` (support/channels/host.py)."""

from __future__ import annotations

from support.channels.host import host

__all__ = ["host"]
