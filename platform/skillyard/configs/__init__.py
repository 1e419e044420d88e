"""Per-role skill configs: stored in PostgreSQL, secrets encrypted, cached per (role, skill)."""
