"""actor_department_path from the tree (directory/paths.py), every rule of spec §4.5."""

from __future__ import annotations

from skillyard.directory.paths import Department, path_for

TREE = {
    "hq": Department("总部"),
    "sales": Department("销售中心", "hq"),
    "s1": Department("销售一部", "sales"),
    "old": Department("旧部门", "hq", disabled=True),
    "team": Department("小组", "old"),
}


def test_top_first_own_last_without_the_org_name():
    assert path_for("s1", TREE) == ("销售一部", "/总部/销售中心/销售一部/")
    assert path_for("hq", TREE) == ("总部", "/总部/")


def test_disabled_departments_stay_in_the_path():
    assert path_for("team", TREE) == ("小组", "/总部/旧部门/小组/")


def test_a_department_missing_from_the_tree_is_one_segment():
    assert path_for("外包部", TREE) == ("外包部", "/外包部/")


def test_no_department_is_empty():
    assert path_for("", TREE) == ("", "")


def test_a_parent_missing_from_the_tree_ends_the_chain():
    tree = {"a": Department("A", "gone")}
    assert path_for("a", tree) == ("A", "/A/")


def test_a_cycle_is_cut_not_looped():
    tree = {"a": Department("A", "b"), "b": Department("B", "c"), "c": Department("C", "a")}
    assert path_for("a", tree) == ("A", "/C/B/A/")
    assert path_for("x", {"x": Department("X", "x")}) == ("X", "/X/")


def test_a_25_deep_tree_keeps_the_20_nearest_levels():
    tree = {f"d{i}": Department(f"L{i}", f"d{i - 1}" if i else "") for i in range(25)}
    own, path = path_for("d24", tree)
    segments = [s for s in path.split("/") if s]
    assert own == "L24" and len(segments) == 20
    assert segments[0] == "L5" and segments[-1] == "L24"  # cut from the top


def test_matching_needs_both_slashes():
    tree = {"a": Department("销售中心部"), "b": Department("x", "a")}
    path = path_for("b", tree)[1]
    assert "/销售中心/" not in path and "销售中心" in path
