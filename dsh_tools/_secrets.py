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
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

__all__ = [
    "KnownSecrets",
    "is_secret_name",
    "is_secret_variable",
    "redact_secret_shapes",
    "secret_values",
    "without_secrets",
]

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

# Secrets recognisable by their shape alone: (the literals one of which starts every match, one
# token's pattern). For a URL only its password (the ``pw`` group) is the secret. All the literals
# are looked for in one pass (an Aho–Corasick automaton: about a nanosecond a character whatever
# their number, where a substring search per literal, or an alternation the regex engine tries at
# every position, costs one to two orders of magnitude more on code); a shape's pattern then runs
# only where one of its literals was found, anchored there. A leading ``\b`` would be slow too, so
# the word boundary before a token is checked on the match instead (``_is_token``).
_SHAPE_SOURCES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("://",), r":(?P<url>//[^\s/?#@:'\"]*:)(?P<pw>[^\s/?#@'\"]+)(?=@)"),
    (("sk-",), r"sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    (tuple(f"gh{kind}_" for kind in "pousr"), r"gh[pousr]_[A-Za-z0-9]{30,}"),
    (("github_pat_",), r"github_pat_[A-Za-z0-9_]{30,}"),
    (tuple(f"xox{kind}-" for kind in "abposr"), r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    (("AKIA",), r"AKIA[0-9A-Z]{16}\b"),
    (("ASIA",), r"ASIA[0-9A-Z]{16}\b"),
    (("eyJ",), r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    (("glpat-",), r"glpat-[A-Za-z0-9_\-]{20,}"),
    (("AIza",), r"AIza[0-9A-Za-z_\-]{35}"),
    (("npm_",), r"npm_[A-Za-z0-9]{36}"),
    (("sk_live_", "sk_test_"), r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
    (("rk_live_", "rk_test_"), r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
    (("https://hooks.slack.com/",), r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    (("-----BEGIN",), r"-----BEGIN[A-Z ]* PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z ]* PRIVATE KEY-----)?"),
)


class _Automaton:
    """Many literals looked for in one pass, leftmost first (or longest), never overlapping: the
    kinds whose search skips ahead to the literals' rare bytes (an overlapping search looks at
    every byte, five times slower). The text is searched as UTF-8 bytes (lone surrogates, as
    undecodable names and output carry, pass as themselves): a match of UTF-8 in UTF-8 always
    starts and ends on a character, and for ASCII text (most is) the offsets are the same."""

    def __init__(self, literals: Sequence[str], *, longest: bool = False) -> None:
        from ahocorasick_rs import BytesAhoCorasick, MatchKind

        kind = MatchKind.LeftmostLongest if longest else MatchKind.LeftmostFirst
        encoded = [literal.encode("utf-8", "surrogatepass") for literal in literals]
        self._bytes = BytesAhoCorasick(encoded, matchkind=kind)

    def find(self, text: str) -> list[tuple[int, int, int]]:
        """``(literal index, start, end)`` of each occurrence found, in characters."""
        if text.isascii():
            return self._bytes.find_matches_as_indexes(text.encode("ascii"))
        data = text.encode("utf-8", "surrogatepass")
        found: list[tuple[int, int, int]] = []
        done = character = 0  # byte and character offsets of the end of the last match
        for index, start, end in self._bytes.find_matches_as_indexes(data):
            character += len(data[done:start].decode("utf-8", "surrogatepass"))
            width = len(data[start:end].decode("utf-8", "surrogatepass"))
            found.append((index, character, character + width))
            done, character = end, character + width
        return found


class _Shapes:
    """The automaton of every shape's literals, and for each literal its shape's pattern."""

    def __init__(self) -> None:
        literals: list[str] = []
        self.patterns: list[re.Pattern[str]] = []
        for starts, source in _SHAPE_SOURCES:
            pattern = re.compile(source)
            for literal in starts:
                literals.append(literal)
                self.patterns.append(pattern)
        self.automaton = _Automaton(literals)


@functools.cache
def _shapes() -> _Shapes:
    # Built at first use: start-up pays nothing for it.
    return _Shapes()


def _is_token(match: re.Match[str]) -> bool:
    """Whether a match starts a token (``sk-…`` but not the tail of ``risk-…``)."""
    start = match.start()
    if match.re.groupindex.get("url") or start == 0:
        return True
    before = match.string[start - 1]
    return not (before.isalnum() or before == "_")


def _tokens(text: str) -> Iterator[re.Match[str]]:
    """The secret tokens in ``text``, in order, none overlapping the one before.

    The search of the literals does not look for one that starts inside another it found; that
    one would follow a letter, a digit or ``_`` of the first, so it could not start a token
    anyway (no literal fits after a ``-``, ``:``, ``/`` or ``.`` inside another one:
    ``test_no_literal_starts_a_token_inside_another`` checks the table).
    """
    shapes = _shapes()
    patterns = shapes.patterns
    end = 0
    for index, start, _ in shapes.automaton.find(text):
        if start < end:
            continue  # inside the token before
        match = patterns[index].match(text, start)
        if match is not None and _is_token(match):
            yield match
            end = match.end()


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
    pieces: list[str] = []
    done = 0
    for match in _tokens(text):
        if match.re.groupindex.get("url"):
            start = match.start("pw")
            pieces.append(text[done:start])
        else:
            pieces.append(text[done : match.start()])
        pieces.append(replacement)
        done = match.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


class KnownSecrets:
    """Redacts known secret values (the longest wins an overlap), then every token of a known
    shape, from text: one pass over the text for the values, one for the shapes' literals."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = frozenset(value for value in values if value)
        self._automaton = _Automaton(sorted(self.values), longest=True) if self.values else None

    def redact(self, text: str, replacement: str = REDACTED) -> str:
        automaton = self._automaton
        if automaton is not None and text:
            hits = automaton.find(text)
            if hits:
                pieces: list[str] = []
                done = 0
                for _, start, end in hits:
                    pieces += (text[done:start], replacement)
                    done = end
                pieces.append(text[done:])
                text = "".join(pieces)
        return redact_secret_shapes(text, replacement)
