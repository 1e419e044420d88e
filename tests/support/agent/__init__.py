"""Shared scaffolding of the agent runtime tests (one module per subject, as tests/agent/ is laid out)."""
