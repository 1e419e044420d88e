"""The built-in datatable skill: per-organisation tables in PostgreSQL, with admin grants and a SQL channel."""
