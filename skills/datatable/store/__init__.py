"""The storage model (spec §7.1): the names the skill claims, the org schema, its metadata and the connection."""
