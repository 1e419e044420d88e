"""Identity helpers (§4.5, §4.6, invoke/identity.py): department paths and the pseudo-organisation."""

from __future__ import annotations

import pytest

from skillyard import current_department, department_path, identity_org_id


def test_department_path_helper():
    assert department_path("") == ""
    assert department_path("/a/b/") == "/a/b/"
    assert department_path(["a", "b"]) == "/a/b/"
    deep = department_path("/" + "/".join(f"d{i}" for i in range(25)) + "/")
    assert deep.count("/") == 21 and deep.startswith("/d5/") and deep.endswith("/d24/")


def test_identity_org_id_helper():
    assert identity_org_id({"org_id": " o1 ", "role_id": "r"}) == "o1"
    assert identity_org_id({"org_id": "", "role_id": "r9"}) == "r_r9"


@pytest.mark.spec("§4.5")
def test_department_path_depth_limit_and_empty_values():
    """Spec §4.5: '深度上限 20 层，超出从顶端截断'; '空值 ""'."""
    segs = [f"d{i}" for i in range(25)]
    out = department_path("/" + "/".join(segs) + "/")
    assert out == "/" + "/".join(segs[-20:]) + "/"
    assert department_path("") == "" and department_path("///") == ""
    assert department_path(["a", "b"]) == "/a/b/"
    assert current_department("/a/b/") == "b" and current_department("") == ""


@pytest.mark.spec("§4.6")
def test_identity_org_id_pseudo_organisation():
    """Issue: 'the pseudo-organisation `r_<role_id>` for identity lookups when `org_id` is empty (§4.6), exposed as a
    documented helper'."""
    assert identity_org_id({"org_id": "", "role_id": "r1"}) == "r_r1"
    assert identity_org_id({"org_id": "  ", "role_id": "r1"}) == "r_r1"
    assert identity_org_id({"org_id": " acme ", "role_id": "r1"}) == "acme"
    assert identity_org_id({"role_id": "r2"}) == "r_r2"
