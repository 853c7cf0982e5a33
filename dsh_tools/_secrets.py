"""What counts as a secret: one definition for the environment children get and for log redaction.

A variable is secret by its name (``GITHUB_TOKEN``, ``MYSQL_PWD``, ``NPM_CONFIG__AUTH``,
``SLACK_WEBHOOK``…), by the shape of its value whatever its name (a URL carrying a password, a
token with a known prefix: ``sk-…``, ``ghp_…``, ``xox…-``, AWS key ids, JWTs, private-key blocks),
or by a long random-looking value under a name that hints at one (``…_AUTH…``, ``…_SIG``,
``…_SALT``…). The same shapes are what log redaction looks for in free text.

Names err on the side of secret: dropping a harmless variable from a command's environment costs
less than handing a credential to a process the model controls.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Iterator, Mapping

__all__ = ["is_secret_name", "is_secret_variable", "redact_secret_shapes", "secret_values", "without_secrets"]

REDACTED = "[REDACTED]"

# Anywhere in the name, case-insensitively (PGPASSWORD, APIKEY, GITHUB_TOKEN, MY_SECRET_X).
_SECRET_PARTS = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|WEBHOOK|COOKIE", re.I)
# Whole words of the name (split at ``_``, ``-``, ``.``): too short to match inside other words.
_SECRET_WORDS = frozenset({"PWD", "PASS", "AUTH", "DSN", "PAT", "JWT", "BEARER", "PRIVATE", "OTP"})
# Not secret whatever their words say: the shell's own, and pointers to where a secret lives.
_NOT_SECRET_NAMES = frozenset(
    {"PWD", "OLDPWD", "SSH_AUTH_SOCK", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS"}
)
# Words that make a long, random-looking value a secret.
_HINT_WORDS = frozenset(
    {"API", "ACCESS", "SIG", "SIGNATURE", "SALT", "HMAC", "CERT", "CONN", "CONNECTION", "SESSION", "LICENSE"}
)
_WORD_SPLIT = re.compile(r"[_\-.]+")

# Secrets recognisable by their shape alone: (a character every match contains, a literal every
# match contains, one token's pattern). For a URL only its password (the ``pw`` group) is the
# secret. One pattern per shape, each run only when its literal is in the text: an alternation of
# them all would make the engine try every position (50× slower on ordinary output); so would a
# leading ``\b``, so the word boundary before a token is checked on the match instead
# (``_is_token``). Looking for a literal costs about 0.5 ns a character, for one character
# (``memchr``) a hundredth of that: the characters are looked for first, once per text, so text
# without them (most prose, a streamed message) is not searched for the literals at all.
_SHAPE_SOURCES = (
    (":", "://", r":(?P<url>//[^\s/?#@:'\"]*:)(?P<pw>[^\s/?#@'\"]+)(?=@)"),
    ("-", "sk-", r"sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    ("_", "gh", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    ("_", "github_pat_", r"github_pat_[A-Za-z0-9_]{30,}"),
    ("-", "xox", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("K", "AKIA", r"AKIA[0-9A-Z]{16}\b"),
    ("S", "ASIA", r"ASIA[0-9A-Z]{16}\b"),
    ("J", "eyJ", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("-", "glpat-", r"glpat-[A-Za-z0-9_\-]{20,}"),
    ("I", "AIza", r"AIza[0-9A-Za-z_\-]{35}"),
    ("_", "npm_", r"npm_[A-Za-z0-9]{36}"),
    ("_", "sk_", r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("_", "rk_", r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
    (":", "hooks.slack.com", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    ("-", "PRIVATE KEY", r"-----BEGIN[A-Z ]* PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z ]* PRIVATE KEY-----)?"),
)
_SHAPE_CHARACTERS = frozenset(character for character, _, _ in _SHAPE_SOURCES)


@functools.cache
def _shapes() -> tuple[tuple[str, str, re.Pattern[str]], ...]:
    # Compiled at first use: start-up pays nothing for them.
    return tuple((character, literal, re.compile(source)) for character, literal, source in _SHAPE_SOURCES)


def _is_token(match: re.Match[str]) -> bool:
    """Whether a match starts a token (``sk-…`` but not the tail of ``risk-…``)."""
    start = match.start()
    if match.re.groupindex.get("url") or start == 0:
        return True
    before = match.string[start - 1]
    return not (before.isalnum() or before == "_")


def _candidates(text: str) -> Iterator[re.Pattern[str]]:
    """The shapes' patterns that may match in ``text`` (its character and its literal occur)."""
    present = {character for character in _SHAPE_CHARACTERS if character in text}
    if present:
        for character, literal, pattern in _shapes():
            if character in present and literal in text:
                yield pattern


def _tokens(text: str) -> Iterator[re.Match[str]]:
    for pattern in _candidates(text):
        yield from (match for match in pattern.finditer(text) if _is_token(match))


_MIN_RANDOM_LENGTH = 20
_MIN_RANDOM_BITS = 3.5  # bits of entropy per character: hex is 4, base64 6, English prose about 4.1
_MIN_VALUE_LENGTH = 8


def _words(name: str) -> set[str]:
    return {word for word in _WORD_SPLIT.split(name.upper()) if word}


def is_secret_name(name: str) -> bool:
    """Whether a variable called ``name`` is a secret whatever its value."""
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    return bool(_SECRET_PARTS.search(upper)) or not _words(name).isdisjoint(_SECRET_WORDS)


def _looks_random(value: str) -> bool:
    if len(value) < _MIN_RANDOM_LENGTH or value[0] in "/.~" or "://" in value:  # paths, addresses
        return False
    if any(c.isspace() for c in value):
        return False
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    bits = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return bits >= _MIN_RANDOM_BITS


def is_secret_variable(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` carries a secret (by its name, its value's shape, or a
    random-looking value under a name that hints at one)."""
    if is_secret_name(name):
        return True
    if next(_tokens(value), None) is not None:
        return True
    return not _words(name).isdisjoint(_HINT_WORDS) and _looks_random(value)


def without_secrets(environ: Mapping[str, str], keep: Collection[str] = ()) -> dict[str, str]:
    """``environ`` minus its secret variables (those named in ``keep`` stay)."""
    return {
        name: value for name, value in environ.items() if name in keep or not is_secret_variable(name, value)
    }


def secret_values(environ: Mapping[str, str]) -> set[str]:
    """The strings to redact from text for the secrets of ``environ``: whole values, and the
    passwords of URLs (a URL that is secret only for its password keeps the rest: an address).
    Values shorter than 8 characters are left out: "1" or "true" would hit every line."""
    found: set[str] = set()
    for name, value in environ.items():
        if not is_secret_variable(name, value):
            continue
        passwords = [match["pw"] for match in _tokens(value) if match.re.groupindex.get("pw")]
        found.update(passwords)
        if is_secret_name(name) or not passwords:
            found.add(value)
    return {value for value in found if len(value) >= _MIN_VALUE_LENGTH}


def redact_secret_shapes(text: str, replacement: str = REDACTED) -> str:
    """``text`` with every token of a known secret shape replaced (a URL keeps all but its password)."""
    if not text:
        return text

    def replace(match: re.Match[str]) -> str:
        if match.re.groupindex.get("url"):
            return ":" + match["url"] + replacement
        return replacement if _is_token(match) else match[0]

    for pattern in list(_candidates(text)):  # decided on the text as it came: a replacement adds none
        text = pattern.sub(replace, text)
    return text
