"""What a returned call proved (§6.1–§6.3, §14.4): the evidence status, the business outcome and what the model
reads. :func:`settle` is the judgment of every call whose contract and result declare none of the
doc-runtime-contracts keys; ``doc_settle`` builds on the same pieces for the ones that do."""

from __future__ import annotations

from typing import Any

from ..state import Evidence, EvidenceStatus, Observation
from . import evidence, invoke, response
from .base import ChainCall

SUCCESS = EvidenceStatus.SUCCESS  # read once: an enum member read off its class is slow on Python 3.11
UNKNOWN = EvidenceStatus.UNKNOWN
BUSINESS_STEP = (
    "read the error: fix the arguments and call again, ask the user with builtin_node_follow_up, "
    "or call builtin_node_fail with the reason"
)


def failure_step(call: ChainCall, failure: invoke.Failure, status: EvidenceStatus) -> str:
    """The next step after a failed call of class ``failure`` (§14.4) that left the evidence ``status``."""
    if status is UNKNOWN:
        return unknown_step(call)
    if failure is invoke.Failure.PARAMS:
        return f"fix the arguments named in the error and call {call.tool} again"
    if failure is invoke.Failure.MCP_TOOL:
        return f"read the tool's error: fix the arguments and call {call.tool} again, or call builtin_node_fail"
    if failure is invoke.Failure.UNREACHABLE:
        return f"{call.tool} cannot be reached now; try again later or call builtin_node_fail with the reason"
    return f"call {call.tool} again once, or call builtin_node_fail with the reason if it keeps failing"


def unknown_step(call: ChainCall) -> str:
    """The next step after a write whose effect is not known (§14.3: verify tool, else the user is asked)."""
    verify = call.contract.verify if call.contract else None
    check = (
        f"it will be checked with {verify.tool} when the node resumes"
        if verify
        else "the user will be asked whether it took effect"
    )
    return f"do not call {call.tool} again: the write may have happened and {check}; continue or finish later"


def failed_call(call: ChainCall, record: Evidence, envelope: dict[str, Any], failure: invoke.Failure) -> Observation:
    """A call that failed with a §14.4 class: FAILED, or UNKNOWN for a write whose effect is not certain."""
    record.status = failure.status(record.write)
    record.error_code = failure.code.value
    record.error_message = str(envelope.get("error") or failure.name)
    return call.refuse(
        failure.code, record.error_message, failure_step(call, failure, record.status), evidence_id=record.id
    )


def business_failure(call: ChainCall, record: Evidence, root: Any) -> Observation:
    """§6.2: the call returned and the business failed (evidence SUCCESS, ``business_ok`` False)."""
    record.status = SUCCESS
    record.business_ok = False
    record.error_code, record.error_message = response.business_error(call.contract, root)
    return call.refuse(
        record.error_code, f"{call.label} failed: {record.error_message}", BUSINESS_STEP, evidence_id=record.id
    )


def settle(call: ChainCall, record: Evidence, envelope: dict[str, Any]) -> Observation:
    """The response contract and evidence of a returned call: fills ``record`` and says what the model sees."""
    record.response = envelope
    failed = invoke.failed(envelope)  # one check for the §14.4 class and the response contract
    failure = invoke.failure_kind(envelope) if failed else None  # invoke.classify(envelope)
    if failure is not None:
        return failed_call(call, record, envelope, failure)
    record.status = SUCCESS
    root = invoke.result_root(call, envelope)  # an MCP tool's chosen view; any other skill's whole envelope
    # response.business_ok(call.plan.success, root), whose failed() check is the one just made
    record.business_ok = False if failed else response.success_holds(call.plan.success, root)
    if record.business_ok:
        evidence.fill(call.ctx, call.plan, record, root)
        return call.observation(True, envelope, evidence_id=record.id)
    return business_failure(call, record, root)
