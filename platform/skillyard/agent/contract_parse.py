"""Reading a skill contract (§19) and the load-time checks of §16 (rules 1–13) and §11 (platform fields).

Every problem of a contract is collected, then one ``ContractError`` carries them all; a problem names the
skill, the rule (``§16.6``), the JSON path (``tools.createArticle.success``) and how to fix it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import json5

from ..envelope import MAX_NESTING, nesting_problem
from .contract import (
    UNSET,
    ArgContract,
    Contract,
    ErrorSpec,
    EventSpec,
    Extract,
    InputSpec,
    MissingAction,
    MissingSpec,
    Mode,
    OutputSpec,
    OutputType,
    ResultView,
    ShareScope,
    SideEffect,
    SuccessOp,
    SuccessSpec,
    ToolContract,
    VerifyArg,
    VerifySpec,
    When,
)
from .contract_values import ContractError, ContractIssue, ContractReader, is_unset, json_path, type_name
from .expressions import HIDDEN_PLATFORM_FIELDS, PLATFORM_FIELDS, Prefix

#: An event name (``events.<NAME>``, builtin_node_wait_event's ``event``, ``skillyard agent event --event``).
EVENT_NAME = re.compile(r"\A[A-Za-z0-9_.:\-]{1,100}\Z")

__all__ = ["ContractError", "ContractIssue", "load_contract_text", "parse_contract"]


class _ContractWalk(ContractReader):
    """Walks one raw contract, building the values of ``contract.py`` and collecting problems and warnings."""

    # the contract ----------------------------------------------------------------------------------------
    def contract(self, raw: Mapping[str, Any]) -> Contract:
        tools = self.tools(self.mapping(raw, "tools", ""))
        contract = Contract(
            mode=self.enum(raw, "mode", "", Mode, Mode.REACT) or Mode.REACT,
            delegatable=self.boolean(raw, "delegatable", "", False),
            target=self.text(raw, "target", ""),
            inputs=self.inputs(self.mapping(raw, "inputs", "")),
            outputs=self.outputs(self.mapping(raw, "outputs", "")),
            tools=tools,
            events=self.events(self.mapping(raw, "events", "")),
        )
        self.cross_checks(contract)
        return contract

    def tools(self, raw: Mapping[str, Any]) -> dict[str, ToolContract]:
        tools: dict[str, ToolContract] = {}
        for name, node in raw.items():
            if not isinstance(name, str) or not name.strip():
                self.fail("§16.5", "tools", f"a tool key is empty ({name!r}); use the business tool's name")
                continue
            path = json_path("tools", name)
            if is_unset(node):  # §19: null or "" is not configured (the tool has no contract)
                continue
            if not isinstance(node, Mapping):
                self.fail("§19", path, f"a tool contract must be an object, not {type_name(node)}")
                continue
            tools[name] = self.tool(name, node, path)
        return tools

    def tool(self, name: str, raw: Mapping[str, Any], path: str) -> ToolContract:
        side = self.enum(raw, "sideEffect", path, SideEffect, SideEffect.NONE) or SideEffect.NONE
        confirm = self.boolean(raw, "confirm", path, side is SideEffect.WRITE)
        if confirm and side is not SideEffect.WRITE:
            self.fail(
                "§16.7",
                json_path(path, "confirm"),
                'confirm: true is only allowed on WRITE tools; remove it or set "sideEffect": "WRITE"',
            )
        call_only = self.boolean(raw, "callOnly", path, False)
        if call_only and side is SideEffect.WRITE:
            self.fail(
                "P0.call_only_write",
                json_path(path, "callOnly"),
                f"callOnly is only for read tools; the WRITE tool {name!r} needs its full contract (success, confirm)",
            )
        success = self.success(raw, path)
        if side is SideEffect.WRITE and success is None:
            self.fail(
                "§16.6",
                json_path(path, "success"),
                f"WRITE tool {name!r} needs a success condition, e.g. "
                '"success": {"path": "code", "op": "EQ", "value": 200}',
            )
        args_path = json_path(path, "args")
        args: dict[str, ArgContract] = {}
        for arg_path, node in self.mapping(raw, "args", path).items():
            where = json_path(args_path, str(arg_path))
            if not str(arg_path).strip():
                self.fail("§5.1", args_path, "an argument path is empty; use the parameter's name, e.g. 'title'")
            elif is_unset(node):  # §19: not configured, as if the argument were not listed
                continue
            elif not isinstance(node, Mapping):
                self.fail("§19", where, f"an argument contract must be an object, not {type_name(node)}")
            else:
                args[str(arg_path)] = self.arg(str(arg_path).strip(), node, where)
        error_raw = self.mapping(raw, "error", path)
        error = None
        if error_raw:
            where = json_path(path, "error")
            error = ErrorSpec(code=self.text(error_raw, "code", where), message=self.text(error_raw, "message", where))
        return ToolContract(
            name=name,
            label=self.text(raw, "label", path),
            side_effect=side,
            confirm=confirm,
            idempotency_key=self.strings(raw, "idempotencyKey", path),
            args=args,
            success=success,
            error=error,
            extracts=self.extracts(raw, path),
            verify=self.verify(raw, path),
            call_only=call_only,
            result_view=self.enum(raw, "resultView", path, ResultView, ResultView.TEXT) or ResultView.TEXT,
        )

    def success(self, raw: Mapping[str, Any], path: str) -> SuccessSpec | None:
        node = self.mapping(raw, "success", path)
        if not node:
            return None
        where = json_path(path, "success")
        return SuccessSpec(
            path=self.text(node, "path", where),
            op=self.enum(node, "op", where, SuccessOp, None),
            value=node.get("value"),
        )

    def events(self, raw: Mapping[str, Any]) -> dict[str, EventSpec]:
        events: dict[str, EventSpec] = {}
        for name, node in raw.items():
            path = json_path("events", str(name))
            if not isinstance(name, str) or not EVENT_NAME.match(name):
                self.fail("events", path, f"event name {name!r} must be 1-100 letters, digits, '_', '-', '.' or ':'")
                continue
            if is_unset(node):
                events[name] = EventSpec(name)
                continue
            if not isinstance(node, Mapping):
                self.fail("§19", path, f"an event must be an object {{label?, extracts?}}, not {type_name(node)}")
                continue
            events[name] = EventSpec(name, self.text(node, "label", path), self.extracts(node, path))
        return events

    def extracts(self, raw: Mapping[str, Any], path: str) -> tuple[Extract, ...]:
        out = []
        base = json_path(path, "extracts")
        for i, node in enumerate(self.array(raw, "extracts", path)):
            where = f"{base}[{i}]"
            if is_unset(node):
                continue
            if not isinstance(node, Mapping):
                self.fail("§19", where, f"an extract must be an object, not {type_name(node)}")
                continue
            extract_path = self.text(node, "path", where)
            if extract_path is None:
                self.fail("§16.11", json_path(where, "path"), "extracts need a non-empty 'path', e.g. \"data.records\"")
                continue
            out.append(
                Extract(
                    path=extract_path,
                    key=self.text(node, "key", where),
                    fields=self.strings(node, "fields", where),
                    entity=self.entity(node, where),
                )
            )
        return tuple(out)

    def verify(self, raw: Mapping[str, Any], path: str) -> VerifySpec | None:
        if is_unset(raw.get("verify")):
            return None
        node = self.mapping(raw, "verify", path)
        where = json_path(path, "verify")
        tool = self.text(node, "tool", where)
        if tool is None:
            self.fail("§16.8", json_path(where, "tool"), "verify needs a 'tool': a read-only tool of this contract")
            return None
        args: dict[str, VerifyArg] = {}
        args_path = json_path(where, "args")
        for key, value in self.mapping(node, "args", where).items():
            at = json_path(args_path, str(key))
            if not isinstance(value, Mapping):
                self.fail("§6.4", at, 'write {"const": …} or {"from": "call.<path>"}')
                continue
            text = self.text(value, "from", at)
            expr = self.expression(text, json_path(at, "from"), allow_call=True)
            if expr is not None and expr.prefix is not Prefix.CALL:
                self.fail("§6.4", json_path(at, "from"), f"verify.args only read call.<path>, not {expr.text!r}")
                expr = None
            const = value["const"] if "const" in value and value["const"] != "" else UNSET
            if text is None and const is UNSET:
                self.fail("§6.4", at, 'a verify argument needs "const" or "from": "call.<path>"')
            elif text is not None and const is not UNSET:
                self.fail("§6.4", at, 'a verify argument has either "const" or "from", not both')
            args[str(key)] = VerifyArg(const=const, from_expr=expr)
        return VerifySpec(tool=tool, args=args)

    def arg(self, arg_path: str, raw: Mapping[str, Any], path: str) -> ArgContract:
        text = self.text(raw, "from", path)
        expr = self.expression(text, json_path(path, "from"))
        const = raw["const"] if "const" in raw and raw["const"] != "" else UNSET
        if text is not None and const is not UNSET:
            self.fail("§16.9", path, "an argument has either 'from' or 'const', not both; remove one")
        missing_raw = self.mapping(raw, "missing", path)
        where = json_path(path, "missing")
        missing = MissingSpec(
            action=self.enum(missing_raw, "action", where, MissingAction, MissingAction.ASK_USER)
            or MissingAction.ASK_USER,
            tool=self.text(missing_raw, "tool", where),
            message=self.text(missing_raw, "message", where),
        )
        enum_values = tuple(self.array(raw, "enum", path))
        arg = ArgContract(
            path=arg_path,
            from_expr=expr,
            const=const,
            when=self.enum(raw, "when", path, When, When.ALWAYS) or When.ALWAYS,
            sources=self.sources(raw, path),
            required=self.boolean(raw, "required", path, True),
            enum=enum_values,
            missing=missing,
            sensitive=self.boolean(raw, "sensitive", path, False),
            label=self.text(raw, "label", path),
        )
        if arg.leaf in PLATFORM_FIELDS and (expr is None or expr.prefix is not Prefix.PLATFORM):
            self.warn(
                "§11",
                path,
                f"argument {arg_path!r} is named like the platform field {arg.leaf!r} but is not bound from "
                f'platform.{arg.leaf}; add "from": "platform.{arg.leaf}" if it is the logged-in identity',
            )
        return arg

    def inputs(self, raw: Mapping[str, Any]) -> dict[str, InputSpec]:
        out = {}
        for name, node in raw.items():
            path = json_path("inputs", str(name))
            if is_unset(node):
                continue
            if not isinstance(node, Mapping):
                self.fail("§19", path, f"an input must be an object, not {type_name(node)}")
                continue
            source = self.text(node, "from", path)
            if source is not None and source.startswith(f"{Prefix.PLATFORM.value}."):
                self.expression(source, json_path(path, "from"))  # §11: only open platform fields, as for args
            out[str(name)] = InputSpec(
                name=str(name),
                from_expr=source,
                required=self.boolean(node, "required", path, True),
                provider=self.text(node, "provider", path),
            )
        return out

    def outputs(self, raw: Mapping[str, Any]) -> dict[str, OutputSpec]:
        out = {}
        for key, node in raw.items():
            path = json_path("outputs", str(key))
            if not str(key).strip():
                self.fail("§8", "outputs", "an output key is empty; name the output, e.g. 'articleId'")
                continue
            if is_unset(node):
                continue
            if not isinstance(node, Mapping):
                self.fail("§19", path, f"an output must be an object, not {type_name(node)}")
                continue
            if key in PLATFORM_FIELDS or key in HIDDEN_PLATFORM_FIELDS:  # every §11 name, open or closed
                self.fail("§11", path, f"output key {key!r} is a reserved platform field name; rename the output")
            kind = self.enum(node, "type", path, OutputType, OutputType.VALUE) or OutputType.VALUE
            fields = self.strings(node, "fields", path)
            if kind is OutputType.LIST and not fields:
                self.fail(
                    "§16.12",
                    json_path(path, "fields"),
                    'a LIST output needs non-empty "fields", e.g. ["id", "title"]',
                )
            out[str(key)] = OutputSpec(
                key=str(key),
                type=kind,
                fields=fields,
                min_items=self.integer(node, "minItems", path, 1),
                hint=self.text(node, "hint", path),
                required=self.boolean(node, "required", path, True),
                share=self.enum(node, "share", path, ShareScope, None),
                entity=self.entity(node, path),
                sources=self.sources(node, path),
                constant=node["constant"] if "constant" in node and node["constant"] != "" else UNSET,
                sensitive=self.boolean(node, "sensitive", path, False),
            )
        return out

    def cross_checks(self, contract: Contract) -> None:
        """The rules that relate attributes to each other (§16.3, §16.4, §16.8)."""
        writes = contract.write_tools
        if contract.target is not None:
            tool = contract.tools.get(contract.target)
            if tool is None or not tool.is_write:
                known = ", ".join(writes) or "none"
                self.fail(
                    "§16.3",
                    "target",
                    f"target {contract.target!r} must be a WRITE tool in tools (WRITE tools: {known}); "
                    "fix the name or leave target empty",
                )
        if contract.delegatable and writes:
            self.fail(
                "§16.4",
                "delegatable",
                f"a delegatable skill must not have WRITE tools ({', '.join(writes)}); "
                "set delegatable to false or move the writes to another skill",
            )
        for name, tool in contract.tools.items():
            if tool.verify is None:
                continue
            where = json_path(json_path(json_path("tools", name), "verify"), "tool")
            checked = contract.tools.get(tool.verify.tool)
            if checked is None:
                self.fail(
                    "§16.8",
                    where,
                    f"verify tool {tool.verify.tool!r} is not in contract.tools; add a read-only contract for it",
                )
            elif checked.is_write:
                self.fail("§16.8", where, f"verify tool {tool.verify.tool!r} must be read-only (sideEffect NONE)")


#: The largest contract text read (JSON5 is parsed in Python: 8,000 tools took 22 s before this cap).
MAX_CONTRACT_CHARS = 1_000_000


def load_contract_text(raw: str | Mapping[str, Any]) -> Any:
    """JSON with ``//`` and ``/* */`` comments (json5 reads a superset); a mapping is returned as is.

    Plain JSON goes through the C parser first; only text it refuses (comments, trailing commas) is read as JSON5.
    Text over MAX_CONTRACT_CHARS, and any contract nested deeper than MAX_NESTING, is refused before or instead of
    being walked."""
    if isinstance(raw, str):
        if not raw.strip():
            raise ValueError("the contract is empty")
        if len(raw) > MAX_CONTRACT_CHARS:
            raise ValueError(f"the contract has {len(raw):,} characters, over the limit of {MAX_CONTRACT_CHARS:,}")
        try:
            data = json.loads(raw)
        except RecursionError:
            raise ValueError(f"the contract is nested more than {MAX_NESTING} levels deep") from None
        except ValueError:
            try:
                data = json5.loads(raw)
            except RecursionError:
                raise ValueError(f"the contract is nested more than {MAX_NESTING} levels deep") from None
    else:
        data = raw
    too_deep = nesting_problem(data)
    if too_deep:
        raise ValueError(f"the contract cannot be used: {too_deep}")
    return data


def parse_contract(
    raw: str | Mapping[str, Any], *, skill_key: str, open_fields: frozenset[str] | None = None
) -> tuple[Contract, list[ContractIssue]]:
    """Read and check a contract; return it with its warnings, or raise ``ContractError`` listing every problem.

    ``open_fields``: the platform fields ``platform.*`` may name (default: the seven open ones of §11; see
    :func:`~.expressions.open_platform_fields`)."""
    try:
        data = load_contract_text(raw)
    except ValueError as exc:
        raise ContractError(
            skill_key, [ContractIssue(skill_key, "§16.1", "", f"the contract is not valid JSON: {exc}")]
        ) from None
    if not isinstance(data, Mapping):
        what = type_name(data)
        problem = ContractIssue(skill_key, "§16.1", "", f"the contract must be a JSON object, not a JSON {what}")
        raise ContractError(skill_key, [problem])
    reader = _ContractWalk(skill_key, open_fields if open_fields is not None else frozenset(PLATFORM_FIELDS))
    contract = reader.contract(data)
    if reader.problems:
        raise ContractError(skill_key, reader.problems)
    return contract, reader.warnings
