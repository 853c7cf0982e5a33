"""One definition of a secret, used for what commands get and for what the session log keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from secret_cases import JWT, PLAIN, SECRET

from dsh_acp.session._events import UserPrompt
from dsh_acp.session._store import Redactor, SessionStore
from dsh_tools import TextBlock, is_secret_variable, redact_secret_shapes, secret_values, without_secrets
from reference_tools._jobs import BashSettings, command_env


@pytest.mark.parametrize(("name", "value", "hidden"), SECRET, ids=[row[0] for row in SECRET])
def test_secret_variables_are_recognised(name: str, value: str, hidden: str) -> None:
    assert is_secret_variable(name, value)


@pytest.mark.parametrize(("name", "value"), PLAIN, ids=[row[0] for row in PLAIN])
def test_plain_variables_are_not(name: str, value: str) -> None:
    assert not is_secret_variable(name, value)


def table_environ() -> dict[str, str]:
    return {name: value for name, value, _ in SECRET} | dict(PLAIN)


def test_commands_get_none_of_the_secrets_and_all_the_rest() -> None:
    env = command_env(BashSettings(), table_environ())
    assert not {name for name, _, _ in SECRET} & env.keys()
    assert {name: env[name] for name, _ in PLAIN} == dict(PLAIN)


def test_the_log_keeps_none_of_the_secrets_and_all_the_rest(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T", redact=Redactor(environ=table_environ()))
    log = store.create("s1", "/w", [])
    everything = "\n".join(f"{name}={value}" for name, value in table_environ().items())
    log.append(UserPrompt((TextBlock(text=everything),)))
    log.close()
    raw = (tmp_path / "sessions" / "s1.jsonl").read_text()
    for name, _, hidden in SECRET:
        assert hidden not in raw, name
        assert f"{name}=" in raw  # the names stay: only values are secrets
    for name, value in PLAIN:
        assert f"{name}={value}" in raw
    assert "postgres://app:[REDACTED]@db.internal:5432/app" in raw  # the address stays readable


def test_token_shapes_are_redacted_wherever_they_appear() -> None:
    text = f"found {JWT} in a file, and sk-ant-api03-{'x' * 30} and xoxp-12345678901-abc in another"
    assert (
        redact_secret_shapes(text) == "found [REDACTED] in a file, and [REDACTED] and [REDACTED] in another"
    )
    assert redact_secret_shapes("see https://user:pw@host/x") == "see https://user:[REDACTED]@host/x"
    assert redact_secret_shapes("mail me at a@b.c, https://example.com/a:b") == (
        "mail me at a@b.c, https://example.com/a:b"
    )


def test_kept_names_pass_and_short_values_are_not_redacted_as_text() -> None:
    assert without_secrets({"GH_TOKEN": "t", "X": "1"}, keep={"GH_TOKEN"}) == {"GH_TOKEN": "t", "X": "1"}
    assert secret_values({"USE_TOKEN": "1", "MY_TOKEN": "long-enough-token"}) == {"long-enough-token"}


# One token of every shape that redaction knows by its look alone (each must go, whatever the
# characters around it: the search looks for a character and a literal of each shape first).
SHAPE_EXAMPLES = [
    (
        "url password",
        "https://deploy:hunter22x@git.example.com/r",
        "https://deploy:[REDACTED]@git.example.com/r",
    ),
    ("openai", "sk-proj-" + "a" * 24, "[REDACTED]"),
    ("github classic", "ghp_" + "A1" * 16, "[REDACTED]"),
    ("github fine-grained", "github_pat_" + "B2_" * 11, "[REDACTED]"),
    ("slack", "xoxb-1234567890-abcdefghij", "[REDACTED]"),
    ("aws key id", "AKIAIOSFODNN7EXAMPLE", "[REDACTED]"),
    ("aws session key id", "ASIAIOSFODNN7EXAMPLE", "[REDACTED]"),
    ("jwt", JWT, "[REDACTED]"),
    ("gitlab", "glpat-" + "c3" * 10, "[REDACTED]"),
    ("google", "AIza" + "D4e5F6g7H8" * 3 + "i9J0k", "[REDACTED]"),
    ("npm", "npm_" + "Ab1" * 12, "[REDACTED]"),
    ("stripe secret", "sk_live_" + "x" * 16, "[REDACTED]"),
    ("stripe restricted", "rk_test_" + "y" * 16, "[REDACTED]"),
    ("slack webhook", "https://hooks.slack.com/services/T0/B0/XXXXXXXX", "[REDACTED]"),
    (
        "private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
        "[REDACTED]",
    ),
]


@pytest.mark.parametrize(
    ("token", "redacted"), [row[1:] for row in SHAPE_EXAMPLES], ids=[r[0] for r in SHAPE_EXAMPLES]
)
def test_every_shape_is_redacted_in_prose_and_in_code(token: str, redacted: str) -> None:
    assert redact_secret_shapes(f"the model wrote {token} then stopped") == (
        f"the model wrote {redacted} then stopped"
    )
    assert redact_secret_shapes(f"KEY_NAME: value-x\n{token}\n") == f"KEY_NAME: value-x\n{redacted}\n"


def test_text_without_a_shape_comes_back_as_it_was() -> None:
    prose = "000001 the quick brown fox jumps over the lazy dog, then writes some code; " * 1000
    assert redact_secret_shapes(prose) is prose
    code = "def risk_score(task_id: str) -> int:  # sk- and gh_ alone are not tokens\n" * 100
    assert redact_secret_shapes(code) == code


def test_offsets_hold_after_characters_beyond_ascii() -> None:
    # The one-pass search counts in characters: text before a token may be of any width.
    token = "ghp_" + "A1" * 16
    text = f"naïve 日本語 🙂 {token} and sk_live_{'x' * 16}, done"
    assert redact_secret_shapes(text) == "naïve 日本語 🙂 [REDACTED] and [REDACTED], done"
    redact = Redactor(["clé-secrète-1234"], environ={})
    assert redact(f"é {token} clé-secrète-1234 🙂") == "é [REDACTED] [REDACTED] 🙂"


def test_the_longest_known_value_wins_an_overlap() -> None:
    redact = Redactor(["abcdefgh1234", "abcdefgh1234567", "1234567-zz"], environ={})
    assert redact("x abcdefgh1234567 y abcdefgh1234 z") == "x [REDACTED] y [REDACTED] z"
    assert redact({"a": ["abcdefgh1234567-zz"], "b": 3}) == {"a": ["[REDACTED]-zz"], "b": 3}


def test_a_shape_inside_a_longer_shape_is_one_redaction() -> None:
    token = "sk-proj-" + "a" * 10 + "AKIAIOSFODNN7EXAMPLE"
    assert redact_secret_shapes(f"[{token}]") == "[[REDACTED]]"
    url = f"https://user:{token}@host/x"
    assert redact_secret_shapes(url) == "https://user:[REDACTED]@host/x"


def test_no_literal_starts_a_token_inside_another() -> None:
    # The one-pass search does not look inside a literal it found; a literal that fits after a
    # character that may precede a token (``_is_token``: not a letter, digit or ``_``) inside
    # another one would be missed.
    from dsh_tools._secrets import _SHAPE_SOURCES

    literals = [literal for starts, _ in _SHAPE_SOURCES for literal in starts]
    for outer in literals:
        for offset in range(1, len(outer)):
            before = outer[offset - 1]
            if before.isalnum() or before == "_":
                continue
            tail = outer[offset:]
            fits = [inner for inner in literals if inner.startswith(tail) or tail.startswith(inner)]
            assert not fits, (outer, offset, fits)


def test_text_with_lone_surrogates_is_redacted_too() -> None:
    # Undecodable bytes of a file name or of a command's output arrive as lone surrogates.
    token = "ghp_" + "A1" * 16
    assert redact_secret_shapes(f"caf\udce9 {token} \udcff") == "caf\udce9 [REDACTED] \udcff"
    redact = Redactor(["pass\udcfdword-1"], environ={})
    assert redact(f"\udcfd x pass\udcfdword-1 {token}") == "\udcfd x [REDACTED] [REDACTED]"
