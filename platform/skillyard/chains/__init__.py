"""Scheduled multi-step chains (§9.3) on procrastinate: chain files, references, the empty-result guard, step
jobs with exactly-once completion, schedules with time zones, and the workers that run them (docs/chains.md)."""
