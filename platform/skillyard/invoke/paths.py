"""File parameters (§3.3, §3.4): path fields pinned to the session's workspace, attachment references replaced
by their local paths, and the user's raw text for ``force_raw_prompt`` skills.

Pure functions over the input dict; the only I/O is looking at the filesystem (exists, symlinks).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "CODE_FIELDS",
    "OUTPUT_FIELDS",
    "PATH_FIELDS",
    "REF_ID",
    "InputPathError",
    "apply_raw_prompt",
    "normalize_paths",
    "substitute_refs",
]

#: Files the skill will create: always placed in the workspace, whatever directory the caller named.
OUTPUT_FIELDS = frozenset({"output", "dst", "output_path", "out"})
#: Top-level input fields whose string values (or lists of strings) are file paths.
PATH_FIELDS = (
    frozenset(
        {
            *("input", "output", "file", "path", "video", "audio", "image", "src", "dst"),
            *("inputs", "files", "videos", "images", "clips", "sources", "paths", "bgm", "input_file", "file_path"),
        }
    )
    | OUTPUT_FIELDS
)
#: Fields holding code or instructions, where attachment references are replaced inside the text.
CODE_FIELDS = frozenset({"code", "command", "script", "cmd", "instruction", "shell", "bash"})
#: An attachment reference id as the model sees it in the material list.
REF_ID = re.compile(r"\A(?:img|video|audio|file)_[0-9]+\Z")

# A reference inside text is a whole token: not part of a longer identifier (img_10, my_img_1x), a file name
# (img_1.png, .img_1) or a path component (out/img_1/). Non-ASCII letters are boundaries, so "把img_1转成" matches.
_REF_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-./\\])(?:img|video|audio|file)_[0-9]+(?![A-Za-z0-9_\-/\\]|\.[A-Za-z0-9])")
_REMOTE_PREFIXES = ("http://", "https://", "data:")
_SEPARATORS = re.compile(r"[/\\]")
_PATH_STARTS = frozenset("/~fF")  # absolute, home-relative and file: URLs
_BARE_IN_QUOTES = re.compile(r"[\"'\\$`]")  # characters that would end or be expanded inside quotes


class InputPathError(ValueError):
    """A path field the platform refuses to pass to a skill; the message says what was wrong and how to fix it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class _Workspace:
    """The session's workspace and the folder of all workspaces, in the caller's spelling and resolved."""

    folder: str
    real: str
    spellings: tuple[str, ...]
    root_real: str
    root_spellings: tuple[str, ...]

    @classmethod
    def of(cls, workspace: Path, workspaces_root: Path) -> _Workspace:
        folder, root = os.path.abspath(workspace), os.path.abspath(workspaces_root)
        real, root_real = os.path.realpath(folder), os.path.realpath(root)
        return cls(folder, real, (folder, real), root_real, (root, root_real))

    def file(self, name: str) -> str:
        """The workspace file called ``name``; a value that names no file ("..", "~", "/") means the workspace."""
        return self.folder if name in ("", ".", "..", "~") else os.path.join(self.folder, name)

    def check(self, field: str, value: str, path: str, *, links: bool = True) -> None:
        """Refuse another session's files and (with ``links``) symlinks that lead out of the workspace."""
        full = path if os.path.isabs(path) else os.path.join(self.folder, path)
        lexical, real = os.path.normpath(full), os.path.realpath(full)
        in_workspace = any(_inside(lexical, spelling) for spelling in self.spellings)
        lands_in_workspace = _inside(real, self.real)
        if (not in_workspace and any(_inside(lexical, root) for root in self.root_spellings)) or (
            not lands_in_workspace and _inside(real, self.root_real)
        ):
            raise InputPathError(
                field,
                f"input field {field!r} names {value!r}, which is in another session's workspace; "
                f"use a file in this session's workspace ({self.folder}) or attach the file again",
            )
        if not links:
            return
        # Symlinks matter only for paths that claim to be in the workspace: a plain absolute path elsewhere is
        # allowed anyway (§3.3), so refusing a link to it would protect nothing.
        if in_workspace and not lands_in_workspace:
            raise InputPathError(
                field,
                f"input field {field!r} names {value!r}, which is a symbolic link (or goes through one) that "
                "leads outside this session's workspace; give the real absolute path of the file instead, "
                "or copy the file into the workspace",
            )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder if folder.endswith(os.sep) else folder + os.sep)


def _file_url_path(field: str, value: str) -> str:
    """The local path a ``file:`` URL names (percent-decoded); a file on another host is refused."""
    try:
        parts = urlsplit(value)
    except ValueError as exc:  # e.g. an unbalanced "[" in the host
        raise InputPathError(field, f"input field {field!r} is not a valid file URL ({value!r}): {exc}") from exc
    if parts.netloc not in ("", "localhost"):
        raise InputPathError(
            field,
            f"input field {field!r} is the URL {value!r}, which names a file on the host {parts.netloc!r}; "
            "give a local path or a file:///absolute/path URL",
        )
    return unquote(parts.path)


def _normalize(field: str, value: str, workspace: _Workspace) -> str:
    """One path value, following §3.3 (see ``normalize_paths``)."""
    if not value.strip() or value[:8].lower().startswith(_REMOTE_PREFIXES):
        return value
    path = _file_url_path(field, value) if value[:5].lower() == "file:" else value
    if "\0" in path:
        raise InputPathError(
            field, f"input field {field!r} contains a NUL byte ({value!r}); give the file path without it"
        )
    parts = [part for part in _SEPARATORS.split(path) if part]
    name = parts[-1] if parts else ""
    if ".." in parts or path.startswith("~") or field in OUTPUT_FIELDS:
        if os.path.isabs(path) and ".." not in parts:  # rewriting would hide a wrong session, so say so
            workspace.check(field, value, path, links=False)
        result = workspace.file(name)
    elif os.path.isabs(path):
        result = path
    else:  # the model's directory prefix is dropped: skills would otherwise see <workspace>/<prefix>/<prefix>/x —
        # unless the value names a file that is there as written (imports/rows.json): that file is meant
        folders = [part for part in parts[:-1] if part != "."]
        exact = os.path.join(workspace.folder, *folders, name)
        candidate = workspace.file(name)
        if folders and os.path.isfile(exact):
            result = exact
        elif os.path.exists(candidate):
            result = candidate
        else:
            result = path
    workspace.check(field, value, result)
    return result


def normalize_paths(input: dict[str, Any], workspace: Path, workspaces_root: Path) -> dict[str, Any]:
    """Return a new input dict with path fields normalized (fields in PATH_FIELDS: strings, lists of strings, and
    the path fields of objects inside them, ``{"clips": [{"src": "a.mp4"}]}``).

    - Absolute paths are kept, unless they lie in another session's workspace (under ``workspaces_root`` but not
      in ``workspace``), lexically or once symlinks are resolved: refused.
    - Relative paths keep only their file name, in the workspace (``sub/a.png`` → ``<workspace>/a.png``) — unless
      the workspace holds the file at the path as written (``<workspace>/sub/a.png``): then that file.
    - A value with a ``..`` segment or a leading ``~`` always becomes ``<workspace>/<file name>``; output fields
      (OUTPUT_FIELDS) always do too, even when absolute, since they name files to create.
    - Other fields keep their original value when the workspace file does not exist (the skill's error is clearer).
    - A path in the workspace (every relative one included) that resolves outside it through a symlink is
      refused, as is any value with a NUL byte.
    - Lists of paths are de-duplicated after normalization, keeping the first occurrence.
    - Empty strings, non-strings, ``http(s)://`` and ``data:`` URLs are left alone. A ``file:`` URL is read as
      the local path it names and follows the rules above (so it cannot slip past them); the result is a path.

    Raises InputPathError naming the field.
    """
    place = _Workspace.of(workspace, workspaces_root)
    return _normalize_fields(input, place)


def _normalize_fields(values: dict[str, Any], place: _Workspace) -> dict[str, Any]:
    """The path fields of one object normalized; objects inside a path field's value (``{"clips": [{"src": …}]}``)
    have their own path fields normalized the same way. Objects under other fields are data, not paths (a
    datatable record's ``path`` column), and are left alone."""
    result = dict(values)
    for field, value in values.items():
        if field in PATH_FIELDS:
            result[field] = _normalize_value(field, value, place)
    return result


def _normalize_value(field: str, value: Any, place: _Workspace) -> Any:
    if isinstance(value, str):
        return _normalize(field, value, place)
    if isinstance(value, dict):
        return _normalize_fields(value, place)
    if isinstance(value, list):  # arrays of paths are de-duplicated once normalized (§3.3)
        return _dedup([_normalize_value(field, item, place) for item in value])
    return value


def _shell_word(path: str, text: str, start: int, end: int) -> str:
    """A path as it goes into code: POSIX slashes, single-quoted when the shell would split or expand it.

    Already inside quotes the author wrote (``open("img_1")``) the bare path goes in, as more quotes would
    become part of the string. If the path holds a quote, backslash, ``$`` or backtick, the author's quotes are
    closed around the shell-quoted path instead (``""'it'"'"'s'""``): right for sh, and for Python inside
    double quotes (adjacent literals join); inside Python single quotes, three quotes in a row would open a
    triple-quoted string, so Python code should double-quote references to such paths.
    """
    posix = PurePath(path).as_posix()
    before, after = text[start - 1 : start], text[end : end + 1]
    if before and before == after and before in "'\"":
        return posix if not _BARE_IN_QUOTES.search(posix) else before + shlex.quote(posix) + before
    return shlex.quote(posix)


def _dedup(items: list[Any]) -> list[Any]:
    seen: set[str] = set()
    kept = []
    for item in items:
        if isinstance(item, str):
            if item in seen:
                continue
            seen.add(item)
        kept.append(item)
    return kept


def substitute_refs(input: dict[str, Any], refs: Mapping[str, str]) -> dict[str, Any]:
    """refs maps attachment reference ids (img_1, file_2, …) to absolute local paths.

    Returns a new input dict (§3.3). At any depth (values of nested objects and array items too): a value or list
    item exactly equal to a ref id becomes its path; in string values of CODE_FIELDS (or items of a list under one)
    each whole-token ref id becomes its shell-quoted POSIX path. Lists under PATH_FIELDS, and lists made only of
    ref ids, are then de-duplicated in order; other lists (argv lists, numbers) keep their repeats. Unknown ids and
    refs keys that are not ref ids are left alone. The field a value sits under is its nearest key.
    """
    paths = {ref: path for ref, path in refs.items() if REF_ID.match(ref)}
    if not paths:
        return dict(input)

    def token(match: re.Match[str]) -> str:
        path = paths.get(match.group())
        return match.group() if path is None else _shell_word(path, match.string, match.start(), match.end())

    def walk(field: str, value: Any) -> Any:
        if isinstance(value, str):
            if value in paths:
                return paths[value]
            return _REF_TOKEN.sub(token, value) if field in CODE_FIELDS else value
        if isinstance(value, list):
            replaced = [walk(field, item) for item in value]
            all_refs = bool(value) and all(isinstance(item, str) and item in paths for item in value)
            return _dedup(replaced) if field in PATH_FIELDS or all_refs else replaced
        if isinstance(value, dict):
            return {key: walk(str(key), item) for key, item in value.items()}
        return value

    return {field: walk(field, value) for field, value in input.items()}


def refuse_home_paths(input: Mapping[str, Any], workspace: Path, home: Path) -> None:
    """Refuse any string of the input, at any depth and under any field name, that names a file under
    ``SKILLYARD_HOME`` outside this run's workspace: the key file, the database, other sessions' workspaces.
    Run after :func:`normalize_paths`, which has already placed the path fields' relative values in the workspace.

    Absolute paths, ``~`` paths and ``file:`` URLs are judged lexically and with symlinks resolved. Raises
    InputPathError naming the nearest key.
    """
    spellings: tuple[set[str], set[str]] | None = None  # resolved on the first path-like string (most inputs have none)
    stack: list[tuple[str, Any]] = [(str(k), v) for k, v in input.items()]  # (the nearest key, value)
    while stack:
        field, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((field, v) for v in value)
        elif isinstance(value, str) and (value[:1] in ("/", "~", "f", "F", ".") or ".." in value):
            if spellings is None:
                spellings = (
                    {os.path.abspath(home), os.path.realpath(home)},
                    {os.path.abspath(workspace), os.path.realpath(workspace)},
                )
            _check_home_path(field, value, *spellings)


def _check_home_path(field: str, value: str, home: set[str], own: set[str]) -> None:
    if value[:5].lower() == "file:":
        try:
            path = unquote(urlsplit(value).path)
        except ValueError:
            return
    elif value.startswith("~"):
        path = os.path.expanduser(value)
    elif os.path.isabs(value):
        path = value
    else:  # relative text ("../../etc/passwd" in a caption) is text; the path fields were placed already
        return
    if not path or "\0" in path:
        return
    for candidate in {os.path.normpath(path), os.path.realpath(path)}:
        if any(_inside(candidate, h) for h in home) and not any(_inside(candidate, o) for o in own):
            raise InputPathError(
                field,
                f"input field {field!r} names {value!r}, which is inside skillyard's own folder (SKILLYARD_HOME: its "
                "keys, database and other sessions' files); use a file in this session's workspace or attach it",
            )


def apply_raw_prompt(input: dict[str, Any], schema: Mapping[str, Any], raw_input: str) -> dict[str, Any]:
    """force_raw_prompt: overwrite the first required schema field with the user's raw text (no-op for empty
    raw_input or no required field).

    Blank text counts as empty; the text goes in unchanged. Returns a new dict.
    """
    required = schema.get("required")
    if not raw_input.strip() or not isinstance(required, list) or not required or not isinstance(required[0], str):
        return dict(input)
    return {**input, required[0]: raw_input}
