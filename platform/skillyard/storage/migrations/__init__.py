"""Alembic migration environment for the platform tables."""
