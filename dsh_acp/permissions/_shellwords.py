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

_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-")
_IN_DOUBLE_REFUSED = frozenset('$`\\!"')
_BLANK = frozenset(" \t")
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
_RUN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


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
    parts: list[tuple[str, ...]] = []
    words: list[str] = []
    word: list[str] = []
    in_word = False
    first_word_unquoted_equals = False
    i, n = 0, len(line)

    def end_word() -> None:
        nonlocal in_word
        if in_word:
            words.append("".join(word))
            word.clear()
            in_word = False

    def end_part() -> bool:
        end_word()
        if not words or words[0] in _RESERVED or first_word_unquoted_equals:
            return False
        parts.append(tuple(words))
        words.clear()
        return True

    while i < n:
        char = line[i]
        if char in _BLANK:
            end_word()
            i += 1
        elif char in _WORD:
            run = _RUN.match(line, i)
            assert run is not None
            text = run.group()
            if not words and "=" in text:
                first_word_unquoted_equals = True  # `NAME=value cmd`: an assignment
            word.append(text)
            in_word = True
            i = run.end()
        elif char == "'":
            close = line.find("'", i + 1)
            if close < 0:
                return None
            word.append(line[i + 1 : close])
            in_word = True
            i = close + 1
        elif char == '"':
            close = line.find('"', i + 1)
            if close < 0:
                return None
            inner = line[i + 1 : close]
            if any(c in _IN_DOUBLE_REFUSED for c in inner):
                return None
            word.append(inner)
            in_word = True
            i = close + 1
        elif char in "&|;":
            pair = line[i : i + 2]
            if pair in ("&&", "||"):
                i += 2
            elif char == "&" or pair in ("|&", ";;", ";&"):
                return None  # background jobs, |& and case terminators
            else:
                i += 1
            if not end_part():
                return None
            first_word_unquoted_equals = False
        else:
            return None  # an expansion, redirection, group, comment, escape or non-ASCII
    if not end_part():
        return None
    return parts
