"""The error codes of contract spec §17 and the finish-gate codes of §10.2 (codes.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skillyard.agent import ErrorCode
from support.agent.probes import needs_db

SPEC = Path("/work/shared/spec/skill-contract-spec.md")


# §17 ----------------------------------------------------------------------------------------------------------
SPEC_CODES = {  # §17, copied row by row (name → number)
    "MCP_TOOL_ERROR": "40003",
    "TOOL_BUSINESS_FAILED": "40004",
    "MCP_INVALID_PARAMS": "40014",
    "MCP_RPC_ERROR": "40015",
    "TOOL_TIMEOUT": "40016",
    "TOOL_UNREACHABLE": "40017",
    "TOOL_IO_ERROR": "40018",
    "TOOL_ERROR": "40029",
    "ARG_JSON_INVALID": "40020",
    "ARG_REJECTED": "40032",
    "PARAM_PROVENANCE_FAIL": "40022",
    "PARAM_PROVENANCE_CALL_TOOL": "40023",
    "PARAM_PROVENANCE_ASK_USER": "40024",
    "PARAM_PROVENANCE_REJECTED": "40025",
    "FINGERPRINT_TRIP": "40026",
    "CATALOG_DENIED": "40027",
    "STATE_KEY_RESERVED": "40028",
    "WRITE_PENDING_VERIFY": "40030",
    "WRITE_IN_FLIGHT": "40031",
    "APPROVAL_REQUIRED": "42221",
    "WRITE_CONTRACT_INCOMPLETE": "42206",
    "SOURCE_REJECT": "42223",
    "PLATFORM_FIELD_FORBIDDEN": "42236",
    "OUTPUT_PATH_INVALID": "42243",
    "OUTPUT_WRITE_FORBIDDEN": "42244",
    "APPROVAL_NOT_GATED": "42245",
    "APPROVAL_TOOL_MISMATCH": "42246",
    "FOLLOW_UP_ANSWERED": "42247",
    "FOLLOW_UP_UNGROUNDED": "42248",
    "EVIDENCE_PATH_INVALID": "42235",
    "SKILL_NOT_FOUND": "40411",
    "DELEGATE_FORBIDDEN": "42237",
    "DELEGATE_REPEATED": "42239",
    "PROVIDER_UNAVAILABLE": "42212",
}


FINISH_CODES = {
    "FINISH_MISSING_OUTPUT": "42250",
    "FINISH_OPEN_EVIDENCE": "42251",
    "FINISH_OUTPUT_MISSING": "42252",
    "FINISH_OUTPUT_SOURCE": "42253",
    "FINISH_NEED_TARGET": "42254",
    "FINISH_NEED_BUSINESS": "42255",
}

#: skillyard's own codes beyond §17 (orchestration requirements P0, and agent part 3's table).
OWN_CODES = {
    "TOOL_SCHEMA_CHANGED": "42262",
    "FINISH_PARTIAL_WRITE": "42256",
    "FINISH_INCOMPLETE_LISTING": "42257",
    "CHOICE_INVALID": "42258",
    "EVENT_TIMEOUT": "42259",
    "APPROVAL_EDIT_FORBIDDEN": "42260",
    "APPROVAL_BATCH_UNKNOWN_CALL": "42261",
    "TARGET_UNRESOLVED": "42263",
}


@needs_db
def test_the_codes_are_the_spec_codes() -> None:
    expected = {
        "ARG_JSON_INVALID": "40020",
        "ARG_REJECTED": "40032",
        "PARAM_PROVENANCE_FAIL": "40022",
        "PARAM_PROVENANCE_CALL_TOOL": "40023",
        "PARAM_PROVENANCE_ASK_USER": "40024",
        "PARAM_PROVENANCE_REJECTED": "40025",
        "FINGERPRINT_TRIP": "40026",
        "CATALOG_DENIED": "40027",
        "STATE_KEY_RESERVED": "40028",
        "WRITE_PENDING_VERIFY": "40030",
        "WRITE_IN_FLIGHT": "40031",
        "APPROVAL_REQUIRED": "42221",
        "WRITE_CONTRACT_INCOMPLETE": "42206",
        "SOURCE_REJECT": "42223",
        "PLATFORM_FIELD_FORBIDDEN": "42236",
        "OUTPUT_PATH_INVALID": "42243",
        "OUTPUT_WRITE_FORBIDDEN": "42244",
        "APPROVAL_NOT_GATED": "42245",
        "APPROVAL_TOOL_MISMATCH": "42246",
        "FOLLOW_UP_ANSWERED": "42247",
        "FOLLOW_UP_UNGROUNDED": "42248",
        "EVIDENCE_PATH_INVALID": "42235",
        "DELEGATE_FORBIDDEN": "42237",
        "TOOL_BUSINESS_FAILED": "40004",
        "TOOL_TIMEOUT": "40016",
        "TOOL_UNREACHABLE": "40017",
        "TOOL_IO_ERROR": "40018",
        "TOOL_ERROR": "40029",
        "MCP_INVALID_PARAMS": "40014",
    }
    assert {name: ErrorCode[name].value for name in expected} == {k: f"agent_runtime.{v}" for k, v in expected.items()}


def test_every_spec_error_code_is_defined():
    assert len(SPEC_CODES) == 34
    for name, number in {**SPEC_CODES, **FINISH_CODES, **OWN_CODES}.items():
        assert ErrorCode[name] == f"agent_runtime.{number}", name
    assert {c.name for c in ErrorCode} == set(SPEC_CODES) | set(FINISH_CODES) | set(OWN_CODES)
    assert ErrorCode.TOOL_BUSINESS_FAILED == "agent_runtime.40004"


def test_codes_match_the_shared_spec_when_it_is_mounted():
    if not SPEC.is_file():
        pytest.skip("the shared spec is not mounted here")
    rows = re.findall(r"`agent_runtime\.(\d{5})`\s+`([A-Z_]+)`", SPEC.read_text(encoding="utf-8"))
    assert {name: number for number, name in rows} == SPEC_CODES
