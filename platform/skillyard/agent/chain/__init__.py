"""The tool-call chain of business tools (contract spec §13): one small module per stage.

* :func:`call_tool` — the entry point (catalog → arg policy → binding → param contract → fingerprint → write gate
  → the call → response contract → evidence → fingerprint count);
* :func:`build_summary` — the "标签：值" summary of a write (§14.1), also used by builtin_node_approval;
* :func:`idempotency_key` — §14.2;
* :func:`verify_write` — settles an uncertain write with its verify tool (§14.3, §6.4) or by polling its task;
* :func:`can_verify` — whether the runtime settles an uncertain write itself (else a VERIFY checkpoint asks);
* :func:`preview_binding` — re-binds a gated write before its CONFIRM runs.
"""

from __future__ import annotations

from .call import call_tool
from .summary import build_summary
from .verify import can_verify, preview_binding, verify_write
from .write_gate import idempotency_key

__all__ = ["build_summary", "call_tool", "can_verify", "idempotency_key", "preview_binding", "verify_write"]
