"""Inside the sandbox: an in-process Python skill of an untrusted root, called as the host would call it.

    python entry.py HANDLER_FILE ENTRY_FUNCTION

The input and the context come in ``SKILL_INPUT`` and ``SKILL_CONTEXT`` (no ``db``, ``db_factory`` or
``call_skill``: they cannot cross the boundary). The entry function gets ``()``, ``(input)`` or ``(input, ctx)`` by
its positional parameters; a coroutine is awaited. What it returns is printed as JSON on stdout, the one line the
host reads; what the skill itself prints goes to stderr. Only the standard library: nothing of skillyard is imported
inside the boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _arguments(fn: Callable[..., Any], data: object, ctx: object) -> tuple[object, ...]:
    try:
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in POSITIONAL]
    except (TypeError, ValueError):
        params = []
    return (data, ctx)[: min(len(params), 2)]


async def _settle(value: Awaitable[Any]) -> Any:
    return await value


def main() -> None:
    path, name = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(path))  # sibling helper modules import as they do in-process
    spec = importlib.util.spec_from_file_location("skillyard_sandboxed_handler", path)
    if spec is None or spec.loader is None:
        sys.exit(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    data = json.loads(os.environ.get("SKILL_INPUT") or "{}")
    ctx = json.loads(os.environ.get("SKILL_CONTEXT") or "{}")
    with contextlib.redirect_stdout(sys.stderr):
        spec.loader.exec_module(module)
        fn = getattr(module, name)
        result = fn(*_arguments(fn, data, ctx))
        if inspect.isawaitable(result):
            result = asyncio.run(_settle(result))
    print(json.dumps(result, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main()
