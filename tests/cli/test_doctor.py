"""``skillyard doctor``'s output (docs/cli.md): one line per check and a count, or JSON; exit 1 on a failed check."""

from __future__ import annotations

import json
import re

from support.cli import invoke, no_traceback, usage_error


def test_doctor_ok_lines_and_count(db_env):
    """prints one line per check: its status (`ok`, `warn` or `fail`), its name, what was found … then a count."""
    out = invoke("doctor")
    assert out.exit_code == 0, out.output
    lines = out.stdout.strip().splitlines()
    for name in ("home", "database", "skills", "datatable.sql_roles"):
        assert any(re.match(rf"^(ok|warn|fail)\s+{re.escape(name)}: ", line) for line in lines), (name, lines)
    assert re.fullmatch(r"\d+ ok, \d+ warn, \d+ fail", lines[-1]), lines[-1]


def test_doctor_json_shape(db_env):
    """`--json` prints `{"status": "ok" | "warn" | "fail" (the worst), "checks": [...]}`, each check
    `{name, status, detail, fix, plugin}` (`fix` null when ok; `plugin` is `core` for the checks above the plugin
    ones)"""
    out = invoke("doctor", "--json")
    report = json.loads(out.stdout)
    assert out.exit_code == 0 and set(report) == {"status", "checks"}
    assert all(set(c) == {"name", "status", "detail", "fix", "plugin"} for c in report["checks"])
    checks = {c["name"]: c for c in report["checks"]}
    assert all(checks[n]["plugin"] == "core" for n in ("home", "database", "skills"))
    assert all(c["fix"] is None for c in report["checks"] if c["status"] == "ok")
    assert all(c["fix"] for c in report["checks"] if c["status"] != "ok")
    worst = max((c["status"] for c in report["checks"]), key=["ok", "warn", "fail"].index)
    assert report["status"] == worst


def test_doctor_database_migrated(db_env):
    """`database` | the database answers … and schema `skillyard` is at this version's newest migration"""
    checks = {c["name"]: c for c in json.loads(invoke("doctor", "--json").stdout)["checks"]}
    assert checks["database"]["status"] == "ok" and "revision" in checks["database"]["detail"]


def test_doctor_unreachable_database_fails(monkeypatch):
    """`database` | … | `fail`; Exit 1 when any check fails"""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:doctor-pass-1@127.0.0.1:1/db")
    out = invoke("doctor")
    assert out.exit_code == 1 and no_traceback(out)
    line = next(line for line in out.stdout.splitlines() if "database:" in line)
    assert line.startswith("fail") and "— fix:" in line
    assert "doctor-pass-1" not in out.output


def test_doctor_unreachable_database_json(monkeypatch):
    """`--json` … (the worst) … Passwords in database URLs are shown as `***`."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:doctor-pass-2@127.0.0.1:1/db")
    out = invoke("doctor", "--json")
    assert out.exit_code == 1 and json.loads(out.stdout)["status"] == "fail" and "doctor-pass-2" not in out.output


def test_doctor_masks_password_of_reachable_url(database_url, monkeypatch):
    """Passwords in database URLs are shown as `***`."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(database_url)
    if parts.password:
        url = database_url
        password = parts.password
    else:  # the embedded test server trusts local connections: any password connects
        password = "Visible-Pass-9"
        user = parts.username or "postgres"
        netloc = f"{user}:{password}@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", url)
    out = invoke("doctor")
    assert password not in out.output, out.output


def test_doctor_home_not_writable_fails(db_env, tmp_path, monkeypatch):
    """`home` | `SKILLYARD_HOME` exists (it is created when missing) and a file can be written in it | `fail`"""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("SKILLYARD_HOME", str(blocker))
    out = invoke("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert out.exit_code == 1 and checks["home"]["status"] == "fail" and checks["home"]["fix"]


def test_doctor_creates_missing_home(db_env, tmp_path, monkeypatch):
    """`home` | `SKILLYARD_HOME` exists (it is created when missing)"""
    target = tmp_path / "new-home"
    monkeypatch.setenv("SKILLYARD_HOME", str(target))
    out = invoke("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["home"]["status"] == "ok" and target.is_dir()


def test_doctor_skill_error_is_a_warning(db_env, state_root):
    """`skills` | at least one skill folder is found and none has an error | `warn` … (warnings alone exit 0)"""
    out = invoke("doctor", "--json", "--skills-dir", str(state_root[0]))
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert out.exit_code == 0 and checks["skills"]["status"] == "warn" and json.loads(out.stdout)["status"] in ("warn",)


def test_doctor_skills_dir_missing_exit_2(db_env, tmp_path):
    """a `--skills-dir` that does not exist is a usage error (exit 2)."""
    usage_error(invoke("doctor", "--skills-dir", str(tmp_path / "nope")))


def test_doctor_sql_roles_check_belongs_to_datatable(db_env):
    """`datatable.sql_roles` | the platform's database user has CREATEROLE or is a superuser"""
    checks = {c["name"]: c for c in json.loads(invoke("doctor", "--json").stdout)["checks"]}
    assert checks["datatable.sql_roles"]["status"] in ("ok", "warn")
    assert checks["datatable.sql_roles"]["plugin"] != "core"
