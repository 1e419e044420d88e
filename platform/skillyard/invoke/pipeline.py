"""The run pipeline: the only place that knows the order of the steps of a run."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import envelope as env_mod
from ..catalog.requires import check_requirements
from ..catalog.skill import SUBPROCESS_TYPES, Skill
from ..credentials import Masker, current_masker, masked_logger, secret_config
from ..errors import InvalidInput, UnknownExecType, UnknownSkill
from ..plugins import await_me_maybe
from .background import acknowledgement, background_job, runs_in_background
from .budget import DEFAULT_SESSION, Turn
from .calls import make_call_skill
from .context import base_context, credential_value, effective_configs, inject_configs
from .inputs import SUBCOMMAND, prepare_input
from .paths import (
    PATH_FIELDS,
    InputPathError,
    apply_raw_prompt,
    normalize_paths,
    refuse_home_paths,
    substitute_refs,
)
from .policy import DEFAULT_POLICY, RunPolicy
from .run import Run, check_session_id

if TYPE_CHECKING:
    from ..yard import SkillYard

log = masked_logger("skillyard.run")


class PluginFailure(Exception):
    """A plugin hook failed while a run was prepared: the run is refused with this message."""


def _plugin_failure(skill: str, what: str, exc: Exception) -> str:
    """The message of a run a plugin's bug stopped (the traceback goes to the log, where the caller logged it)."""
    return (
        f"skill {skill!r} {what} failed ({exc.__class__.__name__}: {exc}); fix or remove the plugin "
        "(skillyard plugins lists them)"
    )


def _gate(yard: SkillYard, skill: Skill, configs: Mapping[str, Any]) -> dict[str, Any] | None:
    """§2.2: skills whose requirements fail are not run; the envelope names what is missing."""
    if skill.error:
        return env_mod.failure(
            skill.name,
            f"skill {skill.name!r} cannot run: {skill.error}",
            error_type="config",
            non_retriable=True,
        )
    if skill.skill_type != "handler":
        return env_mod.failure(
            skill.name,
            f"skill {skill.name!r} is a {skill.skill_type} skill (no code to run); "
            "skill_md skills run through the agent runtime with their SKILL.md as the manual",
            error_type="config",
            non_retriable=True,
        )
    try:
        yard.registries.executor(skill.exec.type or "", f"skill {skill.name!r} ({skill.manifest.path})")
    except UnknownExecType as exc:
        return env_mod.failure(skill.name, str(exc), error_type="config", non_retriable=True)
    if not skill.requires.gates:
        return None
    gate = check_requirements(
        skill.requires,
        lambda n: credential_value(n, configs) is not None,
    )
    if not gate.os_supported:
        return env_mod.failure(
            skill.name,
            f"skill {skill.name!r} supports only {', '.join(skill.requires.os)}",
            error_type="config",
            non_retriable=True,
            os_supported=False,
        )
    if gate.missing_env:
        names = ", ".join(gate.missing_env)
        return env_mod.failure(
            skill.name,
            f"skill {skill.name!r} needs configuration: {names} not set. Set it with "
            f"'skillyard config set {skill.name} NAME=VALUE' (per role) or in the environment",
            needs_config=list(gate.missing_env),
            error_type="config",
            non_retriable=True,
        )
    if gate.missing_bins:
        names = ", ".join(gate.missing_bins)
        return env_mod.failure(
            skill.name,
            f"skill {skill.name!r} needs programs that are not on PATH: {names}; install them",
            needs_config=[],
            missing_bins=list(gate.missing_bins),
            error_type="config",
            non_retriable=True,
        )
    return None


def _run_masker(skill: Skill, run_input: Mapping[str, Any], ctx: Mapping[str, Any]) -> Masker | None:
    """The run's own credentials, to mask wherever they could show: its secret configs (the wider config rule and
    the keys the skill declares), its credential parameters and its declared credential variables."""
    configs = ctx["skill_args"] or {}
    values = [str(v) for k, v in configs.items() if v and secret_config(k, skill.secret_configs)]
    values += [str(run_input[n]) for n in skill.schema.secret_params if run_input.get(n)]
    for name in skill.requires.credential_env:
        value = credential_value(name, configs)
        if value:
            values.append(value)
    return Masker.of(values) if values else None


def _cancelled_from_outside() -> bool:
    """Whether the running task was asked to stop (``Task.cancel``), rather than a skill raising CancelledError."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _crashed(skill: Skill, exc: BaseException) -> dict[str, Any]:
    """An exception inside a skill: the traceback to the log (masked by its filter), a failure envelope back."""
    trace = "".join(traceback.format_exception(exc))
    log.error("skill %r raised %s\n%s", skill.name, exc.__class__.__name__, trace)
    return env_mod.from_exception(exc, skill.name)


def _wall_clock(yard: SkillYard, skill: Skill, background: bool = False) -> float | None:
    """The run's time limit in seconds; None: none. Only runs of skills that do not declare ``async`` have the
    default wall clock (§8); a background run keeps the skill's own ``exec.timeout`` if it sets one."""
    if skill.exec.timeout:
        return skill.exec.timeout
    if background:
        return None
    if skill.exec.type in SUBPROCESS_TYPES or skill.exec.python_cli:
        return yard.settings.subprocess_timeout
    return yard.settings.wall_clock


async def _context(
    yard: SkillYard,
    skill: Skill,
    given: Mapping[str, Any],
    configs: Mapping[str, Any],
    depth: int,
    turn: Turn | None,
    live: bool = True,
) -> dict[str, Any]:
    # The directory fills the fields of the person the run names before the context is typed and an admin's
    # fill-in is cleared (§4.4 applies after filling; §4.8: the directory is the source of truth).
    ctx = base_context(await yard.directory.fill(given))
    session = ctx["session_id"] or DEFAULT_SESSION
    check_session_id(session)
    ctx["workspace_dir"] = yard.workspace(session, ctx["workspace_dir"] or None)
    if not ctx["attachments"]:  # a run without a session has those of `default`, where its artifacts go
        ctx["attachments"] = await yard.attachments_for(session, turn)
    if live and ctx["channel_registry"] is None:  # every line but a background run itself (§8): send_message's way
        ctx["channel_registry"] = yard.channels
    if depth == 0 and live and "abort_signal" not in given:
        ctx["abort_signal"] = asyncio.Event()  # always an Event to poll; the caller passes its own to stop a run
    inject_configs(ctx, skill.name, configs)
    if skill.code.uses_db:
        ctx["db_factory"] = await yard.database.session_factory()
    if yard.registries.has_extra_context:
        try:
            for extra in yard.pm.hook.extra_context(skill=skill, context=ctx):
                values = await await_me_maybe(extra)
                for key, value in (values or {}).items():
                    ctx.setdefault(key, value)
        except Exception as exc:  # a plugin's bug: the run is refused, the traceback goes to the log
            log.exception("extra_context hook failed for %s", skill.name)
            message = _plugin_failure(skill.name, "did not run: a plugin's extra_context hook", exc)
            raise PluginFailure(message) from None
    ctx["_call_depth"] = depth
    return ctx


async def _mcp_first_use(yard: SkillYard, name: str) -> dict[str, Any] | None:
    """``<server>__<tool>`` of a configured MCP server never fetched: fetch its tool list (docs/mcp.md). A server
    that cannot be started or reached is the run's ``unreachable`` envelope (TOOL_UNREACHABLE for an agent); any
    other failure leaves the name unknown, and is logged."""
    from ..mcp.client import McpUnreachable
    from ..mcp.results import unreachable

    try:
        await yard.mcp.fill_for(name)
    except McpUnreachable as exc:
        return unreachable(name, f"{exc} (its tools were never fetched, so {name!r} is not known yet)")
    except Exception as exc:
        log.warning("could not fetch the tools of the MCP server of %r: %s", name, exc)
    return None


def _given(context: Any, turn: Any) -> dict[str, Any]:
    """The runtime_context fields a caller gave: the turn's (session, channel, its context), then ``context``."""
    if context is not None and not isinstance(context, Mapping):
        raise InvalidInput(f"context must be a mapping such as {{'session_id': 's1'}}, not {type(context).__name__}")
    if turn is None:
        return dict(context) if context else {}
    if not isinstance(turn, Turn):
        raise InvalidInput(f"turn must be a Turn from yard.new_turn(...), not {type(turn).__name__}")
    return {"session_id": turn.session_id, "channel": turn.channel, **turn.context, **(context or {})}


def _apply_policy(given: dict[str, Any], policy: RunPolicy) -> dict[str, Any]:
    if not isinstance(policy, RunPolicy):
        raise InvalidInput(f"policy must be a skillyard.RunPolicy, not {type(policy).__name__}")
    if policy.chat_mode is not None:
        given["chat_mode"] = policy.chat_mode
    if policy.channel is not None:
        given["channel"] = policy.channel
    return given


async def execute(
    yard: SkillYard,
    name: str,
    input: Mapping[str, Any] | None,
    context: Mapping[str, Any] | None,
    turn: Turn | None = None,
    depth: int = 0,
    policy: RunPolicy = DEFAULT_POLICY,
) -> dict[str, Any]:
    """Run a skill by name, alias or tool name and return its normalized envelope. ``context`` holds the
    runtime_context fields the caller gives (a turn adds its own first); ``policy`` overrides some of them."""
    given = _given(context, turn)
    if policy is not DEFAULT_POLICY:
        given = _apply_policy(given, policy)
    if input is None:
        input = {}
    if not isinstance(input, Mapping):
        raise InvalidInput(f"the input of {name!r} must be a JSON object, not {type(input).__name__}")
    too_deep = env_mod.nesting_problem(input)  # before any step walks it recursively
    if too_deep:
        return env_mod.input_rejected(name, f"the input of {name!r} cannot be used: {too_deep}", "")
    resolved = yard.resolve(name)
    if resolved is None and isinstance(name, str) and "__" in name:
        unreachable = await _mcp_first_use(yard, name)
        if unreachable is not None:
            return unreachable
        resolved = yard.resolve(name)
    if resolved is None:
        if depth:
            return env_mod.failure(name, f"call_skill: no skill named {name!r}")
        raise UnknownSkill(name, list(yard.catalog.by_name))
    skill, sub = resolved
    if turn is not None and depth == 0:
        refused = turn.refuse(skill.name, input)
        if refused is not None:
            return refused
    role = str(given.get("role_id") or "")
    configs = effective_configs(skill.name, await yard.configs.get(role, skill.name), given)
    envelope = _gate(yard, skill, configs)
    if envelope is None:
        if depth:  # §9.1: a callee's own configs fill the fields its caller left out (before validation)
            props = skill.schema.full.get("properties") or {}
            input = {**{k: v for k, v in configs.items() if k in props}, **input}
        elif skill.force_raw_prompt and given.get("raw_input"):  # §3.4, never for delegated calls
            chosen = sub or input.get(SUBCOMMAND)  # a subcommand has its own schema
            schema = skill.schema.subcommands.get(chosen) if isinstance(chosen, str) else None
            input = apply_raw_prompt(dict(input), schema or skill.schema.exposed, str(given["raw_input"]))
        data, envelope = prepare_input(skill, sub, input, configs)
    if envelope is None:
        try:
            ctx = await _context(yard, skill, given, configs, depth, turn, live=not policy.detached)
        except PluginFailure as exc:
            return env_mod.failure(skill.name, str(exc), error_type="config", non_retriable=True)
        data, envelope = _place_files(yard, skill, data, ctx)
    if envelope is None:
        run = Run(yard, skill, sub, data, ctx, turn, depth, background=policy.detached, policy=policy)
        if depth == 0 and policy.background and runs_in_background(skill, ctx):
            job = background_job(name, input, run, configs)
            await yard.background.submit(job)
            return acknowledgement(skill.name, ctx["channel"], job.run_id)
        envelope = await finish_run(yard, run)
        if turn is not None and depth == 0:
            turn.record(skill.name, input, envelope)
            turn.display.add(envelope)
    return envelope


async def finish_run(yard: SkillYard, run: Run) -> dict[str, Any]:
    """Execute, post-process (top-level runs only, §9.1) and log one prepared run; the run's credentials are masked
    in its envelope (before and after the processors, which write offload files) and in its log lines."""
    masker = _run_masker(run.skill, run.input, run.context)
    if masker is None:
        return await _finish(yard, run)
    token = current_masker.set(masker)
    try:
        return env_mod.redact(await _finish(yard, run), masker)
    finally:
        current_masker.reset(token)


async def _finish(yard: SkillYard, run: Run) -> dict[str, Any]:
    envelope = env_mod.redact(await _execute(yard, run), current_masker.get())  # processors see it masked
    if run.depth == 0:
        for processor in yard.registries.processors:
            try:
                envelope = await await_me_maybe(processor.func(envelope, run))
            except Exception as exc:  # a processor's bug: no half-processed result, the traceback goes to the log
                log.exception("result processor %s failed for %s", processor.name, run.skill.name)
                what = f"ran, but the result processor {processor.name!r} on its result"
                message = _plugin_failure(run.skill.name, what, exc)
                envelope = env_mod.failure(run.skill.name, message, error_type="config", non_retriable=True)
                break
    yard.runlog.add(run, envelope)
    return envelope


def _place_files(
    yard: SkillYard, skill: Skill, data: dict[str, Any], ctx: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """§3.3: attachment references become paths, model-built paths land in the session workspace."""
    refs = {a["ref"]: a["local_path"] for a in ctx["attachments"] if a.get("ref") and a.get("local_path")}
    if refs:
        data = substitute_refs(data, refs)
    workspace = Path(ctx["workspace_dir"])
    try:
        if not PATH_FIELDS.isdisjoint(data):
            data = normalize_paths(data, workspace, yard.settings.workspaces_root)
        refuse_home_paths(data, workspace, yard.settings.home)
        return data, None
    except InputPathError as exc:
        return data, env_mod.input_rejected(skill.name, str(exc), exc.field)


async def _execute(yard: SkillYard, run: Run) -> dict[str, Any]:
    """Steps 5-6: the executor under the wall clock, then normalization; a live db session if the skill uses it."""
    skill, ctx = run.skill, run.context
    executor = yard.registries.executor(skill.exec.type or "", f"skill {skill.name!r} ({skill.manifest.path})")
    in_process = skill.exec.type == "PYTHON" and not skill.exec.python_cli
    if in_process:
        ctx["call_skill"] = make_call_skill(yard, skill.name, ctx, run.depth)
    session = None
    if in_process and skill.code.uses_db and skill.code.entry_is_async:
        session = await yard.database.session()
        ctx["db"] = session
    seconds = _wall_clock(yard, skill, run.background)
    deadline = asyncio.timeout(seconds)
    started = time.monotonic()
    try:
        async with deadline:
            raw = await executor.run(skill, run.input, ctx, yard=yard)
        elapsed = time.monotonic() - started
        if in_process and seconds is not None and elapsed > seconds:  # it never gave the loop a chance to stop it
            log.warning("skill %r blocked the event loop for %.1f s (wall clock %g s)", skill.name, elapsed, seconds)
            envelope = env_mod.blocked(skill.name, seconds, elapsed, sync=False)
        else:
            envelope = env_mod.normalize(raw, skill.name)
    except TimeoutError as exc:
        if deadline.expired():
            assert seconds is not None  # only a deadline that was set can expire
            log.warning("skill %r stopped by its wall clock (%g s)", skill.name, seconds)
            sync = in_process and not skill.code.entry_is_async
            envelope = (
                env_mod.blocked(skill.name, seconds, None, sync=True)
                if sync
                else env_mod.timed_out(skill.name, seconds)
            )
        else:  # a TimeoutError the skill raised itself
            envelope = _crashed(skill, exc)
    except asyncio.CancelledError as exc:
        if _cancelled_from_outside():
            raise  # the caller (or a shutdown) stopped the run: not the skill's failure
        envelope = _crashed(skill, exc)  # the skill raised CancelledError itself
    except Exception as exc:
        envelope = _crashed(skill, exc)
    finally:
        if session is not None:
            await session.close()
    return envelope
