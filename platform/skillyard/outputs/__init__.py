"""What happens to a skill result: safe file output, URL materialization, artifacts."""
