"""Model specs (``--model``, ``[agent.model] spec``): ``PREFIX:REST``, each prefix a provider registered through
the ``register_models`` hook (the scripted and OpenAI-compatible models are default plugins)."""

from __future__ import annotations

from ...plugins import load_plugins
from ...registry import ModelProvider, collect_models
from ..settings import AgentSettings, ModelSettings
from .base import ChatModel, ModelError


def providers() -> dict[str, ModelProvider]:
    """Every registered model provider by prefix (duplicates fail naming both plugins)."""
    return collect_models(load_plugins())


def spec_forms(known: dict[str, ModelProvider] | None = None) -> str:
    """The accepted spec forms, for error messages: ``script:FILE.yaml (…) or openai:MODEL (…)``."""
    helps = [p.help or f"{p.prefix}:…" for p in (known or providers()).values()]
    return " or ".join(helps) if len(helps) < 3 else ", ".join(helps[:-1]) + " or " + helps[-1]


def _split(spec: str) -> tuple[str, str]:
    kind, sep, rest = spec.strip().partition(":")
    return (kind, rest.strip()) if sep else ("", "")


def stored_spec(spec: str) -> str:
    """A model spec as a session stores it (a provider may normalize it, e.g. a script path made absolute)."""
    kind, rest = _split(spec)
    provider = providers().get(kind)
    if provider is not None and rest and provider.stored is not None:
        return str(provider.stored(rest))
    return spec


def model_from_spec(spec: str, settings: AgentSettings | ModelSettings | None = None) -> ChatModel:
    """Build the model a spec names. ``settings`` (``AgentSettings.model``; :meth:`AgentSettings.load` when None,
    read only if the provider asks) configures providers such as ``openai:``. A bad spec is a :class:`ModelError`
    naming the accepted forms."""
    known = providers()
    kind, rest = _split(spec)
    provider = known.get(kind)
    if provider is None or not rest:
        raise ModelError(f"unknown model spec {spec!r}; use {spec_forms(known)}")

    def model_settings() -> ModelSettings:
        loaded = settings if settings is not None else AgentSettings.load()
        return loaded.model if isinstance(loaded, AgentSettings) else loaded

    model: ChatModel = provider.factory(rest, model_settings)
    return model
