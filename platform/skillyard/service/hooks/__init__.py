"""Inbound chat messages: ``POST /hooks/{channel}/{binding}`` in each channel's own webhook format, verified with
the binding's role's secrets, de-duplicated, acknowledged at once and processed as a queued job."""
