"""Model configuration: CLI flags, then the environment, then the config file; the auth methods;
and ``dsh-acp login``."""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import pytest

from dsh_acp.models._login import login_main, store_api_key
from dsh_acp.models._openai import OpenAIModel
from dsh_acp.models._settings import (
    API_KEY_HELP,
    DEEPSEEK_BASE_URL,
    OPENAI_BASE_URL,
    ModelSettings,
    SettingsError,
    auth_methods,
    default_config_path,
    known_model,
    load_config_file,
    missing_key_message,
    resolve_model_settings,
    select_model_spec,
)
from dsh_acp.models._source import ModelSource, build_openai_model
from dsh_acp.testing import AcpSchema
from dsh_acp.wire._client_profile import client_profile


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "config" / "dsh-acp" / "config.toml"


def resolve(
    config: Path, environ: dict[str, str] | None = None, model: str | None = None, base_url: str | None = None
) -> ModelSettings:
    settings = resolve_model_settings(model, base_url, environ or {}, config)
    assert settings is not None
    return settings


# -- the model --------------------------------------------------------------------------------


def test_nothing_configured_means_no_model(config: Path) -> None:
    assert resolve_model_settings(None, None, {}, config) is None
    assert resolve_model_settings(None, None, {"DSH_API_KEY": "k"}, config) is None  # which provider?


def test_model_order_cli_then_env_then_file(config: Path) -> None:
    write(config, 'model = "openai:from-file"\n')
    env = {"DSH_MODEL": "openai:from-env"}
    assert resolve(config, env, model="openai:from-cli").model == "from-cli"
    assert resolve(config, env).model == "from-env"
    assert resolve(config).model == "from-file"


def test_model_names_may_hold_colons(config: Path) -> None:
    settings = resolve(config, {}, "openai:qwen2.5-coder:14b", "http://localhost:11434/v1")
    assert (settings.model, settings.base_url, settings.api_key) == (
        "qwen2.5-coder:14b",
        "http://localhost:11434/v1",
        None,
    )


def test_file_model_may_be_a_bare_name(config: Path) -> None:
    write(config, 'model = "deepseek-reasoner"\n')
    settings = resolve(config)
    assert (settings.model, settings.name) == ("deepseek-reasoner", "openai:deepseek-reasoner")


@pytest.mark.parametrize("spec", ["anthropic:claude", "openai:", "script:demo.json"])
def test_unknown_specs_are_refused(config: Path, spec: str) -> None:
    with pytest.raises(SettingsError, match="expected openai:NAME"):
        resolve_model_settings(spec, None, {}, config)


@pytest.mark.parametrize("where", ["--model", "DSH_MODEL"])
def test_a_bare_model_name_works_on_the_command_line_as_in_the_config_file(config: Path, where: str) -> None:
    cli, env = ("gpt-4o", {}) if where == "--model" else (None, {"DSH_MODEL": "gpt-4o"})
    settings = resolve_model_settings(cli, None, env, config)
    assert settings is not None
    assert (settings.model, settings.name, settings.base_url) == ("gpt-4o", "openai:gpt-4o", OPENAI_BASE_URL)


def test_a_provider_key_alone_picks_its_default_model(config: Path) -> None:
    deepseek = resolve(config, {"DEEPSEEK_API_KEY": "ds"})
    assert (deepseek.model, deepseek.base_url, deepseek.api_key) == ("deepseek-chat", DEEPSEEK_BASE_URL, "ds")
    openai = resolve(config, {"OPENAI_API_KEY": "oa", "DEEPSEEK_API_KEY": "ds"})
    assert (openai.model, openai.base_url, openai.api_key) == ("gpt-4.1", OPENAI_BASE_URL, "oa")


def test_select_model_spec_lets_the_cli_route_scripts(config: Path) -> None:
    write(config, 'model = "deepseek-chat"\n')
    assert select_model_spec("script:a.json", {"DSH_MODEL": "openai:x"}, config) == "script:a.json"
    assert select_model_spec(None, {"DSH_MODEL": "script:b.json"}, config) == "script:b.json"
    assert select_model_spec(None, {}, config) == "deepseek-chat"
    assert select_model_spec(None, {}, config.with_name("missing.toml")) is None
    assert select_model_spec(None, {}, None) is None


# -- the base URL -----------------------------------------------------------------------------


def test_base_url_order_cli_then_env_then_file_then_default(config: Path) -> None:
    write(config, 'base_url = "http://file.test/v1"\n')
    env = {"DSH_BASE_URL": "http://env.test/v1/"}
    assert resolve(config, env, "openai:m", "http://cli.test/v1").base_url == "http://cli.test/v1"
    assert resolve(config, env, "openai:m").base_url == "http://env.test/v1"  # trailing slash dropped
    assert resolve(config, {}, "openai:m").base_url == "http://file.test/v1"


@pytest.mark.parametrize(
    ("model", "url"),
    [
        ("deepseek-chat", DEEPSEEK_BASE_URL),
        ("DeepSeek-V4-Pro", DEEPSEEK_BASE_URL),
        ("gpt-4o", OPENAI_BASE_URL),
        ("some-model", OPENAI_BASE_URL),
    ],
)
def test_default_base_url_follows_the_model(config: Path, model: str, url: str) -> None:
    assert resolve(config, {}, f"openai:{model}").base_url == url


def test_bad_base_url(config: Path) -> None:
    with pytest.raises(SettingsError, match="must be an http"):
        resolve_model_settings("openai:m", "api.deepseek.com", {}, config)


# -- the key ----------------------------------------------------------------------------------


def test_key_order_dsh_then_provider_then_file(config: Path) -> None:
    write(config, 'api_key = "from-file"\n')
    env = {"DSH_API_KEY": "dsh", "DEEPSEEK_API_KEY": "ds", "OPENAI_API_KEY": "oa"}
    settings = resolve(config, env, "openai:deepseek-chat")
    assert (settings.api_key, settings.key_source) == ("dsh", "DSH_API_KEY")
    del env["DSH_API_KEY"]
    settings = resolve(config, env, "openai:deepseek-chat")
    assert (settings.api_key, settings.key_source) == ("ds", "DEEPSEEK_API_KEY")
    settings = resolve(config, env, "openai:gpt-4o")
    assert (settings.api_key, settings.key_source) == ("oa", "OPENAI_API_KEY")
    settings = resolve(config, {}, "openai:gpt-4o")
    assert (settings.api_key, settings.key_source) == ("from-file", f"api_key in {config}")


def test_a_provider_key_never_goes_to_another_host(config: Path) -> None:
    env = {"OPENAI_API_KEY": "oa", "DEEPSEEK_API_KEY": "ds"}
    assert resolve(config, {"OPENAI_API_KEY": "oa"}, "openai:deepseek-chat").api_key is None
    assert resolve(config, {"DEEPSEEK_API_KEY": "ds"}, "openai:gpt-4o").api_key is None
    custom = resolve(config, env, "openai:llama", "https://llm.example.test/v1")
    assert custom.api_key is None
    assert custom.key_hint == "DSH_API_KEY"
    assert resolve(
        config, {**env, "DSH_API_KEY": "mine"}, "openai:llama", "https://llm.example.test/v1"
    ).api_key == ("mine")


def test_key_hint_names_the_providers_variable(config: Path) -> None:
    assert resolve(config, {}, "openai:deepseek-chat").key_hint == "DSH_API_KEY (or DEEPSEEK_API_KEY)"
    assert resolve(config, {}, "openai:gpt-4o").key_hint == "DSH_API_KEY (or OPENAI_API_KEY)"


def test_blank_keys_do_not_count(config: Path) -> None:
    write(config, 'api_key = "filekey"\n')
    settings = resolve(config, {"DSH_API_KEY": "  ", "DEEPSEEK_API_KEY": ""}, "openai:deepseek-chat")
    assert settings.api_key == "filekey"


def test_the_key_is_not_in_the_repr(config: Path) -> None:
    settings = resolve(config, {"DSH_API_KEY": "sk-very-secret"}, "openai:gpt-4o")
    assert "sk-very-secret" not in repr(settings)
    assert "sk-very-secret" not in str(settings)


# -- model facts and knobs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "window", "images"),
    [
        ("deepseek-chat", 1_000_000, False),
        ("deepseek-reasoner", 1_000_000, False),
        ("gpt-4o", 128_000, True),
        ("gpt-4o-2024-08-06", 128_000, True),
        ("gpt-4o-mini", 128_000, True),
        ("gpt-4.1", 1_047_576, True),
        ("openai/gpt-4.1-mini", 1_047_576, True),
        ("o3", 200_000, True),
        ("o3-mini-2025-01-31", 200_000, False),
        ("o4-mini", 200_000, True),
    ],
)
def test_known_models(name: str, window: int, images: bool) -> None:
    assert known_model(name) is not None
    assert (known_model(name).context_window, known_model(name).accepts_images) == (window, images)  # type: ignore[union-attr]


def test_unknown_models_have_no_window(config: Path) -> None:
    assert known_model("o30") is None
    assert known_model("my-llama") is None
    settings = resolve(config, {}, "openai:my-llama", "http://localhost:8080/v1")
    assert (settings.context_window, settings.accepts_images) == (None, False)


def test_file_knobs_and_per_model_overrides(config: Path) -> None:
    write(
        config,
        """
context_window = 50000
accepts_images = true
connect_timeout = 3
stall_timeout = 45.5
request_timeout = 600
max_retries = 0

[models."deepseek-chat"]
context_window = 65536
send_reasoning = false
""",
    )
    chat = resolve(config, {}, "openai:deepseek-chat")
    assert (chat.context_window, chat.accepts_images, chat.send_reasoning) == (65536, True, False)
    assert (chat.connect_timeout, chat.stall_timeout, chat.request_timeout, chat.max_retries) == (
        3,
        45.5,
        600,
        0,
    )
    other = resolve(config, {}, "openai:gpt-4o")
    assert (other.context_window, other.accepts_images, other.send_reasoning) == (50000, True, False)


def test_reasoning_is_echoed_by_default_only_to_deepseek(config: Path) -> None:
    assert resolve(config, {}, "openai:deepseek-reasoner").send_reasoning is True
    assert resolve(config, {}, "openai:gpt-4o").send_reasoning is False
    assert resolve(config, {}, "openai:deepseek-r1", "http://localhost:11434/v1").send_reasoning is False


def test_every_problem_of_a_bad_file_is_reported(config: Path) -> None:
    write(
        config,
        """
model = 3
stall_timeout = -1
max_retries = -2
accepts_images = "yes"
colour = "blue"

[models.x]
context_window = 1.5
base_url = "http://x"
""",
    )
    with pytest.raises(SettingsError) as caught:
        load_config_file(config)
    message = str(caught.value)
    for problem in (
        "model must be a string",
        "stall_timeout must be positive",
        "max_retries must not be negative",
        "accepts_images must be true or false",
        "unknown key colour",
        'models."x".context_window must be an integer',
        'unknown key models."x".base_url',
    ):
        assert problem in message
    assert message.startswith(str(config))


def test_invalid_toml(config: Path) -> None:
    write(config, "model = \n")
    with pytest.raises(SettingsError, match="is not valid TOML"):
        resolve_model_settings(None, None, {}, config)


# -- where the file is ------------------------------------------------------------------------


def test_default_config_path() -> None:
    assert default_config_path({"XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/me"}) == Path(
        "/x/cfg/dsh-acp/config.toml"
    )
    assert default_config_path({"HOME": "/home/me"}) == Path("/home/me/.config/dsh-acp/config.toml")
    # A relative XDG_CONFIG_HOME is invalid by the spec and ignored.
    assert default_config_path({"XDG_CONFIG_HOME": "cfg", "HOME": "/home/me"}) == Path(
        "/home/me/.config/dsh-acp/config.toml"
    )


# -- authentication ---------------------------------------------------------------------------


def test_missing_key_message(config: Path) -> None:
    assert missing_key_message(None) is None
    assert missing_key_message(resolve(config, {"DEEPSEEK_API_KEY": "k"})) is None
    assert missing_key_message(resolve(config, {}, "openai:llama", "http://127.0.0.1:8080/v1")) is None
    assert missing_key_message(resolve(config, {}, "openai:llama", "http://localhost:11434/v1")) is None
    assert missing_key_message(resolve(config, {}, "openai:llama", "http://[::1]:8000/v1")) is None
    message = missing_key_message(resolve(config, {}, "openai:deepseek-chat"))
    assert message == (
        "no API key for https://api.deepseek.com: set DSH_API_KEY (or DEEPSEEK_API_KEY) in the agent's "
        "environment, or run `dsh-acp login`"
    )


def test_auth_methods_validate_against_the_schema(acp_schema: AcpSchema) -> None:
    plain = auth_methods(has_model=True, terminal_login=False, meta_terminal_login=False)
    assert plain == [{"id": "api-key", "name": "API key", "description": API_KEY_HELP + "."}]
    with_terminal = auth_methods(has_model=True, terminal_login=True, meta_terminal_login=False)
    assert [m["id"] for m in with_terminal] == ["api-key", "login"]
    assert with_terminal[1]["type"] == "terminal"
    assert with_terminal[1]["args"] == ["login"]
    # The older convention: the command itself, absolute, beside ACP's own when both are offered.
    both = auth_methods(has_model=False, terminal_login=True, meta_terminal_login=True)
    assert both[0]["name"] == "Set up a model"
    assert both[1]["type"] == "terminal"
    assert both[1]["_meta"]["terminal-auth"]["command"] == sys.executable
    (_, meta_only) = auth_methods(has_model=False, terminal_login=False, meta_terminal_login=True)
    assert "type" not in meta_only  # ACP forbids a terminal method to a client without auth.terminal
    assert client_profile({"auth": {"terminal": True}}).terminal_login
    assert not client_profile({"auth": {"terminal": False}}).terminal_login
    assert not client_profile({"auth": {"terminal": {}}}).terminal_login
    assert client_profile({"_meta": {"terminal-auth": True}}).meta_terminal_login
    for method in [*with_terminal, *both, meta_only]:
        acp_schema.validate("AuthMethod", method)
    for variable in ("DSH_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "dsh-acp login"):
        assert variable in API_KEY_HELP


def test_model_source_rereads_the_file_for_each_session(config: Path) -> None:
    source = ModelSource("openai:deepseek-chat", None, {}, config)
    assert source.missing_key() is not None
    store_api_key(config, "sk-stored")  # what `dsh-acp login` does while the agent runs
    assert source.missing_key() is None
    model = source.model()
    assert isinstance(model, OpenAIModel)
    assert model.settings.api_key == "sk-stored"
    assert model.name == "openai:deepseek-chat"


def test_sessions_with_the_same_settings_share_them(config: Path) -> None:
    # Each session resolves its settings again; equal settings are one object, not a copy per
    # idle session, and a change (a key stored meanwhile) still reaches the next session.
    source = ModelSource("openai:deepseek-chat", None, {}, config)
    first, second = source.model(), source.model()
    assert first.settings is second.settings
    store_api_key(config, "sk-stored")
    third = source.model()
    assert third.settings.api_key == "sk-stored"
    assert first.settings.api_key is None
    assert source.model().settings is third.settings


def test_model_source_reports_a_broken_file(config: Path) -> None:
    write(config, "api_key = [\n")
    source = ModelSource("openai:gpt-4o", None, {}, config)
    assert "is not valid TOML" in (source.missing_key() or "")
    with pytest.raises(SettingsError):
        source.model()


def test_model_source_without_a_model(config: Path) -> None:
    with pytest.raises(SettingsError, match="no model is configured"):
        ModelSource(None, None, {}, config).model()


def test_build_openai_model() -> None:
    model = build_openai_model(ModelSettings(model="gpt-4o", base_url=OPENAI_BASE_URL, accepts_images=True))
    assert (model.name, model.accepts_images) == ("openai:gpt-4o", True)


# -- dsh-acp login ----------------------------------------------------------------------------


def run_login(config: Path, answer: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    prompts: list[str] = []

    def read_secret(prompt: str) -> str:
        prompts.append(prompt)
        return answer

    status = login_main(
        ["--config", str(config)], environ=environ or {}, read_secret=read_secret, stdout=out, stderr=err
    )
    assert prompts == ["API key (input is hidden): "]
    return status, out.getvalue(), err.getvalue()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_login_creates_a_private_file(config: Path) -> None:
    status, out, err = run_login(config, "  sk-new-key\n")
    assert (status, err) == (0, "")
    assert out == f"Stored the API key in {config} (mode 0600).\n"
    assert "sk-new-key" not in out
    assert load_config_file(config) == {"api_key": "sk-new-key"}
    assert mode(config) == 0o600
    assert mode(config.parent) == 0o700
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]  # no temporary left


def test_login_keeps_other_keys_tables_and_comments(config: Path) -> None:
    original = """# my settings
model = "deepseek-chat"
api_key = "sk-old"   # replaced
stall_timeout = 60

[models."deepseek-chat"]
context_window = 65536
"""
    write(config, original)
    os.chmod(config, 0o644)
    assert run_login(config, "sk-rotated")[0] == 0
    text = config.read_text()
    assert text == original.replace('api_key = "sk-old"   # replaced\n', 'api_key = "sk-rotated"\n')
    assert mode(config) == 0o600
    assert load_config_file(config)["models"] == {"deepseek-chat": {"context_window": 65536}}


def test_login_adds_the_key_before_the_first_table(config: Path) -> None:
    write(config, 'model = "gpt-4o"\n[models."gpt-4o"]\naccepts_images = true')
    assert run_login(config, "sk-x")[0] == 0
    assert load_config_file(config) == {
        "model": "gpt-4o",
        "api_key": "sk-x",
        "models": {"gpt-4o": {"accepts_images": True}},
    }


def test_login_escapes_the_key(config: Path) -> None:
    assert run_login(config, 'sk-"quoted"\\back')[0] == 0
    assert load_config_file(config)["api_key"] == 'sk-"quoted"\\back'


@pytest.mark.parametrize("answer", ["", "   ", "sk with space"])
def test_login_refuses_a_bad_key(config: Path, answer: str) -> None:
    status, out, err = run_login(config, answer)
    assert status == 1
    assert out == ""
    assert "nothing was stored" in err
    assert not config.exists()


def test_login_leaves_a_malformed_file_alone(config: Path) -> None:
    write(config, "model = [\n")
    status, _, err = run_login(config, "sk-x")
    assert status == 1
    assert "is not valid TOML" in err
    assert config.read_text() == "model = [\n"


def test_login_refuses_an_update_it_cannot_verify(config: Path) -> None:
    # A multi-line string with a line that looks like a table header: inserting the key blindly
    # before it would land inside the string. The check after the edit catches it.
    original = 'model = """\n[not a table]\n"""\n'
    write(config, original)
    status, _, err = run_login(config, "sk-x")
    assert status == 1
    assert "cannot update" in err
    assert config.read_text() == original


def test_login_notes_an_overriding_variable(config: Path) -> None:
    _, out, _ = run_login(config, "sk-x", {"DSH_API_KEY": "other"})
    assert "DSH_API_KEY is set" in out


def test_login_cancelled(config: Path) -> None:
    err = io.StringIO()

    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt

    assert login_main(["--config", str(config)], environ={}, read_secret=interrupted, stderr=err) == 1
    assert "cancelled" in err.getvalue()
    assert not config.exists()


def test_login_on_a_terminal_asks_for_the_provider_and_the_model_and_stores_them(tmp_path: Path) -> None:
    import io
    import tomllib

    from dsh_acp.models._login import login_main

    path = tmp_path / "config.toml"
    answers = iter(["2", ""])  # DeepSeek, its default model
    out = io.StringIO()
    code = login_main(
        ["--config", str(path)],
        environ={},
        read_secret=lambda prompt: "sk-test-key",
        read_line=lambda prompt: next(answers),
        stdout=out,
        stderr=io.StringIO(),
    )
    assert code == 0
    assert tomllib.loads(path.read_text()) == {"model": "deepseek-chat", "api_key": "sk-test-key"}
    assert "Stored the model deepseek-chat and the API key" in out.getvalue()
    settings = resolve_model_settings(None, None, {}, path)  # what a bare dsh-acp then runs
    assert settings is not None
    assert (settings.model, settings.api_key) == ("deepseek-chat", "sk-test-key")
    # A local server: its address, a model, and no key.
    answers = iter(["3", "", "qwen2.5-coder:14b"])
    code = login_main(
        ["--config", str(path)],
        environ={},
        read_secret=lambda prompt: "",
        read_line=lambda prompt: next(answers),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    assert code == 0
    stored = tomllib.loads(path.read_text())
    assert (stored["model"], stored["base_url"]) == ("openai:qwen2.5-coder:14b", "http://localhost:11434/v1")
    local = resolve_model_settings(None, None, {}, path)
    assert local is not None
    assert (local.model, local.base_url) == ("qwen2.5-coder:14b", "http://localhost:11434/v1")
