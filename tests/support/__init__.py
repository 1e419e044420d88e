"""Scaffolding shared by the test folders: probes, local servers, the datatable scaffolding, the repository's paths."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DOCS = REPO / "docs"
FIXTURES = REPO / "tests" / "fixtures"
