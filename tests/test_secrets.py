"""One definition of a secret, used for what commands get and for what the session log keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from secret_cases import JWT, PLAIN, SECRET

from dsh_acp._store import Redactor, SessionStore
from dsh_tools import is_secret_variable, redact_secret_shapes, secret_values, without_secrets
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
    log.append({"type": "user", "content": [{"type": "text", "text": everything}]})
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
