"""``dsh-acp login``: ask for the provider, the model and the API key on the terminal and store
them in the user config file.

Without a terminal (stdin is a pipe or a file) the key is the first line of stdin, read without
a prompt or a warning, and the model comes from ``--model``: ``printf '%s' "$KEY" | dsh-acp login
--model deepseek-chat``.

An editor that advertises ``auth.terminal`` runs this in a terminal when the user picks the
"Log in" auth method. They go into ``config.toml`` as ``model``, ``base_url`` and ``api_key``;
the file is written atomically with mode 0600 (its folder 0700), and every other line of the
file — keys, tables, comments — is kept as it was.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ._settings import SettingsError, default_config_path, load_config_file

__all__ = ["login_main", "remove_api_key", "store_api_key", "store_settings"]

_TABLE_HEADER = re.compile(r"^\s*\[")
_API_KEY_LINE = re.compile(r"""^\s*(?:api_key|"api_key"|'api_key')\s*=""")


def _key_line(name: str) -> re.Pattern[str]:
    return re.compile(rf"""^\s*(?:{name}|"{name}"|'{name}')\s*=""")


_PROVIDERS = (
    ("OpenAI", "gpt-4.1", None),
    ("DeepSeek", "deepseek-chat", None),
    ("another OpenAI-compatible server (vLLM, llama.cpp, Ollama…)", None, "http://localhost:11434/v1"),
)
"""What ``dsh-acp login`` offers on a terminal: a name, its default model, and whether it asks
for the server's address (the default shown)."""
_NEW_FILE_HEADER = "# dsh-acp settings (see the README for every key)\n"


def login_main(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str] | None = None,
    read_secret: Callable[[str], str] | None = None,
    read_line: Callable[[str], str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run ``dsh-acp login ARGV``; returns the exit status (0: stored)."""
    env = os.environ if environ is None else environ
    out = stdout or sys.stdout
    args = _parser(env).parse_args(list(argv))
    path: Path = args.config or default_config_path(env)
    try:
        chosen, key = _answers(args, path, _input(read_secret, read_line), out)
        try:
            store_settings(path, {**chosen, **({"api_key": key} if key else {})})
        except (OSError, SettingsError) as error:
            raise _NothingStored(f"dsh-acp login: {error}") from None
    except _NothingStored as refusal:
        print(refusal, file=stderr or sys.stderr)
        return 1
    parts = [f"the model {chosen['model']}"] if "model" in chosen else []
    parts += ["the API key"] if key else []
    print(f"Stored {' and '.join(parts)} in {path} (mode 0600).", file=out)
    if env.get("DSH_API_KEY"):
        print(
            "Note: DSH_API_KEY is set in this environment; it takes precedence over the stored key.", file=out
        )
    return 0


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-acp login",
        description="Choose the model dsh-acp uses and store its API key in the user config file "
        "(readable only by you). On a terminal it asks for the provider, the model and the key; "
        "without one it reads the key from stdin and takes the model from --model.",
    )
    parser.add_argument("--model", metavar="NAME", help="the model to use (stored as model)")
    parser.add_argument(
        "--base-url", metavar="URL", help="the OpenAI-compatible API root (stored as base_url)"
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        default=None,
        help=f"the config file (default: {default_config_path(env)})",
    )
    return parser


class _NothingStored(Exception):
    """Login stops without storing anything; the message is the line the user is shown."""


_CANCELLED = "\ndsh-acp login: cancelled; nothing was stored"
_NOTHING_PIPED = (
    "dsh-acp login: no terminal to ask on and nothing on stdin; pass the key on stdin "
    "(printf '%s' \"$KEY\" | dsh-acp login) or set DSH_API_KEY"
)


@dataclass(frozen=True, slots=True)
class _Input:
    """Where the answers come from."""

    read_secret: Callable[[str], str]
    ask: Callable[[str], str] | None
    """Reads an answer on a terminal; ``None`` without one (nobody to ask for the model)."""
    piped: bool
    """The key comes from a pipe or a file."""


def _input(read_secret: Callable[[str], str] | None, read_line: Callable[[str], str] | None) -> _Input:
    stdin_is_terminal = sys.stdin is not None and sys.stdin.isatty()
    piped = read_secret is None and not stdin_is_terminal
    if read_secret is None:
        # A pipe or a file: nobody to hide the input from.
        read_secret = _read_stdin if piped else getpass.getpass
    on_terminal = read_line is not None or (not piped and stdin_is_terminal)
    return _Input(read_secret, (read_line or input) if on_terminal else None, piped)


def _answers(args: argparse.Namespace, path: Path, given: _Input, out: TextIO) -> tuple[dict[str, str], str]:
    """The settings to store (from the flags, else asked on the terminal) and the key entered;
    ``_NothingStored`` when the user cancels or the answers cannot be stored."""
    chosen: dict[str, str] = {}
    if args.model:
        chosen["model"] = _model_spec(args.model)
    if args.base_url:
        chosen["base_url"] = args.base_url
    try:
        if given.ask is not None and not chosen:
            chosen = _ask_model(path, given.ask, out)
        key = given.read_secret("API key (input is hidden): ").strip()
    except EOFError:
        raise _NothingStored(_NOTHING_PIPED if given.piped else _CANCELLED) from None
    except KeyboardInterrupt:
        raise _NothingStored(_CANCELLED) from None
    except SettingsError as error:
        raise _NothingStored(f"dsh-acp login: {error}; nothing was stored") from None
    if not key and not chosen.get("base_url"):
        raise _NothingStored("dsh-acp login: no key entered; nothing was stored")
    if any(ch.isspace() or not ch.isprintable() for ch in key):
        raise _NothingStored(
            "dsh-acp login: an API key has no spaces or control characters; nothing was stored"
        )
    return chosen, key


def _ask_model(path: Path, read_line: Callable[[str], str], out: TextIO) -> dict[str, str]:
    """On a terminal: the provider and the model (the config file's model is the default)."""
    current = str(load_config_file(path).get("model") or "")
    for number, (name, model, _) in enumerate(_PROVIDERS, 1):
        print(f"  {number}. {name}" + (f" (default model {model})" if model else ""), file=out)
    answer = read_line("Provider [1]: ").strip() or "1"
    if answer not in {str(n) for n in range(1, len(_PROVIDERS) + 1)}:
        raise SettingsError(f"no provider {answer!r}: answer 1 to {len(_PROVIDERS)}")
    _, default, url = _PROVIDERS[int(answer) - 1]
    chosen: dict[str, str] = {}
    if url is not None:
        chosen["base_url"] = read_line(f"Server's API root [{url}]: ").strip() or url
    default = current or default or ""
    model = read_line(f"Model [{default}]: " if default else "Model: ").strip() or default
    if not model:
        raise SettingsError("no model named")
    chosen["model"] = _model_spec(model)
    return chosen


def _model_spec(name: str) -> str:
    """The model as the config file reads it: a name with a colon (an Ollama tag) keeps its
    provider prefix, or it would read as one."""
    return f"openai:{name}" if ":" in name and not name.startswith(("openai:", "script:")) else name


def _read_stdin(prompt: str) -> str:
    """The key from a piped stdin (its first line), without a prompt nobody would see."""
    line = sys.stdin.readline()
    if not line.strip():
        raise EOFError
    return line


def store_settings(path: str | Path, values: Mapping[str, str]) -> None:
    """Set these top-level keys (``model``, ``base_url``, ``api_key``) in the config file at
    ``path``, keeping everything else in it (the same guarantees as ``store_api_key``)."""
    path = Path(path)
    existing = load_config_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = _NEW_FILE_HEADER
    for name, value in values.items():
        text = _with_setting(text, name, value)
    try:
        after = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        after = None
    if after != {**existing, **values}:
        raise SettingsError(f"cannot update {path} safely; set {', '.join(values)} in it by hand")
    _write_private(path, text)


def store_api_key(path: str | Path, key: str) -> None:
    """Set ``api_key`` in the config file at ``path``, keeping everything else in it.

    Raises ``SettingsError`` when the existing file is not valid TOML or cannot be updated
    without changing other keys (it is then left untouched), ``OSError`` when it cannot be written.
    """
    path = Path(path)
    existing = load_config_file(path)  # refuses a malformed file rather than overwrite it
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = _NEW_FILE_HEADER
    updated = _with_api_key(text, key)
    _check_update(updated, existing, key, path)
    _write_private(path, updated)


def remove_api_key(path: str | Path) -> bool:
    """Remove ``api_key`` from the config file at ``path``, keeping everything else in it; whether
    there was one. ``SettingsError`` when it cannot be removed safely (the file is left alone)."""
    path = Path(path)
    existing = load_config_file(path)
    if "api_key" not in existing:
        return False
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    first_table = next((i for i, line in enumerate(lines) if _TABLE_HEADER.match(line)), len(lines))
    kept = [line for i, line in enumerate(lines) if i >= first_table or not _API_KEY_LINE.match(line)]
    updated = "".join(kept)
    try:
        after = tomllib.loads(updated)
    except tomllib.TOMLDecodeError:
        after = None
    if after != {k: v for k, v in existing.items() if k != "api_key"}:
        raise SettingsError(f"cannot remove the key from {path} safely; delete api_key in it by hand")
    _write_private(path, updated)
    return True


def _with_api_key(text: str, key: str) -> str:
    return _with_setting(text, "api_key", key)


def _with_setting(text: str, name: str, value: str) -> str:
    entry = f"{name} = {_toml_string(value)}\n"
    pattern = _key_line(name)
    lines = text.splitlines(keepends=True)
    first_table = next((i for i, line in enumerate(lines) if _TABLE_HEADER.match(line)), len(lines))
    for i in range(first_table):
        if pattern.match(lines[i]):
            lines[i] = entry
            break
    else:
        # A top-level key must come before the first [table] header, or it would land inside it.
        if first_table and not lines[first_table - 1].endswith(("\n", "\r")):
            lines[first_table - 1] += "\n"
        lines.insert(first_table, entry + ("\n" if first_table < len(lines) else ""))
    return "".join(lines)


def _check_update(text: str, before: Mapping[str, Any], key: str, path: Path) -> None:
    try:
        after = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        after = None
    if after != {**before, "api_key": key}:
        # e.g. a multi-line string that looks like a table header: never guess, never damage.
        raise SettingsError(f"cannot update {path} safely; set api_key in it by hand")


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by the owner only."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable; not every file system lets a folder be fsynced
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
