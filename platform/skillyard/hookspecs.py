"""Every skillyard hook, declared once. The docstring of each spec is its reference documentation.

Hooks are synchronous (pluggy calls them in order); a hook that needs async work may return an awaitable or a
callable, and the host resolves it with :func:`skillyard.plugins.await_me_maybe`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    from .catalog.skill import Skill
    from .cli.group import SkillyardGroup
    from .yard import SkillYard

hookspec = pluggy.HookspecMarker("skillyard")
hookimpl = pluggy.HookimplMarker("skillyard")


@hookspec
def register_exec_types(register: Callable[..., None]) -> None:
    """Register executors, one per exec type.

    Call ``register(name, executor)`` where ``name`` is the exec type in upper case (``"PYTHON"``, ``"SHELL"``,
    ``"HTTP"`` …) and ``executor`` is an object with ``async def run(skill, input, ctx, *, yard) -> object``.
    The raw value it returns is normalized into an envelope by the host. Registering a name twice fails at
    startup with a message naming both plugins.

    :param register: the host's registration callback.
    """


@hookspec
def register_result_processors(register: Callable[..., None]) -> None:
    """Register result post-processors, each with an explicit order number.

    Call ``register(order, name, processor)``; ``processor`` is ``async def (envelope, run) -> dict`` (or sync)
    and returns the envelope to pass on. Processors run in ascending ``order`` on results of top-level runs only
    (never on ``call_skill`` results). Two processors with the same order fail at startup.

    :param register: the host's registration callback.
    """


@hookspec
def register_channels(register: Callable[..., None]) -> None:
    """Register channel adapters, one per channel name.

    Call ``register(name, channel)``. ``channel`` is a :class:`skillyard.channels.ChatChannel` (``send_text`` and
    ``send_image`` / ``send_video`` / ``send_audio`` / ``send_file`` per recipient, given an ``OutgoingMessage``
    and a ``SendContext`` with the role's ``send_message`` configs ``<channel>_<name>`` and a shared HTTP client;
    failures raise ``ChannelError`` with the envelope's ``error_type``), or an object with only
    ``async def send(recipient, text, attachments) -> None`` (the first protocol, adapted by the registry:
    ``recipient`` carries ``channel``, ``id``, ``session_id``, ``user_id``, ``actor_id`` and ``reply_to``,
    ``attachments`` the file items: ``local_path``, ``filename``, ``media``, ``ref``). ``send_message``, artifact
    delivery to ``reply_to`` and the results of async skills all go through it. The built-in channels (feishu,
    wecom, dingtalk, telegram, slack, webhook, web) are default plugins of this hook. A name registered twice
    fails at startup.

    :param register: the host's registration callback.
    """


@hookspec
def register_models(register: Callable[..., None]) -> None:
    """Add chat-model providers for agent model specs ``PREFIX:REST`` (``--model``, ``[agent.model] spec``).

    Call ``register(prefix, factory, help="prefix:FORM (what it is)", stored=None)``. ``factory(rest, settings)``
    returns a ChatModel (an object with ``async complete(messages, tools, state)``); ``settings()`` reads the
    ``[agent.model]`` settings, so call it only when the provider needs them. ``stored(rest)``, if given, is the
    spec a session keeps (e.g. a path made absolute). A prefix registered twice fails naming both plugins. The
    scripted (``script:``) and OpenAI-compatible (``openai:``) models are default plugins of this hook.

    :param register: the host's registration callback.
    """


@hookspec
def register_commands(cli: SkillyardGroup) -> None:
    """Add commands to the ``skillyard`` CLI, when the root group is first used (before click parses).

    Two forms: ``cli.add_command(command)`` (or ``@cli.command()``) adds a click command object;
    ``cli.add_lazy_command(name, "package.module:attribute", help="…")`` adds one by import path, imported only
    when that command runs, so ``skillyard --help`` stays fast. A name that exists already is refused with both
    plugins named.

    :param cli: the root click group (a :class:`click.Group`).
    """


@hookspec
def register_jobs(register: Callable[..., None]) -> None:
    """Register kinds of background job, run by the job queue's workers (``skillyard worker`` and each host's own).

    Call ``register(name, handler)``: ``name`` is a dotted task name unique across plugins (``"acme.sync"``),
    ``handler`` is ``async def handler(yard, **arguments) -> None``. Defer a job with
    ``await yard.background.defer(name, arguments)``; the arguments are stored as JSON in the queue, so they must
    hold no secrets (pass ids and read the rest from the database).
    """


@hookspec
def skill_roots(yard: SkillYard) -> list[str] | None:
    """Return extra folders to search for skills.

    Plugin roots rank below ``--skills-dir`` and ``SKILLYARD_SKILLS_PATH`` and above the built-in skills.

    :param yard: the host asking.
    """


@hookspec
def extra_context(skill: Skill, context: dict[str, Any]) -> dict[str, Any] | None:
    """Return extra ``runtime_context`` keys for a run (may be a dict, a callable or an awaitable).

    Keys already set by the platform are not overwritten; keys starting with ``_`` stay in-process.

    :param skill: the skill about to run.
    :param context: the context built so far (read-only by convention).
    """


@hookspec
def startup(yard: SkillYard) -> None:
    """Called once when a :class:`~skillyard.SkillYard` is opened (may return an awaitable).

    :param yard: the host being opened.
    """


@hookspec
def shutdown(yard: SkillYard) -> None:
    """Called once when a :class:`~skillyard.SkillYard` is closed (may return an awaitable).

    :param yard: the host being closed.
    """


@hookspec
def doctor_checks(yard: SkillYard) -> list[dict[str, Any]] | None:
    """Return health checks for ``skillyard doctor``: a list, or a callable or awaitable giving one, or None.

    Each check is a dict ``{"name": str, "status": "ok" | "warn" | "fail", "detail": str, "fix": str | None}``:
    ``name`` starts with the plugin's own prefix (``"acme.api"``), ``detail`` says in one line what was found and
    ``fix`` how to fix a ``warn`` or ``fail``. ``doctor`` exits non-zero only when some check fails. A hook that
    raises, or returns something of another shape, is reported as a failed check naming the plugin.

    :param yard: the opened host being checked (its database may be unreachable: check, do not assume).
    """
