"""A conservative reader of shell command lines, for approval rules.

It understands a small subset of bash exactly and refuses everything else (refusing means the
person is asked). Accepted: simple commands of plain words, ``'single'`` and ``"double"``
quoted strings (double quotes without ``$``, backticks, backslashes or ``!``), joined by
``&&``, ``||``, ``;`` or ``|``. Refused: every other shell feature — expansions (``$``,
backticks, globs, braces, ``~``), redirections and here-documents, ``&``, subshells and groups,
newlines, comments, escapes, leading ``NAME=value`` assignments, reserved words (``if``,
``for``...), control and invisible characters, and unquoted non-ASCII. In what it accepts, the
words are the words bash would pass to the program (checked against bash itself in the tests).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["split_command_line"]

_RESERVED = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "do",
        "done",
        "case",
        "esac",
        "while",
        "until",
        "for",
        "in",
        "function",
        "select",
        "time",
        "coproc",
    ]
)


_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# One token of what the reader accepts. Anything else (an expansion, a redirection, a group, a
# comment, an escape, unquoted non-ASCII, a quote left open, a double-quoted string holding $ ` \ !,
# a background &, |&, ;; or ;&) matches none of them, and the line is refused.
_TOKEN = re.compile(
    r"(?P<blank>[ \t]+)"
    r"|(?P<run>[A-Za-z0-9_@%+=:,./-]+)"
    r"|'(?P<single>[^']*)'"
    r'|"(?P<double>[^"$`\\!]*)"'
    r"|(?P<operator>&&|\|\||;(?![;&])|\|(?!&))"
)


def _visible(line: str) -> bool:
    # Control characters (newlines included) and format characters (bidirectional overrides,
    # zero-width spaces) could make what runs differ from what the person reads.
    if line.isascii():
        return _ASCII_CONTROL.search(line) is None

    return not any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in line)


def split_command_line(line: str) -> list[tuple[str, ...]] | None:
    """The words of each simple command in ``line`` (``a && b | c`` gives three), or ``None``
    when the line uses anything this reader does not fully understand."""
    if not _visible(line):
        return None
    commands = _Commands()
    at = 0
    while at < len(line):
        token = _TOKEN.match(line, at)
        if token is None or not commands.take(token):
            return None
        at = token.end()
    return commands.parts if commands.end_command() else None


class _Commands:
    """The simple commands of a line read so far, and the one being read."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, ...]] = []
        self.words: list[str] = []
        self.word: list[str] | None = None
        """The pieces of the word being read (``None`` between words)."""
        self.assignment = False
        """The command's first word has an unquoted ``=``: ``NAME=value cmd``."""

    def take(self, token: re.Match[str]) -> bool:
        """Read one token; whether the line can still be understood."""
        kind = token.lastgroup
        if kind == "operator":
            return self.end_command()
        if kind == "blank":
            self.end_word()
        else:
            text = token.group(kind or 0)
            if kind == "run" and not self.words and "=" in text:
                self.assignment = True
            if self.word is None:
                self.word = []
            self.word.append(text)
        return True

    def end_word(self) -> None:
        if self.word is not None:
            self.words.append("".join(self.word))
            self.word = None

    def end_command(self) -> bool:
        """Close the command being read; whether it is one the reader understands."""
        self.end_word()
        if not self.words or self.words[0] in _RESERVED or self.assignment:
            return False
        self.parts.append(tuple(self.words))
        self.words = []
        self.assignment = False
        return True
