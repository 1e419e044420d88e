"""Test helper: import the built-in datatable skill's modules as one synthetic package.

The skill ships as an ordinary skill folder (skills/datatable/), not as an importable package, so tests load its
modules as submodules of ``datatable_skill``; relative imports between them resolve inside that folder.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PACKAGE = "datatable_skill"
FOLDER = Path(__file__).resolve().parents[2] / "skills" / "datatable"


def asyncpg_dsn(database_url: str) -> str:
    """The session's database URL as asyncpg wants it (no SQLAlchemy driver suffix)."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://")


def _package() -> ModuleType:
    package = sys.modules.get(PACKAGE)
    if package is None:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, FOLDER / "__init__.py", submodule_search_locations=[str(FOLDER)]
        )
        assert spec is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = package  # registered first so submodules (and relative imports) find it
        if (FOLDER / "__init__.py").is_file() and spec.loader is not None:
            spec.loader.exec_module(package)
    return package


def load_datatable_module(name: str) -> ModuleType:
    """Import skills/datatable/<name>.py as ``datatable_skill.<name>`` (once; later calls return the same module)."""
    _package()
    fullname = f"{PACKAGE}.{name}"
    module = sys.modules.get(fullname)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(fullname, FOLDER / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no module {name!r} in {FOLDER}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[fullname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(fullname, None)
        raise
    return module
