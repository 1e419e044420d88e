"""Reading the optional tool keys of doc-runtime-contracts: ``receipt`` (an enum, read with the rest),
``asyncTask``, ``targetArg``, ``paging`` and ``export``, and their cross-checks. Old contracts have none of them and
read exactly as before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .contract import (
    ArgContract,
    AsyncTaskSpec,
    Contract,
    ExportSpec,
    PagingSpec,
    SideEffect,
    SourceType,
    SuccessOp,
    SuccessSpec,
)
from .contract_values import ContractReader, is_unset, json_path


class DocKeysReader(ContractReader):
    """The readers of the doc-runtime keys; the contract walk (contract_parse) builds on it."""

    def condition(self, raw: Mapping[str, Any], key: str, path: str) -> SuccessSpec | None:
        """A §6.1 condition ``{path, op, value}`` under ``key`` (``success``, ``asyncTask.doneWhen`` …)."""
        node = self.mapping(raw, key, path)
        if not node:
            return None
        where = json_path(path, key)
        return SuccessSpec(
            path=self.text(node, "path", where),
            op=self.enum(node, "op", where, SuccessOp, None),
            value=node.get("value"),
        )

    # doc-runtime-contracts: asyncTask, targetArg, paging, export (all optional) ---------------------------
    def async_task(self, raw: Mapping[str, Any], path: str, side: SideEffect) -> AsyncTaskSpec | None:
        node = self.mapping(raw, "asyncTask", path)
        if not node:
            return None
        where = json_path(path, "asyncTask")
        if side is not SideEffect.WRITE:
            self.fail(
                "doc.asyncTask", where, 'asyncTask is only for WRITE tools; remove it or set "sideEffect": "WRITE"'
            )
        id_path = self.text(node, "idPath", where)
        poll = self.text(node, "pollTool", where)
        done = self.condition(node, "doneWhen", where)
        if id_path is None or poll is None or done is None or done.path is None:
            self.fail(
                "doc.asyncTask",
                where,
                'asyncTask needs "idPath", "pollTool" and "doneWhen", e.g. {"idPath": "data.taskId", "pollTool": '
                '"getTask", "doneWhen": {"path": "data.status", "op": "EQ", "value": "done"}}',
            )
            return None
        attempts = self.integer(node, "attempts", where, 1)
        if not 1 <= attempts <= 10:
            self.fail("doc.asyncTask", json_path(where, "attempts"), f"attempts must be 1 to 10, not {attempts}")
        interval = node.get("intervalSeconds")
        interval = 1.0 if is_unset(interval) else interval
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0 <= interval <= 60:
            self.fail(
                "doc.asyncTask",
                json_path(where, "intervalSeconds"),
                f"intervalSeconds must be 0 to 60, not {interval!r}",
            )
            interval = 1.0
        return AsyncTaskSpec(
            id_path=id_path,
            poll_tool=poll,
            id_arg=self.text(node, "idArg", where) or id_path.rsplit(".", 1)[-1],
            done_when=done,
            failed_when=self.condition(node, "failedWhen", where),
            attempts=min(max(attempts, 1), 10),
            interval_seconds=float(interval),
        )

    def target_arg(
        self, raw: Mapping[str, Any], path: str, side: SideEffect, args: Mapping[str, ArgContract]
    ) -> str | None:
        name = self.text(raw, "targetArg", path)
        if name is None:
            return None
        where = json_path(path, "targetArg")
        if side is not SideEffect.WRITE:
            self.fail("doc.targetArg", where, "targetArg names a write's target; it is only for WRITE tools")
        arg = args.get(name)
        if arg is None:
            listed = ", ".join(args) or "none"
            self.fail(
                "doc.targetArg",
                where,
                f"targetArg {name!r} is not an entry of args (listed: {listed}); add its argument contract, e.g. "
                f'"{name}": {{"sources": ["USER", "EVIDENCE"]}}',
            )
        elif arg.from_expr is None and not arg.has_const and set(arg.sources) <= {SourceType.MODEL}:
            self.fail(
                "doc.targetArg",
                where,
                f"the target argument {name!r} only accepts MODEL values, so every write would be refused "
                '(TARGET_UNRESOLVED); give it "sources": ["USER", "EVIDENCE"] or a "from"',
            )
        return name

    def paging(self, raw: Mapping[str, Any], path: str, side: SideEffect) -> PagingSpec | None:
        if is_unset(raw.get("paging")):
            return None
        node = self.mapping(raw, "paging", path)
        where = json_path(path, "paging")
        if side is SideEffect.WRITE:
            self.fail("doc.paging", where, "paging describes a listing; it is only for read tools (sideEffect NONE)")
        return PagingSpec(
            cursor_arg=self.text(node, "cursorArg", where) or "cursor", path=self.text(node, "path", where)
        )

    def export(self, raw: Mapping[str, Any], path: str, side: SideEffect) -> ExportSpec | None:
        node = self.mapping(raw, "export", path)
        if not node:
            return None
        where = json_path(path, "export")
        if side is SideEffect.WRITE:
            self.fail(
                "doc.export",
                where,
                "export is for read tools (an export or download): the runtime writes the file, and a failed export "
                "is run again by calling the read again, which a write could not be; move it to the read tool",
            )
        path_arg = self.text(node, "pathArg", where)
        content, file = self.text(node, "contentPath", where), self.text(node, "filePath", where)
        if path_arg is None:
            self.fail("doc.export", json_path(where, "pathArg"), 'export needs "pathArg": the argument naming the file')
        if (content is None) == (file is None):
            self.fail(
                "doc.export",
                where,
                'export needs exactly one of "contentPath" (the content in the result) and "filePath" (a file the '
                "tool wrote in the workspace)",
            )
        encoding = self.text(node, "encoding", where) or "utf-8"
        if encoding not in ("utf-8", "base64"):
            self.fail("doc.export", json_path(where, "encoding"), f"encoding must be utf-8 or base64, not {encoding!r}")
        if path_arg is None or (content is None) == (file is None):
            return None
        return ExportSpec(
            path_arg=path_arg,
            content_path=content,
            file_path=file,
            encoding=encoding,
            size_path=self.text(node, "sizePath", where),
            sha256_path=self.text(node, "sha256Path", where),
            overwrite_arg=self.text(node, "overwriteArg", where),
        )

    def doc_cross_checks(self, contract: Contract) -> None:
        """An ``asyncTask`` poll tool must be a read-only tool of the contract (as a verify tool, §16.8)."""
        for name, tool in contract.tools.items():
            if tool.async_task is None:
                continue
            where = json_path(json_path(json_path("tools", name), "asyncTask"), "pollTool")
            polled = contract.tools.get(tool.async_task.poll_tool)
            if polled is None:
                self.fail(
                    "doc.asyncTask",
                    where,
                    f"poll tool {tool.async_task.poll_tool!r} is not in contract.tools; add a read-only contract "
                    "for it",
                )
            elif polled.is_write:
                self.fail("doc.asyncTask", where, f"poll tool {tool.async_task.poll_tool!r} must be read-only")
