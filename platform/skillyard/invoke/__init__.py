"""Running one skill: the pipeline and its steps."""
