"""The contract-driven agent runtime (contract spec): loading, validation and preflight of agents and their skills.

Execution (the tool-call chain, builtins, models, the node runner) builds on the values defined here.
"""

from __future__ import annotations

from .codes import ErrorCode
from .contract import (
    UNSET,
    ArgContract,
    Contract,
    EntitySpec,
    ErrorSpec,
    Extract,
    InputSpec,
    MissingAction,
    MissingSpec,
    Mode,
    OutputSpec,
    OutputType,
    ShareScope,
    SideEffect,
    SourceType,
    SuccessOp,
    SuccessSpec,
    ToolContract,
    VerifyArg,
    VerifySpec,
    When,
)
from .contract_parse import ContractError, ContractIssue, parse_contract
from .expressions import Expression, ExpressionError, Prefix, parse_expression
from .loader import ContractSkill, LoadedAgent, LoadIssue, load_agent
from .preflight import PreflightProblem, preflight_agent
from .profile import AgentProfile, AgentProfileError, read_agent_profile

__all__ = [
    "UNSET",
    "AgentProfile",
    "AgentProfileError",
    "ArgContract",
    "Contract",
    "ContractError",
    "ContractIssue",
    "ContractSkill",
    "EntitySpec",
    "ErrorCode",
    "ErrorSpec",
    "Expression",
    "ExpressionError",
    "Extract",
    "InputSpec",
    "LoadIssue",
    "LoadedAgent",
    "MissingAction",
    "MissingSpec",
    "Mode",
    "OutputSpec",
    "OutputType",
    "Prefix",
    "PreflightProblem",
    "ShareScope",
    "SideEffect",
    "SourceType",
    "SuccessOp",
    "SuccessSpec",
    "ToolContract",
    "VerifyArg",
    "VerifySpec",
    "When",
    "load_agent",
    "parse_contract",
    "parse_expression",
    "preflight_agent",
    "read_agent_profile",
]
