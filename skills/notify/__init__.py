"""The built-in notify skill: one-way pushes through Apprise to admin-set aliases (or, where allowed, raw URLs)."""
