"""The chain engine's settings from the environment: retention, and the worker heartbeat and stall thresholds.

A worker is taken for dead when its heartbeat is older than ``stall_after_s``; that must be several heartbeats,
or a live worker busy with a step would be taken for dead and its running step run a second time.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SkillyardError
from ..settings import float_env

#: A stall threshold below this many heartbeats would let a late heartbeat retry a running job.
MIN_HEARTBEATS_PER_STALL = 4


@dataclass(frozen=True)
class ChainSettings:
    retention_days: float = 30.0
    heartbeat_s: float = 2.0
    stall_after_s: float = 10.0

    @classmethod
    def from_env(cls) -> ChainSettings:
        settings = cls(
            retention_days=float_env("SKILLYARD_CHAIN_RETENTION_DAYS", 30.0),
            heartbeat_s=float_env("SKILLYARD_WORKER_HEARTBEAT_S", 2.0),
            stall_after_s=float_env("SKILLYARD_WORKER_STALL_S", 10.0),
        )
        if settings.stall_after_s < MIN_HEARTBEATS_PER_STALL * settings.heartbeat_s:
            raise SkillyardError(
                f"SKILLYARD_WORKER_STALL_S={settings.stall_after_s:g} must be at least {MIN_HEARTBEATS_PER_STALL} "
                f"heartbeats (SKILLYARD_WORKER_HEARTBEAT_S={settings.heartbeat_s:g}), or a busy worker is taken "
                f"for dead and its step runs twice; e.g. SKILLYARD_WORKER_STALL_S="
                f"{MIN_HEARTBEATS_PER_STALL * settings.heartbeat_s:g}"
            )
        return settings
