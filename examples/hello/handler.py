"""hello: an in-process async skill that uses a helper module from its own folder."""

from greeting import greet

INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "who": {"type": "string", "description": 'Name of the person to greet, e.g. "Ada"'},
    },
    "required": ["who"],
}


async def execute(input_data, runtime_context):
    # Fixed context fields are always present (empty when unknown), so no .get() is needed.
    return {
        "ok": True,
        "greeting": greet(input_data["who"], runtime_context["channel"]),
        "triggered_at_str": runtime_context["triggered_at_str"],
    }
