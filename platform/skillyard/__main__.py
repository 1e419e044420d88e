"""``python -m skillyard`` runs the CLI."""

from .cli import main

main()
