"""Error codes of the agent runtime (contract spec §17) and the finish-gate codes (§10.2)."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every code a tool observation or the finish gate can carry; the value is the wire form."""

    MCP_TOOL_ERROR = "agent_runtime.40003"
    TOOL_BUSINESS_FAILED = "agent_runtime.40004"
    MCP_INVALID_PARAMS = "agent_runtime.40014"
    MCP_RPC_ERROR = "agent_runtime.40015"
    TOOL_TIMEOUT = "agent_runtime.40016"
    TOOL_UNREACHABLE = "agent_runtime.40017"
    TOOL_IO_ERROR = "agent_runtime.40018"
    TOOL_ERROR = "agent_runtime.40029"
    ARG_JSON_INVALID = "agent_runtime.40020"
    ARG_REJECTED = "agent_runtime.40032"
    PARAM_PROVENANCE_FAIL = "agent_runtime.40022"
    PARAM_PROVENANCE_CALL_TOOL = "agent_runtime.40023"
    PARAM_PROVENANCE_ASK_USER = "agent_runtime.40024"
    PARAM_PROVENANCE_REJECTED = "agent_runtime.40025"
    FINGERPRINT_TRIP = "agent_runtime.40026"
    CATALOG_DENIED = "agent_runtime.40027"
    STATE_KEY_RESERVED = "agent_runtime.40028"
    WRITE_PENDING_VERIFY = "agent_runtime.40030"
    WRITE_IN_FLIGHT = "agent_runtime.40031"
    APPROVAL_REQUIRED = "agent_runtime.42221"
    WRITE_CONTRACT_INCOMPLETE = "agent_runtime.42206"
    SOURCE_REJECT = "agent_runtime.42223"
    PLATFORM_FIELD_FORBIDDEN = "agent_runtime.42236"
    OUTPUT_PATH_INVALID = "agent_runtime.42243"
    OUTPUT_WRITE_FORBIDDEN = "agent_runtime.42244"
    APPROVAL_NOT_GATED = "agent_runtime.42245"
    APPROVAL_TOOL_MISMATCH = "agent_runtime.42246"
    FOLLOW_UP_ANSWERED = "agent_runtime.42247"
    FOLLOW_UP_UNGROUNDED = "agent_runtime.42248"
    EVIDENCE_PATH_INVALID = "agent_runtime.42235"
    SKILL_NOT_FOUND = "agent_runtime.40411"
    DELEGATE_FORBIDDEN = "agent_runtime.42237"
    DELEGATE_REPEATED = "agent_runtime.42239"
    PROVIDER_UNAVAILABLE = "agent_runtime.42212"
    #: skillyard's own (not in §17): a pinned task's call the tool's current schema rejects (orchestration P0).
    TOOL_SCHEMA_CHANGED = "agent_runtime.42262"
    # §10.2 finish gates, in the order they are checked
    FINISH_MISSING_OUTPUT = "agent_runtime.42250"
    FINISH_OPEN_EVIDENCE = "agent_runtime.42251"
    FINISH_OUTPUT_MISSING = "agent_runtime.42252"
    FINISH_OUTPUT_SOURCE = "agent_runtime.42253"
    FINISH_NEED_TARGET = "agent_runtime.42254"
    FINISH_NEED_BUSINESS = "agent_runtime.42255"
