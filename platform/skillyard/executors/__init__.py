"""One executor per exec type; each module is a default plugin registered through register_exec_types."""
