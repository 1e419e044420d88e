"""``skillyard agent check`` (orchestration requirements P0, agent part 2): the whole agent's skills checked together
with the P0 rules, graded strictness with ``--write-baseline`` / ``--baseline``, and ``--defaults`` (each contract as
the runtime reads it, defaults filled)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.agent.crm import CONTRACTS, OK_200, SCHEMAS, SKILLS, CrmAgent
from support.agent.probes import no_traceback, skillyard_cli

FIELDS = {"skill", "tool", "path", "rule", "severity", "message"}


@pytest.fixture
def crm(tmp_path: Path) -> CrmAgent:
    return CrmAgent(tmp_path)


def check(crm: CrmAgent, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    result = skillyard_cli("agent", "check", str(crm.dir), "--json", *args)
    assert no_traceback(result), result
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def tools_of(crm: CrmAgent, folder: str, tools: list[str]) -> None:
    """Rewrite the ``tools:`` of a contract skill's SKILL.md."""
    manifest = crm.dir / "skills" / folder / "SKILL.md"
    old = f"tools: [{', '.join(SKILLS[folder][2])}]"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(old, f"tools: [{', '.join(tools)}]"), "utf-8")


def contract(folder: str) -> dict[str, Any]:
    return copy.deepcopy(CONTRACTS[folder])


def only(findings: list[dict[str, Any]], rule: str) -> dict[str, Any]:
    found = [f for f in findings if f["rule"] == rule]
    assert len(found) == 1, findings
    assert set(found[0]) >= FIELDS, found[0]
    return found[0]


def rules(findings: list[dict[str, Any]]) -> list[str]:
    return sorted(f["rule"] for f in findings)


def test_a_clean_agent_has_no_findings(crm: CrmAgent):
    result, findings = check(crm)
    assert result.returncode == 0 and findings == []
    text = skillyard_cli("agent", "check", str(crm.dir))
    assert text.returncode == 0 and "0 error(s), 0 warning(s)" in text.stdout


def test_a_tool_that_is_no_skill_anywhere_is_tool_missing(crm: CrmAgent):
    tools_of(crm, "customer", ["findCustomer", "ghostTool"])
    result, findings = check(crm)
    assert result.returncode == 1
    missing = only(findings, "P0.tool_missing")
    assert (missing["skill"], missing["tool"], missing["severity"]) == ("crm.customer", "ghostTool", "error")
    assert "ghostTool" in missing["message"] and "--skills-dir" in missing["message"]
    assert only(findings, "P0.uncontracted_read")["tool"] == "ghostTool"


def test_a_tool_found_through_skills_dir_is_not_missing(crm: CrmAgent, tmp_path: Path):
    extra = tmp_path / "shared"
    (extra / "auditLog").mkdir(parents=True)
    (extra / "auditLog" / "SKILL.md").write_text("---\nname: auditLog\ndescription: log\n---\n", "utf-8")
    tools_of(crm, "customer", ["findCustomer", "auditLog"])
    _, without = check(crm)
    assert "P0.tool_missing" in rules(without)
    result, findings = check(crm, "--skills-dir", str(extra))
    assert "P0.tool_missing" not in rules(findings)
    assert rules(findings) == ["P0.uncontracted_read"] and result.returncode == 0


def test_an_argument_path_missing_from_the_input_schema_is_an_error(crm: CrmAgent):
    changed = contract("customer")
    changed["tools"]["findCustomer"]["args"]["query"] = {"sources": ["MODEL"], "required": False}
    crm.contract("customer", changed)
    result, findings = check(crm)
    assert result.returncode == 1
    found = only(findings, "P0.arg_path_missing")
    assert (found["skill"], found["tool"], found["path"], found["severity"]) == (
        "crm.customer",
        "findCustomer",
        "query",
        "error",
    )
    assert "mode, q" in found["message"]


def test_a_target_outside_tool_names_is_target_not_bound(crm: CrmAgent):
    tools_of(crm, "order", ["listOrders"])
    result, findings = check(crm)
    assert result.returncode == 1
    found = only(findings, "P0.target_not_bound")
    assert (found["skill"], found["tool"], found["severity"]) == ("crm.order", "createOrder", "error")
    assert "listOrders" in found["message"]


def test_a_missing_tool_outside_tool_names_is_missing_tool_not_bound(crm: CrmAgent):
    changed = contract("order")
    changed["tools"]["createOrder"]["args"]["customerId"] = {
        "sources": ["MODEL"],
        "missing": {"action": "CALL_TOOL", "tool": "findCustomer"},
    }
    crm.contract("order", changed)
    result, findings = check(crm)
    assert result.returncode == 1
    found = only(findings, "P0.missing_tool_not_bound")
    assert (found["skill"], found["tool"], found["path"]) == ("crm.order", "createOrder", "customerId")
    assert "findCustomer" in found["message"]
    tools_of(crm, "order", ["createOrder", "findCustomer"])
    _, bound = check(crm)
    assert "P0.missing_tool_not_bound" not in rules(bound)


def test_a_verify_tool_outside_tool_names_is_verify_tool_not_bound(crm: CrmAgent):
    changed = contract("order")
    changed["tools"]["createOrder"]["verify"] = {"tool": "listOrders"}
    changed["tools"]["listOrders"] = {"label": "Listing orders", "success": OK_200}  # §16.8: it needs a contract
    crm.contract("order", changed)
    result, findings = check(crm)
    assert result.returncode == 1
    assert only(findings, "§4")["tool"] == "listOrders"  # a contract for a tool the skill does not list
    found = only(findings, "P0.verify_tool_not_bound")
    assert (found["skill"], found["tool"], found["severity"]) == ("crm.order", "createOrder", "error")
    assert "listOrders" in found["message"]


def test_a_provider_that_is_no_skill_anywhere_is_provider_missing(crm: CrmAgent):
    changed = contract("order")
    changed["inputs"]["customer"]["provider"] = "crm.ghost"
    crm.contract("order", changed)
    result, findings = check(crm)
    assert result.returncode == 1
    found = only(findings, "P0.provider_missing")
    assert (found["skill"], found["path"], found["severity"]) == ("crm.order", "inputs.customer", "error")
    assert "crm.ghost" in found["message"] and "P0.provider_foreign" not in rules(findings)


def test_a_provider_that_is_a_catalog_skill_of_another_agent_is_provider_foreign(crm: CrmAgent):
    md = crm.dir / "AGENT.md"
    md.write_text(md.read_text("utf-8").replace("skills: [crm.customer, crm.order, crm.report]", "skills: [crm.order]"))
    result, findings = check(crm)
    assert result.returncode == 1
    found = only(findings, "P0.provider_foreign")
    assert (found["skill"], found["path"]) == ("crm.order", "inputs.customer")
    assert "crm.customer" in found["message"] and "P0.provider_missing" not in rules(findings)


def test_an_uncontracted_read_tool_is_a_warning_silenced_by_call_only(crm: CrmAgent):
    tools_of(crm, "customer", ["findCustomer", "listOrders"])
    result, findings = check(crm)
    assert result.returncode == 0
    found = only(findings, "P0.uncontracted_read")
    assert (found["skill"], found["tool"], found["severity"]) == ("crm.customer", "listOrders", "warning")
    assert '"callOnly": true' in found["message"]
    changed = contract("customer")
    changed["tools"]["listOrders"] = {"callOnly": True}
    crm.contract("customer", changed)
    result, findings = check(crm)
    assert result.returncode == 0 and findings == []


def test_call_only_on_a_write_tool_is_a_load_error(crm: CrmAgent):
    changed = contract("order")
    changed["tools"]["createOrder"]["callOnly"] = True
    crm.contract("order", changed)
    result, findings = check(crm)
    assert result.returncode == 1
    found = only(findings, "P0.call_only_write")
    assert (found["skill"], found["severity"], found["kind"]) == ("crm.order", "error", "load")
    assert found["tool"] == "createOrder" and "callOnly" in found["path"]


def test_every_finding_has_skill_tool_path_rule_severity_and_message(crm: CrmAgent):
    tools_of(crm, "customer", ["findCustomer", "ghostTool"])
    changed = contract("order")
    changed["inputs"]["customer"]["provider"] = "crm.ghost"
    changed["tools"]["createOrder"]["verify"] = {"tool": "listOrders"}
    changed["tools"]["listOrders"] = {"label": "Listing orders", "success": OK_200}
    crm.contract("order", changed)
    result, findings = check(crm)
    assert result.returncode == 1 and len(findings) >= 5
    for finding in findings:
        assert set(finding) >= FIELDS and finding["severity"] in ("error", "warning") and finding["message"]
    text = skillyard_cli("agent", "check", str(crm.dir))
    assert text.returncode == 1
    assert "P0.tool_missing" in text.stdout and "P0.provider_missing" in text.stdout
    errors = sum(f["severity"] == "error" for f in findings)
    assert f"{errors} error(s), {len(findings) - errors} warning(s)" in text.stderr


# -- baselines --------------------------------------------------------------------------------------------------


def broken_customer(crm: CrmAgent) -> None:
    tools_of(crm, "customer", ["findCustomer", "ghostTool"])


def test_write_baseline_records_hashes_and_problems(crm: CrmAgent, tmp_path: Path):
    broken_customer(crm)
    baseline = tmp_path / "baseline.json"
    result, findings = check(crm, "--write-baseline", str(baseline))
    assert result.returncode == 1  # writing a baseline does not hide the errors
    data = json.loads(baseline.read_text("utf-8"))
    assert data["version"] == 1 and data["agent_code"] == "crm"
    assert set(data["skills"]) == {"crm.customer", "crm.order", "crm.report"}
    assert all(isinstance(entry["hash"], str) and entry["hash"] for entry in data["skills"].values())
    assert rules(data["skills"]["crm.customer"]["problems"]) == ["P0.tool_missing", "P0.uncontracted_read"]
    assert data["skills"]["crm.order"]["problems"] == []
    assert rules(findings) == rules(data["skills"]["crm.customer"]["problems"])
    text = skillyard_cli("agent", "check", str(crm.dir), "--write-baseline", str(tmp_path / "b2.json"))
    assert "baseline written to" in text.stdout and "(3 skill(s))" in text.stdout


def test_a_baseline_turns_errors_of_unchanged_skills_into_warnings(crm: CrmAgent, tmp_path: Path):
    broken_customer(crm)
    baseline = tmp_path / "baseline.json"
    check(crm, "--write-baseline", str(baseline))
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 0, findings
    missing = only(findings, "P0.tool_missing")
    assert missing["severity"] == "warning" and missing["baseline"] == "unchanged"
    assert missing["baseline_severity"] == "error"
    text = skillyard_cli("agent", "check", str(crm.dir), "--baseline", str(baseline))
    assert text.returncode == 0 and "0 error(s), 2 warning(s)" in text.stdout


def test_errors_of_a_changed_skill_stay_errors(crm: CrmAgent, tmp_path: Path):
    broken_customer(crm)
    baseline = tmp_path / "baseline.json"
    check(crm, "--write-baseline", str(baseline))
    changed = contract("customer")
    changed["tools"]["findCustomer"]["label"] = "Looking the customer up"
    crm.contract("customer", changed)
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 1
    missing = only(findings, "P0.tool_missing")
    assert missing["severity"] == "error" and missing["baseline"] == "changed"


def test_a_changed_tool_schema_makes_its_skill_changed(crm: CrmAgent, tmp_path: Path):
    broken_customer(crm)
    baseline = tmp_path / "baseline.json"
    check(crm, "--write-baseline", str(baseline))
    schema = {**SCHEMAS["findCustomer"], "properties": {**SCHEMAS["findCustomer"]["properties"], "city": {}}}
    crm.tool("findCustomer", '{"code": 200}', schema)
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 1 and only(findings, "P0.tool_missing")["baseline"] == "changed"


def test_a_new_problem_in_another_skill_fails_while_the_known_one_is_a_warning(crm: CrmAgent, tmp_path: Path):
    broken_customer(crm)
    baseline = tmp_path / "baseline.json"
    check(crm, "--write-baseline", str(baseline))
    changed = contract("report")
    changed["tools"]["listOrders"]["args"]["bogus"] = {"sources": ["MODEL"], "required": False}
    crm.contract("report", changed)
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 1
    assert only(findings, "P0.tool_missing")["severity"] == "warning"
    found = only(findings, "P0.arg_path_missing")
    assert found["severity"] == "error" and found["baseline"] == "changed" and found["skill"] == "crm.report"


def test_errors_of_a_skill_new_since_the_baseline_fail(crm: CrmAgent, tmp_path: Path):
    md = crm.dir / "AGENT.md"
    md.write_text(md.read_text("utf-8").replace("skills: [crm.customer, crm.order, crm.report]", "skills: [crm.order]"))
    baseline = tmp_path / "baseline.json"
    result, _ = check(crm, "--write-baseline", str(baseline))
    assert set(json.loads(baseline.read_text("utf-8"))["skills"]) == {"crm.order"}
    assert result.returncode == 1  # provider_foreign: crm.customer is not a skill of the agent yet
    md.write_text(md.read_text("utf-8").replace("skills: [crm.order]", "skills: [crm.order, crm.customer]"))
    broken_customer(crm)
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 1
    missing = only(findings, "P0.tool_missing")
    assert missing["severity"] == "error" and missing["baseline"] == "new"
    assert "P0.provider_foreign" not in rules(findings)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "does not exist"),
        ("{not json", "is not a JSON baseline"),
        ("[1, 2]", "is not a version-1 skillyard baseline"),
        ('{"version": 2, "skills": {}}', "is not a version-1 skillyard baseline"),
        ('{"version": 1, "skills": []}', "is not a version-1 skillyard baseline"),
        ('{"version": 1}', "is not a version-1 skillyard baseline"),
        ('{"version": 1, "skills": {"crm.order": {"problems": []}}}', "has no hash"),
        ('{"version": 1, "skills": {"crm.order": "abc"}}', "has no hash"),
    ],
)
def test_a_baseline_that_is_not_one_is_a_usage_error_naming_the_file_and_the_fix(
    crm: CrmAgent, tmp_path: Path, content: str | None, says: str
):
    baseline = tmp_path / "old-baseline.json"
    if content is not None:
        baseline.write_text(content, "utf-8")
    for args in (["--json"], []):
        result = skillyard_cli("agent", "check", str(crm.dir), "--baseline", str(baseline), *args)
        assert result.returncode == 2, result
        assert str(baseline) in result.stderr and says in result.stderr
        assert f"--write-baseline {baseline}" in result.stderr
        assert result.stdout == "" and no_traceback(result)
    if content is not None:
        assert baseline.read_text("utf-8") == content  # nothing rewritten


def test_a_bad_baseline_with_write_baseline_writes_nothing(crm: CrmAgent, tmp_path: Path):
    out = tmp_path / "new.json"
    result = skillyard_cli(
        "agent", "check", str(crm.dir), "--baseline", str(tmp_path / "missing.json"), "--write-baseline", str(out)
    )
    assert result.returncode == 2 and not out.exists()


# -- defaults -------------------------------------------------------------------------------------------------


def test_defaults_json_prints_findings_and_each_contract_with_defaults_filled(crm: CrmAgent):
    crm.contract("report", {"tools": {"listOrders": {"args": {"customerId": {"sources": ["MODEL"]}}}}})
    tools_of(crm, "customer", ["findCustomer", "listOrders"])
    result, shown = check(crm, "--defaults")
    assert result.returncode == 0
    assert set(shown) == {"findings", "contracts"}
    assert rules(shown["findings"]) == ["P0.uncontracted_read"]
    contracts = shown["contracts"]
    assert set(contracts) == {"crm.customer", "crm.order", "crm.report"}
    report = contracts["crm.report"]
    assert report["mode"] == "REACT" and report["delegatable"] is False and report["target"] is None
    listing = report["tools"]["listOrders"]
    assert listing["sideEffect"] == "NONE" and listing["confirm"] is False and listing["callOnly"] is False
    assert listing["args"]["customerId"]["required"] is True
    assert listing["args"]["customerId"]["missing"]["action"] == "ASK_USER"
    order = contracts["crm.order"]["tools"]["createOrder"]
    assert order["sideEffect"] == "WRITE" and order["confirm"] is True  # WRITE confirms by default
    assert contracts["crm.order"]["inputs"]["customer"]["from"] == "outputs.customerId"
    assert contracts["crm.order"]["inputs"]["customer"]["provider"] == "crm.customer"
    assert contracts["crm.order"]["tools"]["createOrder"]["args"]["customerId"]["from"] == "session.customerId"
    _, listed = check(crm)
    assert isinstance(listed, list) and rules(listed) == ["P0.uncontracted_read"]


def test_defaults_as_text_prints_each_contract(crm: CrmAgent):
    result = skillyard_cli("agent", "check", str(crm.dir), "--defaults")
    assert result.returncode == 0, result
    for key in ("crm.customer", "crm.order", "crm.report"):
        assert f"\n{key}:\n" in result.stdout
    assert '"mode": "REACT"' in result.stdout and '"confirm": true' in result.stdout


def test_an_explicit_confirm_false_on_a_write_tool_is_shown_as_written(crm: CrmAgent):
    changed = contract("order")
    changed["tools"]["createOrder"]["confirm"] = False
    crm.contract("order", changed)
    _, shown = check(crm, "--defaults")
    assert shown["contracts"]["crm.order"]["tools"]["createOrder"]["confirm"] is False


def test_a_skill_that_does_not_load_is_graded_by_its_files(crm: CrmAgent, tmp_path: Path):
    (crm.dir / "skills" / "report" / "contract.json").write_text("{broken", "utf-8")
    baseline = tmp_path / "baseline.json"
    result, findings = check(crm, "--write-baseline", str(baseline))
    assert result.returncode == 1 and only(findings, "§16.1")["kind"] == "load"
    assert json.loads(baseline.read_text("utf-8"))["skills"]["crm.report"]["hash"]
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 0 and only(findings, "§16.1")["severity"] == "warning"
    (crm.dir / "skills" / "report" / "contract.json").write_text("{still broken", "utf-8")
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 1 and only(findings, "§16.1")["baseline"] == "changed"


def test_a_skill_missing_from_every_root_can_be_baselined(crm: CrmAgent, tmp_path: Path):
    agent_md = crm.dir / "AGENT.md"
    agent_md.write_text(
        agent_md.read_text(encoding="utf-8").replace("crm.report]", "crm.report, crm.ghost]"), encoding="utf-8"
    )
    baseline = tmp_path / "baseline.json"
    first, _ = check(crm, "--write-baseline", str(baseline))
    assert first.returncode == 1
    result, findings = check(crm, "--baseline", str(baseline))
    assert result.returncode == 0, findings
    ghost = next(f for f in findings if f["skill"] == "crm.ghost")
    assert ghost["severity"] == "warning" and ghost["baseline"] == "unchanged"


def test_a_baseline_of_another_agent_is_refused(crm: CrmAgent, tmp_path: Path):
    baseline = tmp_path / "baseline.json"
    check(crm, "--write-baseline", str(baseline))
    data = json.loads(baseline.read_text(encoding="utf-8"))
    baseline.write_text(json.dumps({**data, "agent_code": "other"}), encoding="utf-8")
    result = skillyard_cli("agent", "check", str(crm.dir), "--baseline", str(baseline))
    assert result.returncode == 2 and "belongs to agent 'other'" in result.stderr


def test_writing_a_baseline_under_an_older_one_records_the_real_severities(crm: CrmAgent, tmp_path: Path):
    broken_customer(crm)
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    check(crm, "--write-baseline", str(old))
    check(crm, "--baseline", str(old), "--write-baseline", str(new))
    recorded = json.loads(new.read_text(encoding="utf-8"))["skills"]["crm.customer"]["problems"]
    assert any(p["severity"] == "error" and "baseline" not in p for p in recorded)
