"""Reading and checking import files (directory/importer.py): every bad input is named by line, with the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillyard.directory.importer import ImportProblems, Snapshot, plan, read_records
from skillyard.directory.paths import Department

CSV = """kind,id,name,parent,emp_no,department,title,tags,channel,account
department,hq,总部,,,,,,,
department,sales,销售中心,hq,,,,,,
person,,Ada,,E1,sales,P7,a;b,,
account,,,,E1,,,,telegram,42
"""


def write(tmp_path: Path, text: str | bytes, name: str = "dir.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_a_mixed_csv_reads_every_kind(tmp_path):
    records = read_records(write(tmp_path, CSV))
    assert [r.kind for r in records] == ["department", "department", "person", "account"]
    person = records[2].values
    assert person["tags"] == ["a", "b"] and person["active"] is True and person["title"] == "P7"
    changes = plan(records, Snapshot())
    assert changes.counts() == {"add": 4, "update": 0, "same": 0}


def test_json_lines_and_an_update_of_one_field(tmp_path):
    lines = [
        {"kind": "person", "emp_no": "E1", "name": "Ada", "department": "sales", "title": "P8", "tags": ["x"]},
    ]
    path = write(tmp_path, "\n".join(json.dumps(x) for x in lines), "people.jsonl")
    current = Snapshot(
        {"sales": Department("销售中心")},
        {
            "E1": {
                "emp_no": "E1",
                "name": "Ada",
                "department": "sales",
                "position": "",
                "title": "P7",
                "phone": "",
                "email": "",
                "tags": ["x"],
                "actor_key": "",
                "actor_id": "",
                "active": True,
            }
        },
    )
    changes = plan(read_records(path), current)
    assert [(c.action, c.fields) for c in changes.changes] == [("update", ("title",))]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("kind,id,name,colour\ndepartment,a,A,red\n", "line 1: unknown column(s) 'colour'"),
        ("id,name\na,A\n", "line 2: no kind"),
        ("kind,id,name\nteam,a,A\n", "line 2: kind 'team' is not department, person or account"),
        ("kind,id,name\ndepartment,a,\n", "line 2: department without name"),
        ("kind,emp_no,name\nperson,E1,A\nperson,E1,B\n", "line 3: person 'E1' again (first on line 2)"),
        ("kind,id,name,parent\ndepartment,a,A,zz\n", "parent 'zz', which is neither in the file nor in the directory"),
        ("kind,id,name,parent\ndepartment,a,A,b\ndepartment,b,B,a\n", "departments a → b → a form a cycle"),
        ("kind,id,name,parent\ndepartment,a,A,a\n", "departments a → a form a cycle"),
        ("kind,channel,account,emp_no\naccount,tg,1,NOBODY\n", "names person 'NOBODY', who is neither"),
        ("kind,emp_no,name,active\nperson,E1,A,perhaps\n", "person active: 'perhaps' is not true or false"),
        ("kind,id,name\ndepartment,a,A,extra\n", "line 2: 4 cells for 3 columns"),
        ('{"kind": "person", "emp_no": "E1", "name": "A", "salary": 1}\n', "person has no field(s) 'salary'"),
        ('{"kind": "person", "emp_no": "E1", "name": ["A"]}\n', "person name: a list; write a text"),
        ("{not json}\n", "line 1: not JSON"),
        ("[1, 2]\n", "line 1: a JSON list, not an object"),
        ('{"kind": "person", "emp_no": "E1", "name": "A", "name": "B"}\n', "'name' given twice in one object"),
        ('{"kind": "person", "emp_no": "E1", "name": NaN}\n', "NaN is not a value the directory takes"),
        ('{"kind": false, "emp_no": "E1", "name": "A"}\n', "kind False is not department, person or account"),
        ("kind,emp_no,name,name\nperson,E1,A,B\n", "line 1: column(s) 'name' twice"),
        ("[" * 100_000 + "]" * 100_000 + "\n", "line 1: JSON nested too deeply"),
        ("", "line 1: no header row"),
    ],
)
def test_bad_files_are_reported_by_line(tmp_path, text, needle):
    name = "x.jsonl" if text.lstrip().startswith(("{", "[")) else "x.csv"
    with pytest.raises(ImportProblems) as caught:
        plan(read_records(write(tmp_path, text, name)), Snapshot())
    assert any(needle in p for p in caught.value.problems), caught.value.problems


def test_bad_encoding_names_the_line(tmp_path):
    path = write(tmp_path, "kind,id,name\ndepartment,a,\xe9t\xe9\n".encode("latin-1"))
    with pytest.raises(ImportProblems, match=r"line 2: not UTF-8 text .* save the file as UTF-8"):
        read_records(path)


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    text = "kind,emp_no,name,active\nperson,,A,\nperson,E2,B,maybe\nwho,E3,C,\n"
    with pytest.raises(ImportProblems) as caught:
        read_records(write(tmp_path, text))
    assert len(caught.value.problems) == 3


def test_a_parent_already_in_the_directory_is_fine(tmp_path):
    records = read_records(write(tmp_path, "kind,id,name,parent\ndepartment,s1,一部,sales\n"))
    assert plan(records, Snapshot({"sales": Department("销售中心")})).counts()["add"] == 1


def test_a_person_in_an_unknown_department_is_a_warning(tmp_path):
    records = read_records(write(tmp_path, "kind,emp_no,name,department\nperson,E1,A,外包部\n"))
    changes = plan(records, Snapshot())
    assert changes.warnings and "their path is /外包部/" in changes.warnings[0]


def test_kind_option_for_a_file_of_one_kind(tmp_path):
    records = read_records(write(tmp_path, "emp_no,name\nE1,A\n"), kind="person")
    assert records[0].kind == "person" and records[0].values["emp_no"] == "E1"


def test_a_line_separator_inside_a_json_string_is_one_line(tmp_path):
    lines = [
        json.dumps({"kind": "person", "emp_no": "E1", "name": "Jo\u2028hn"}, ensure_ascii=False),
        json.dumps({"kind": "person", "emp_no": "E2", "name": "B"}),
        "{broken",
    ]
    with pytest.raises(ImportProblems) as caught:
        read_records(write(tmp_path, "\n".join(lines), "p.jsonl"))
    assert [p.split(":")[0] for p in caught.value.problems] == ["line 3"]
