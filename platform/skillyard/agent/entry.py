"""The agent runtime's entry point: load an agent folder and bind it to a model (``SkillYard.agent`` calls it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loader import load_agent
from .models import model_from_spec, stored_spec
from .runner import Agent, AgentError
from .settings import AgentSettings

if TYPE_CHECKING:
    from ..yard import SkillYard


async def open_agent(yard: SkillYard, agent_dir: str | os.PathLike[str], *, model: Any = None) -> Agent:
    """Load a contract-driven agent (docs/agents.md) and bind it to a model.

    ``model`` is a ChatModel, or a spec (``script:FILE.yaml`` / ``openai:MODEL``); without one, the settings'
    ``[agent.model] spec`` (or ``SKILLYARD_MODEL``). Settings come from ``SKILLYARD_HOME/settings.toml`` and
    the environment. Skills that fail to load are dropped (see
    ``agent.loaded.errors``); an agent with no usable skill is an error.
    """
    settings = AgentSettings.load(yard.settings.home)
    loaded = await load_agent(yard, Path(agent_dir), settings)
    if not loaded.profile.active:  # §1.1: only ACTIVE agents load
        raise AgentError(
            f"agent {loaded.profile.agent_code!r} has status {loaded.profile.status!r} and does not load; set "
            "status: ACTIVE in its AGENT.md to use it"
        )
    if not loaded.skills:
        problems = "; ".join(str(e) for e in loaded.errors) or "it names no contract skill"
        raise AgentError(f"agent {loaded.profile.agent_code!r} has no usable skill: {problems}")
    model = model if model is not None else settings.model.spec
    if model is None:
        raise AgentError(
            "no model: pass a spec such as 'script:turns.yaml' / 'openai:gpt-4o-mini' (--model on the command "
            "line, model= in Python, where a ChatModel works too), or set [agent.model] spec in settings.toml "
            "(or SKILLYARD_MODEL)"
        )
    if not isinstance(model, str) and not callable(getattr(model, "complete", None)):
        raise AgentError(
            f"model must be a spec such as 'script:turns.yaml' / 'openai:gpt-4o-mini' or a ChatModel (an object "
            f"with an async complete(messages, tools, state) method), not {type(model).__name__}"
        )
    if isinstance(model, str):
        return Agent(yard, loaded, model_from_spec(model, settings), settings, model_spec=stored_spec(model))
    return Agent(yard, loaded, model, settings)
