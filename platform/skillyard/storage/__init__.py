"""Async SQLAlchemy engine and sessions, the embedded PostgreSQL, platform tables and their migrations."""
