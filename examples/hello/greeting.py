"""A helper module next to handler.py; the skill imports it as a plain sibling module."""


def greet(who: str, channel: str) -> str:
    where = f" (via {channel})" if channel else ""
    return f"Hello, {who}!{where}"
