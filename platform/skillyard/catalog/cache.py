"""Parsed skills kept between processes under ``SKILLYARD_HOME/cache/catalog``: a repeated ``skillyard list`` of an
unchanged tree stats the files instead of parsing them again.

One file per root holds every skill folder of that root with the signature it was built from (path, size,
``mtime_ns`` and inode of each file that shapes the skill). The file also records a fingerprint of the code that
builds skills, so an upgrade or an edit of the catalog reads everything afresh. The cache is the host's own
state, beside its keys and database; a file that cannot be read, or was written by other code, is ignored.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .skill import Skill

#: Bumped when what a cache file holds changes shape.
FORMAT = 1
Signature = tuple[tuple[str, int, int, int], ...]
#: (the folder's signature, that of files it refers to outside its top level, the skill built from them)
Cached = tuple[Signature, Signature, "Skill"]


def _code_fingerprint() -> str:
    """The catalog package's files as they are now: any change to how skills are built invalidates the cache."""
    here = Path(__file__).parent
    parts = [str(FORMAT)]
    for entry in sorted(os.scandir(here), key=lambda e: e.name):
        if entry.name.endswith(".py"):
            st = entry.stat()
            parts.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.blake2b("|".join(parts).encode(), digest_size=16).hexdigest()


class ManifestCache:
    """Read and write the cached skills of each root; every failure means "no cache", never an error."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = _code_fingerprint()
        return self._fingerprint

    def _file(self, root: Path) -> Path:
        return self.folder / (hashlib.blake2b(str(root).encode(), digest_size=12).hexdigest() + ".pickle")

    def load(self, root: Path) -> dict[Path, Cached]:
        """The cached skills of one root, by folder; empty when there is no usable cache file."""
        try:
            with self._file(root).open("rb") as fh:
                data: Any = pickle.load(fh)
        except Exception:  # missing, truncated, written by other code, or a full disk: work without the cache
            return {}
        if not (isinstance(data, tuple) and len(data) == 3 and data[0] == self.fingerprint and data[1] == str(root)):
            return {}
        folders: dict[Path, Cached] = data[2]
        for _, _, skill in folders.values():
            skill.tool_names.clear()  # catalog state of the process that wrote it
        return folders

    def save(self, root: Path, folders: dict[Path, Cached]) -> None:
        """Replace one root's cache file atomically; a read-only home only loses the speed-up."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".catalog-", suffix=".part")
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump((self.fingerprint, str(root), folders), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self._file(root))
        except Exception:  # missing, truncated, written by other code, or a full disk: work without the cache
            Path(tmp).unlink(missing_ok=True)
