"""How the file tools reach a file: the real path their policy checked, the session's
file-system backend, its errors as sentences the model can act on, and the check that a file is
still what the session last read."""

from __future__ import annotations

import os
from collections.abc import Hashable

from dsh_tools import ToolError, ToolExecution
from dsh_tools.filesystem import FileSystem, FileTooLargeError, LocalFileSystem, NotTextError

from . import _hunks
from ._read_tracker import TextPrint, tracker

__all__ = [
    "CheckedPaths",
    "check_fresh",
    "checked",
    "file_system",
    "read_text",
    "stamp",
    "target",
    "write_text",
]

_LOCAL = LocalFileSystem()


class CheckedPaths:
    """The real path ``fs_policy`` checked for each call, so that the tool acts on that path
    and does not resolve the one it was given a second time (a link could have changed)."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}


def target(execution: ToolExecution, path: str) -> str:
    """The real path a call acts on: the one its policy checked, else resolved now."""
    checked = execution.services.get(CheckedPaths)
    real = checked.paths.pop(execution.call_id, None) if checked is not None else None
    return real if real is not None else os.path.realpath(path)


def checked(execution: ToolExecution, path: str) -> str:
    """``target`` for a look before the call runs (its preview): the call keeps its checked path."""
    paths = execution.services.get(CheckedPaths)
    real = paths.paths.get(execution.call_id) if paths is not None else None
    return real if real is not None else os.path.realpath(path)


def file_system(execution: ToolExecution) -> FileSystem:
    # mypy rejects an abstract class as a type[T] argument (python/mypy#4717); the lookup is by
    # isinstance, so any registered backend is found.
    return execution.services.get(FileSystem) or _LOCAL  # type: ignore[type-abstract]


async def read_text(execution: ToolExecution, target: str, path: str) -> str:
    """The text of ``target`` (a real path); errors name ``path``, as the call did."""
    try:
        return await file_system(execution).read_text(target)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; use ls to list it") from None
    except (NotTextError, FileTooLargeError) as error:
        raise ToolError(f"{path} cannot be read as text: {error}") from None
    except OSError as error:
        raise ToolError(f"cannot read {path}: {error.strerror or error}") from None


async def write_text(execution: ToolExecution, target: str, path: str, content: str | _hunks.Splice) -> None:
    backend = file_system(execution)
    try:
        if isinstance(content, str):
            await backend.write_text(target, content)
        else:
            await backend.write_chunks(target, content.chunks())
    except OSError as error:
        raise ToolError(f"cannot write {path}: {error.strerror or error}") from None
    except UnicodeEncodeError as error:  # JSON can carry lone surrogates; files cannot
        raise ToolError(f"cannot write {path}: the text is not valid Unicode ({error.reason})") from None


async def stamp(execution: ToolExecution, path: str) -> Hashable | None:
    try:
        return await file_system(execution).fingerprint(path)
    except OSError:  # no proof: the texts get compared
        return None


async def check_fresh(execution: ToolExecution, target: str, current: str, path: str) -> TextPrint | None:
    """Refuse ``current`` (the text of ``target`` now) unless it is what the session last saw;
    return its print, if the session has one."""
    # The stamp is taken after ``current`` was read: if it equals the one taken before the
    # recorded read, nothing changed in between, so ``current`` is what the session saw.
    now = await stamp(execution, target)
    seen = tracker(execution)
    if seen.changed(target, current, now):
        raise ToolError(
            f"{path} has changed since it was last read (it was modified outside these tools); "
            "read it again and make the change on its current text"
        )
    return seen.seen(target)  # no await since the check: no other call can have recorded
