"""Channels: where results and messages are delivered (web, chat apps, webhooks), registered by plugins."""
