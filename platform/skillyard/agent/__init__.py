"""The contract-driven agent runtime (contract spec), part 1: agents and contract skills (loading, validation,
preflight), the tool-call chain, builtins, models and the ReAct node runner with stored checkpoints.

Entry points: ``agent = await yard.agent(DIR, model=…)``, then ``await agent.send(…)`` / ``await agent.resume(…)``
(:class:`Agent`, :class:`TurnResult`); docs/agents.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
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
    from .contract_parse import (
        ContractError,
        ContractIssue,
        parse_contract,
    )
    from .entry import open_agent
    from .expressions import (
        Expression,
        ExpressionError,
        Prefix,
        parse_expression,
    )
    from .loader import (
        ContractSkill,
        LoadedAgent,
        LoadIssue,
        load_agent,
    )
    from .preflight import (
        PreflightProblem,
        preflight_agent,
    )
    from .profile import (
        AgentProfile,
        AgentProfileError,
        read_agent_profile,
    )
    from .runner import (
        Agent,
        AgentError,
        resume_session,
    )
    from .turn import TurnResult

_EXPORTS = {
    "Agent": ".runner",
    "AgentError": ".runner",
    "AgentProfile": ".profile",
    "AgentProfileError": ".profile",
    "ArgContract": ".contract",
    "Contract": ".contract",
    "ContractError": ".contract_parse",
    "ContractIssue": ".contract_parse",
    "ContractSkill": ".loader",
    "EntitySpec": ".contract",
    "ErrorCode": ".codes",
    "ErrorSpec": ".contract",
    "Expression": ".expressions",
    "ExpressionError": ".expressions",
    "Extract": ".contract",
    "InputSpec": ".contract",
    "LoadIssue": ".loader",
    "LoadedAgent": ".loader",
    "MissingAction": ".contract",
    "MissingSpec": ".contract",
    "Mode": ".contract",
    "OutputSpec": ".contract",
    "OutputType": ".contract",
    "Prefix": ".expressions",
    "PreflightProblem": ".preflight",
    "ShareScope": ".contract",
    "SideEffect": ".contract",
    "SourceType": ".contract",
    "SuccessOp": ".contract",
    "SuccessSpec": ".contract",
    "ToolContract": ".contract",
    "TurnResult": ".turn",
    "UNSET": ".contract",
    "VerifyArg": ".contract",
    "VerifySpec": ".contract",
    "When": ".contract",
    "load_agent": ".loader",
    "open_agent": ".entry",
    "parse_contract": ".contract_parse",
    "parse_expression": ".expressions",
    "preflight_agent": ".preflight",
    "read_agent_profile": ".profile",
    "resume_session": ".runner",
}
__all__ = [
    "UNSET",
    "Agent",
    "AgentError",
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
    "TurnResult",
    "VerifyArg",
    "VerifySpec",
    "When",
    "load_agent",
    "open_agent",
    "parse_contract",
    "parse_expression",
    "preflight_agent",
    "read_agent_profile",
    "resume_session",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
