"""Chat models for the agent runtime: the ``ChatModel`` protocol, model specs, and the two built-in providers
(the scripted model and an OpenAI-compatible client), each a default plugin of ``register_models``."""

from __future__ import annotations

from .base import ChatModel, ModelError, ModelReply, ScriptError, ScriptExhausted, ToolCall
from .openai import OpenAIChatModel
from .scripted import SCRIPT_STATE_KEY, ScriptedModel
from .specs import model_from_spec, spec_forms, stored_spec

__all__ = [
    "SCRIPT_STATE_KEY",
    "ChatModel",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "ToolCall",
    "model_from_spec",
    "spec_forms",
    "stored_spec",
]
