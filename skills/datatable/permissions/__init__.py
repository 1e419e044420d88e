"""Permissions (spec §7.2): grants, the access decision with row scope own, and row-level security."""
