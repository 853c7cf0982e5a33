"""The ACP client as a file system: ``fs/read_text_file`` and ``fs/write_text_file``.

When the editor advertises them, reads see its unsaved buffers and writes enter its own review
flow (Zed tracks them with Keep/Reject), so the file tools prefer this backend. An operation the
client did not advertise falls back to the local disk; nothing is ever sent that was not
advertised. Requests to the client have no timeout: a person may be looking at a dialog.

An undo (``snapshot``, ``put_back``) reads and writes where the tools' writes went: the client's
buffer when it writes, the disk otherwise. ACP has no request to delete a file, so a file the
agent created through the client is removed from the disk (when the disk holds what the agent
wrote), and the editor sees it go.

Line endings and the byte-order mark follow the local disk's rule (``TextFormat``): the tools
edit LF text, and a write puts back the style the client's text had when it was read — CRLF
from an editor that serves files byte for byte, LF from one that normalises its buffers (Zed).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from dsh_acp.rpc._errors import RESOURCE_NOT_FOUND, RpcError
from dsh_acp.wire._client_requests import read_text_file_params, write_text_file_params
from dsh_tools.filesystem import (
    FileSystem,
    FileTooLargeError,
    LocalFileSystem,
    NotTextError,
    TextFormat,
    content_digest,
    file_format,
    lf_text,
    refuse_binary,
)

__all__ = ["ClientFileSystem"]


def _missing(error: RpcError, path: str) -> bool:
    """Whether a failed read means there is no such file: the client says so, or (clients such
    as acpx answer a missing file with a generic error) the disk has none."""
    return error.code == RESOURCE_NOT_FOUND or not os.path.lexists(path)


class ClientFileSystem(FileSystem):
    """A session's file system through its ACP client."""

    def __init__(
        self,
        request: Callable[[str, Any], Awaitable[Any]],
        session_id: str,
        *,
        can_read: bool,
        can_write: bool,
        local: FileSystem | None = None,
    ) -> None:
        self._request = request
        self._session_id = session_id
        self._can_read = can_read
        self._can_write = can_write
        self._local = local or LocalFileSystem()
        self._formats: dict[str, TextFormat] = {}
        """The format of each file as the client last served it: what a write puts back."""
        self._last: tuple[str, str | None] | None = None
        """The last text the client served (``None``: it has no such file), until the next
        snapshot: a tool reads a file just before it writes it, so what the undo keeps costs no
        second request (and no second "not found" shown to the user for a new file)."""

    async def read_text(self, path: str) -> str:
        if not self._can_read:
            return await self._local.read_text(path)
        try:
            answer = await self._request("fs/read_text_file", read_text_file_params(self._session_id, path))
        except RpcError as error:
            # A file the client cannot serve is written as given: remembering that here keeps a
            # write that follows from asking again (clients such as acpx answer a missing file
            # with a generic error, and each failed request shows as an error line to the user).
            self._formats[path] = TextFormat()
            missing = _missing(error, path)
            self._last = (path, None) if missing else None
            if missing:
                raise FileNotFoundError(2, "No such file (the editor says)", path) from None
            raise OSError(f"the editor could not read {path}: {error.message}") from None
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, str):
            raise OSError(f"the editor answered fs/read_text_file for {path} without text")
        # The contract is LF text without a BOM; an editor hands over its buffer as it holds it.
        self._formats[path] = TextFormat.of(content)
        self._last = (path, content)
        refuse_binary(content)  # what the disk would call binary is binary from the editor too
        return lf_text(content)

    async def _format(self, path: str) -> TextFormat:
        """How the file at ``path`` stores its text, asking the client if it was not read yet."""
        known = self._formats.get(path)
        if known is not None:
            return known
        try:
            if self._can_read:
                await self.read_text(path)
            else:
                return file_format(path)  # reads are local: so is the format
        except (OSError, NotTextError):  # missing (a new file), unreadable, or binary
            pass
        return self._formats.get(path, TextFormat())  # what the client served, or as given

    async def write_text(self, path: str, text: str) -> None:
        if not self._can_write:
            await self._local.write_text(path, text)
            return
        form = await self._format(path)
        content = form.apply(text)
        try:
            await self._request("fs/write_text_file", write_text_file_params(self._session_id, path, content))
        except RpcError as error:
            raise OSError(f"the editor could not write {path}: {error.message}") from None
        self._formats[path] = form

    async def _raw(self, path: str) -> bytes | None:
        """The client's text of ``path`` as it serves it (``None``: it has no such file)."""
        try:
            answer = await self._request("fs/read_text_file", read_text_file_params(self._session_id, path))
        except RpcError as error:
            if _missing(error, path):
                return None
            raise OSError(f"the editor could not read {path}: {error.message}") from None
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, str):
            raise OSError(f"the editor answered fs/read_text_file for {path} without text")
        return content.encode("utf-8", "surrogatepass")

    async def snapshot(self, path: str, *, limit: int) -> bytes | None:
        if not (self._can_write and self._can_read):  # the writes go to the disk: so does undo
            return await self._local.snapshot(path, limit=limit)
        last, self._last = self._last, None
        if last is not None and last[0] == path:
            data = None if last[1] is None else last[1].encode("utf-8", "surrogatepass")
        else:
            data = await self._raw(path)
        if data is not None and len(data) > limit:
            raise FileTooLargeError(f"{len(data)} bytes, over the {limit}-byte limit")
        return data

    async def put_back(self, path: str, content: bytes | None, *, expected: str) -> str | None:
        if not (self._can_write and self._can_read) or content is None:
            # No request deletes a file: a new file the agent wrote goes from the disk.
            return await self._local.put_back(path, content, expected=expected)
        current = await self._raw(path)
        if content_digest(current) != expected:
            return "it was deleted since" if current is None else "it changed since"
        text = content.decode("utf-8", "surrogatepass")
        try:
            await self._request("fs/write_text_file", write_text_file_params(self._session_id, path, text))
        except RpcError as error:
            return f"the editor could not write it ({error.message})"
        self._formats[path] = TextFormat.of(text)
        return None
