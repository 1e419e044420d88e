"""The contract model (contract.py): defaults of an empty contract and of every attribute."""

from __future__ import annotations

from skillyard.agent import (
    UNSET,
    MissingAction,
    Mode,
    OutputType,
    Prefix,
    SideEffect,
    SourceType,
    SuccessOp,
    When,
    parse_contract,
)
from support.agent.contract import write_tool


# defaults -----------------------------------------------------------------------------------------------------
def test_defaults_of_an_empty_contract_and_a_bare_tool():
    contract, warnings = parse_contract({"tools": {"query": {}, "save": write_tool()}}, skill_key="k")
    assert warnings == []
    assert contract.mode is Mode.REACT and contract.delegatable is False and contract.target is None
    query, save = contract.tools["query"], contract.tools["save"]
    assert query.side_effect is SideEffect.NONE and query.confirm is False and query.success is None
    assert save.side_effect is SideEffect.WRITE and save.confirm is True and contract.write_tools == ("save",)
    assert save.success is not None and save.success.op is SuccessOp.EQ and save.success.value == 200
    empty, _ = parse_contract("{}", skill_key="k")
    assert empty.tools == {} and empty.inputs == {} and empty.outputs == {}


def test_arg_input_output_defaults_and_values():
    raw = {
        "inputs": {"space": {"from": "shared.spaceId", "provider": "cms.space.pick"}},
        "outputs": {
            "articles": {"type": "LIST", "fields": ["id", "title"], "share": "SESSION"},
            "flag": {"constant": None, "sources": ["CONTRACT"]},
            "note": {},
        },
        "tools": {
            "save": write_tool(
                confirm=False,
                idempotencyKey=["spaceId", "title"],
                args={
                    "title": {"sources": ["USER", "MODEL"], "enum": ["a", "b"], "label": "Title"},
                    "lines[].code": {"from": "evidence.goods.0.code", "when": "UNIQUE", "sensitive": True},
                    "kind": {"const": None},
                    "owner": {"missing": {"action": "CALL_TOOL", "tool": "query"}, "sources": ["EVIDENCE"]},
                },
                extracts=[{"key": "saved", "path": "data", "entity": {"type": "article", "scalar": "id"}}],
                verify={"tool": "query", "args": {"t": {"from": "call.title"}, "n": {"const": 1}}},
            ),
            "query": {},
        },
    }
    contract, _ = parse_contract(raw, skill_key="k")
    assert contract.inputs["space"].from_expr == "shared.spaceId" and contract.inputs["space"].required is True
    assert contract.inputs["space"].provider == "cms.space.pick"
    articles, flag, note = (contract.outputs[k] for k in ("articles", "flag", "note"))
    assert articles.type is OutputType.LIST and articles.fields == ("id", "title") and articles.min_items == 1
    assert flag.constant is None and flag.sources == (SourceType.CONTRACT,)
    assert note.constant is UNSET and note.required is True and note.share is None and note.sources == ()
    save = contract.tools["save"]
    assert save.confirm is False and save.idempotency_key == ("spaceId", "title")
    title, lines, kind, owner = (save.args[k] for k in ("title", "lines[].code", "kind", "owner"))
    assert title.required is True and title.when is When.ALWAYS and title.missing.action is MissingAction.ASK_USER
    assert title.const is UNSET and not title.has_const and title.enum == ("a", "b") and title.label == "Title"
    assert lines.from_expr is not None and lines.from_expr.prefix is Prefix.EVIDENCE and lines.when is When.UNIQUE
    assert lines.from_expr.parts == ("goods", "0", "code") and lines.sensitive and lines.leaf == "code"
    assert kind.has_const and kind.const is None
    assert owner.missing.action is MissingAction.CALL_TOOL and owner.missing.tool == "query"
    entity = save.extracts[0].entity
    assert entity is not None and (entity.type, entity.id, entity.name, entity.scalar) == (
        "article",
        "id",
        "name",
        "id",
    )
    assert save.verify is not None and save.verify.tool == "query"
    assert save.verify.args["t"].from_expr is not None and save.verify.args["t"].from_expr.path == "title"
    assert save.verify.args["n"].const == 1 and save.verify.args["n"].from_expr is None
