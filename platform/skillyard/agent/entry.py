"""The agent runtime's entry points: an agent folder, an agent stored in the database, or a folder of agents behind
a router, each bound to a model (``SkillYard.agent`` / ``agent_from_db`` / ``agents`` call them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loader import LoadedAgent, load_agent
from .models import model_from_spec, stored_spec
from .router import AgentRouter, load_agents
from .runner import Agent, AgentError
from .settings import AgentSettings
from .stored import load_stored_agent

if TYPE_CHECKING:
    from ..yard import SkillYard


async def bind_model(yard: SkillYard, loaded: LoadedAgent, settings: AgentSettings, model: Any) -> Agent:
    """Check a loaded agent (ACTIVE, with a usable skill) and bind it to ``model`` (a ChatModel or a spec; without
    one, the settings' ``[agent.model] spec``). Business tools of MCP servers never fetched are fetched first, so
    the nodes are offered them (docs/mcp.md)."""
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
    if yard.mcp.servers:
        await yard.mcp.fill_names([name for skill in loaded.skills.values() for name in skill.tool_names])
    if isinstance(model, str):
        return Agent(yard, loaded, model_from_spec(model, settings), settings, model_spec=stored_spec(model))
    return Agent(yard, loaded, model, settings)


async def open_agent(yard: SkillYard, agent_dir: str | os.PathLike[str], *, model: Any = None) -> Agent:
    """Load a contract-driven agent (docs/agents.md) and bind it to a model.

    ``model`` is a ChatModel, or a spec (``script:FILE.yaml`` / ``openai:MODEL``); without one, the settings'
    ``[agent.model] spec`` (or ``SKILLYARD_MODEL``). Settings come from ``SKILLYARD_HOME/settings.toml`` and
    the environment. Skills that fail to load are dropped (see
    ``agent.loaded.errors``); an agent with no usable skill is an error.
    """
    settings = AgentSettings.load(yard.settings.home)
    loaded = await load_agent(yard, Path(agent_dir), settings)
    return await bind_model(yard, loaded, settings, model)


async def open_stored_agent(yard: SkillYard, agent_code: str, *, model: Any = None) -> Agent:
    """Load the agent ``agent_code`` stored in the database (``skillyard agent import``) and bind it to a model."""
    if not isinstance(agent_code, str) or not agent_code.strip():
        raise AgentError("the agent code must be non-empty text, e.g. 'cms'")
    settings = AgentSettings.load(yard.settings.home)
    loaded = await load_stored_agent(yard, agent_code.strip(), settings)
    if loaded is None:
        raise AgentError(
            f"no ACTIVE agent {agent_code!r} in the database; store it with `skillyard agent import AGENT_DIR`"
        )
    return await bind_model(yard, loaded, settings, model)


async def open_router(yard: SkillYard, agents_dir: str | os.PathLike[str], *, model: Any = None) -> AgentRouter:
    """Load every agent folder under ``agents_dir`` behind a router (§1.2)."""
    settings = AgentSettings.load(yard.settings.home)
    loaded, problems = await load_agents(yard, Path(agents_dir), settings)
    agents = {code: await bind_model(yard, agent, settings, model) for code, agent in loaded.items()}
    return AgentRouter(yard, agents, problems)


async def agent_event(
    yard: SkillYard, name: str, key: str, payload: Any, *, org_id: str, detach: bool, wait: bool
) -> dict[str, Any]:
    """``SkillYard.agent_event``: deliver an external event to the waiting nodes of an org (events.py)."""
    from .events import publish

    return await publish(yard, name, key, payload, org_id=org_id, detach=detach, wait=wait)
