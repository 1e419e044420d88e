"""Value expressions of §9 and the §11 platform fields (expressions.py): parsing, prefixes, open and hidden fields."""

from __future__ import annotations

import pytest

from skillyard.agent import ExpressionError, Prefix, parse_expression
from skillyard.agent.expressions import HIDDEN_PLATFORM_FIELDS, PLATFORM_FIELDS
from support.agent.kit import SHARE, Kit, base_contract, load
from support.agent.probes import needs_db


@needs_db
async def test_every_documented_prefix_loads(kit: Kit):
    kit.with_args(
        outputs={"o": SHARE},
        a={"from": "inputs.topic"},
        b={"from": "outputs.o"},
        c={"from": "shared.spaceId"},
        d={"from": "session.lang"},
        e={"from": "prior.note.id"},
        f={"from": "prior.note:n-1.tag"},
        g={"from": "platform.deptPath"},
        h={"from": "evidence.notes.0.id"},
        i={"from": "evidence.notes[].id", "when": "UNIQUE"},
    )
    loaded = await load(kit)
    assert "probe.kit" in loaded.skills and loaded.errors == [], loaded.errors


@pytest.mark.spec("§7")
@needs_db
async def test_an_input_from_with_another_prefix_still_loads(kit: Kit):
    """§7: in inputs.*.from an unknown prefix falls back to the upstream output of that name (no load error)."""
    contract = base_contract()
    contract["inputs"] = {"topic": {"from": "whatever.topic"}}
    kit.contract(contract)
    loaded = await load(kit)
    assert "probe.kit" in loaded.skills, loaded.errors


# §11 ----------------------------------------------------------------------------------------------------------
def test_platform_fields():
    assert PLATFORM_FIELDS == ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath")
    assert set(HIDDEN_PLATFORM_FIELDS) == {"passportId", "clientId", "sessionType", "adminUser", "adminCompany"}


# §9 -----------------------------------------------------------------------------------------------------------
def test_expressions():
    expr = parse_expression("prior.article:42.title")
    assert expr.prefix is Prefix.PRIOR and expr.parts == ("article:42", "title") and expr.text == str(expr)
    assert parse_expression("inputs.lines[].code").parts == ("lines[]", "code")
    assert parse_expression("call.title", allow_call=True).prefix is Prefix.CALL
    with pytest.raises(ExpressionError, match=r"unknown prefix 'foo\.'.*inputs\., outputs\."):
        parse_expression("foo.bar")
    with pytest.raises(ExpressionError, match=r"only allowed in verify\.args"):
        parse_expression("call.title")
    with pytest.raises(ExpressionError, match="exactly one field"):
        parse_expression("platform.userId.x")
