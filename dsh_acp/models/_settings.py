"""Which model to talk to, where, and with which key: resolved from CLI flags, the environment and
the user's config file, in that order.

Kept cheap to import (no HTTP client, no pydantic): the CLI resolves settings before ``initialize`` is
answered, and sessions re-resolve them so that a key stored by ``dsh-acp login`` while the agent
runs is picked up by the next session.

Config file: ``$XDG_CONFIG_HOME/dsh-acp/config.toml`` (default ``~/.config/dsh-acp/config.toml``)::

    model = "openai:deepseek-chat"        # or a bare name: "deepseek-chat"
    base_url = "https://api.deepseek.com"
    api_key = "sk-..."                    # written by `dsh-acp login`, mode 0600
    stall_timeout = 120

    [models."my-local-model"]             # per-model overrides
    context_window = 32768
    accepts_images = true
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from ._auth import API_KEY_AUTH_METHOD, API_KEY_HELP, LOGIN_AUTH_METHOD, auth_methods

__all__ = [
    "API_KEY_AUTH_METHOD",
    "API_KEY_HELP",
    "DEEPSEEK_BASE_URL",
    "LOGIN_AUTH_METHOD",
    "OPENAI_BASE_URL",
    "KnownModel",
    "ModelSettings",
    "SettingsError",
    "auth_methods",
    "default_base_url",
    "default_config_path",
    "is_self_hosted",
    "known_model",
    "load_config_file",
    "missing_key_message",
    "resolve_model_settings",
    "select_model_spec",
]

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
DEEPSEEK_BASE_URL: Final = "https://api.deepseek.com"


# Defaults when no model is named anywhere but a provider's own key is set.
_DEFAULT_MODELS: Final = (("OPENAI_API_KEY", "gpt-4.1"), ("DEEPSEEK_API_KEY", "deepseek-chat"))

_KEYS: Final = {
    "model": str,
    "base_url": str,
    "api_key": str,
    "context_window": int,
    "accepts_images": bool,
    "send_reasoning": bool,
    "connect_timeout": float,
    "stall_timeout": float,
    "first_event_timeout": float,
    "request_timeout": float,
    "max_retries": int,
    "price_provider": str,
    "reasoning_effort": bool,
    "models": dict,
}
_MODEL_KEYS: Final = (
    "context_window",
    "accepts_images",
    "send_reasoning",
    "price_provider",
    "reasoning_effort",
)
_TIMEOUT_KEYS: Final = ("connect_timeout", "stall_timeout", "first_event_timeout", "request_timeout")


class SettingsError(ValueError):
    """The configuration is unusable (a malformed config file, an unknown model spec, a bad
    value); the message names every problem and where it came from."""


@dataclass(frozen=True, slots=True)
class KnownModel:
    """What the providers document about a model (their model pages, read in 2026)."""

    context_window: int
    accepts_images: bool


# Matched on the name's last path segment, by the longest entry that equals the name or is
# followed by "-" (dated snapshots such as gpt-4o-2024-08-06 inherit their family's numbers).
_KNOWN_MODELS: Final = {
    # OpenAI (platform.openai.com/docs/models)
    "gpt-4o": KnownModel(128_000, True),
    "gpt-4o-mini": KnownModel(128_000, True),
    "gpt-4-turbo": KnownModel(128_000, True),
    "gpt-4.1": KnownModel(1_047_576, True),
    "gpt-4.1-mini": KnownModel(1_047_576, True),
    "gpt-4.1-nano": KnownModel(1_047_576, True),
    "gpt-5": KnownModel(400_000, True),
    "gpt-5-mini": KnownModel(400_000, True),
    "gpt-5-nano": KnownModel(400_000, True),
    "o1": KnownModel(200_000, True),
    "o3": KnownModel(200_000, True),
    "o3-mini": KnownModel(200_000, False),
    "o4-mini": KnownModel(200_000, True),
    # DeepSeek (api-docs.deepseek.com, Models & Pricing): the deepseek-chat / deepseek-reasoner
    # aliases now serve DeepSeek-V4-Flash (non-thinking / thinking), documented as "1M" context;
    # read as 10**6 so the usage meter errs towards full. Text only.
    "deepseek-chat": KnownModel(1_000_000, False),
    "deepseek-reasoner": KnownModel(1_000_000, False),
    "deepseek-v4-flash": KnownModel(1_000_000, False),
    "deepseek-v4-pro": KnownModel(1_000_000, False),
}


def known_model(name: str) -> KnownModel | None:
    """The documented context window and image support of a common model, or ``None``."""
    base = name.rsplit("/", 1)[-1].lower()
    best: str | None = None
    for known in _KNOWN_MODELS:
        if (base == known or base.startswith(known + "-")) and (best is None or len(known) > len(best)):
            best = known
    return _KNOWN_MODELS[best] if best is not None else None


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Everything one OpenAI-compatible model endpoint needs. ``repr`` never shows the key."""

    model: str
    """The provider's model name, e.g. ``deepseek-chat``."""
    base_url: str
    """The API root; requests go to ``{base_url}/chat/completions``."""
    api_key: str | None = field(default=None, repr=False)
    key_source: str | None = None
    """Where the key came from (``DSH_API_KEY``, ``api_key in /path``...), for messages."""
    key_hint: str = "DSH_API_KEY"
    """The variables that would configure a key for this provider, for messages."""
    context_window: int | None = None
    """Tokens the model can hold; ``None`` when unknown. A server that reports its window
    (``/v1/models``, a context-size error) is believed over the table of known models, but not
    over the config file (``context_window_configured``)."""
    context_window_configured: bool = False
    accepts_images: bool = False
    send_reasoning: bool = False
    """Echo ``reasoning_content`` on assistant messages (DeepSeek's thinking mode requires it
    after tool calls; other providers may reject the unknown field)."""
    connect_timeout: float = 10.0
    stall_timeout: float = 120.0
    """Seconds without a byte from the API, once the response has begun, before it is abandoned."""
    first_event_timeout: float = 600.0
    """Seconds to wait for the response to begin (a local server reads the whole prompt first),
    counted again from each progress event the server sends meanwhile."""
    request_timeout: float = 900.0
    """Seconds one whole response may take, however steadily it streams."""
    max_retries: int = 4
    """Extra attempts after HTTP 429/5xx or a connection lost before the answer."""
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0
    retry_budget: float = 90.0
    """Total seconds of back-off one request may spend before giving up."""
    config_path: str | None = None
    price_provider: str | None = None
    reasoning_efforts: tuple[str, ...] = ()
    """The ``reasoning_effort`` values the model takes (empty: it takes none, the field is never sent)."""
    """Whose prices apply (a ``genai-prices`` provider id: ``openai``, ``deepseek``); ``None`` for
    servers the table does not know (a local server costs nothing we can tell)."""

    @property
    def name(self) -> str:
        """The label the model goes by in logs and pickers."""
        return f"openai:{self.model}"

    @property
    def key_required(self) -> bool:
        """Whether a key must be configured: servers on this machine usually take none."""
        return not _is_loopback(self.base_url)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/dsh-acp/config.toml``, else ``~/.config/dsh-acp/config.toml``."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    root = Path(xdg) if xdg and os.path.isabs(xdg) else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "dsh-acp" / "config.toml"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The config file's table, checked; ``{}`` when the file does not exist."""
    import tomllib  # only when there is a file (~3 ms before initialize)

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"cannot read {path}: {error}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{path} is not valid TOML: {error}") from None
    problems = _check_table(document, _KEYS, "")
    models = document.get("models")
    if isinstance(models, dict):
        for name, table in models.items():
            if not isinstance(table, dict):
                problems.append(f'models."{name}" must be a table')
                continue
            problems.extend(_check_table(table, {k: _KEYS[k] for k in _MODEL_KEYS}, f'models."{name}".'))
    if problems:
        raise SettingsError(f"{path}: " + "; ".join(problems))
    return document


def _check_table(table: Mapping[str, Any], types: Mapping[str, type], prefix: str) -> list[str]:
    problems: list[str] = []
    for key, value in table.items():
        expected = types.get(key)
        if expected is None:
            problems.append(f"unknown key {prefix}{key} (known: {', '.join(sorted(types))})")
        elif not _is_a(value, expected):
            problems.append(f"{prefix}{key} must be {_TYPE_NAMES[expected]}")
        elif expected in (int, float) and not value > 0 and key != "max_retries":
            problems.append(f"{prefix}{key} must be positive")
        elif key == "max_retries" and value < 0:
            problems.append(f"{prefix}{key} must not be negative")
    return problems


_TYPE_NAMES: Final = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    dict: "a table",
}


def _is_a(value: Any, expected: type) -> bool:
    if expected is float:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def select_model_spec(
    cli_model: str | None, environ: Mapping[str, str], config_path: str | Path | None
) -> str | None:
    """The model spec that wins (``--model``, then ``DSH_MODEL``, then the config file's
    ``model``), as written; ``None`` when none is set. Lets the CLI route ``script:`` specs."""
    if cli_model:
        return cli_model
    if environ.get("DSH_MODEL"):
        return environ["DSH_MODEL"]
    if config_path is not None:
        spec = load_config_file(config_path).get("model")
        if spec:
            return str(spec)
    return None


def resolve_model_settings(
    cli_model: str | None,
    cli_base_url: str | None,
    environ: Mapping[str, str],
    config_path: str | Path | None,
) -> ModelSettings | None:
    """Resolve the OpenAI-compatible model: CLI flags, then the environment, then the config file.

    - model: ``--model openai:NAME``, ``DSH_MODEL``, the file's ``model`` (a bare name is allowed
      in each); with none of them, ``gpt-4.1`` when ``OPENAI_API_KEY`` is set, else
      ``deepseek-chat`` when ``DEEPSEEK_API_KEY`` is; else ``None`` (no model configured).
    - base URL: ``--base-url``, ``DSH_BASE_URL``, the file's ``base_url``, else DeepSeek's API for
      ``deepseek*`` models and OpenAI's for the rest.
    - key: ``DSH_API_KEY``; then the provider's own variable, only for its own host
      (``OPENAI_API_KEY`` for api.openai.com, ``DEEPSEEK_API_KEY`` for api.deepseek.com: a key is
      never sent to another provider); then the file's ``api_key``.
    - context window and image support: the file's ``[models."NAME"]`` table, its top-level keys,
      else the table of known models.
    """
    config = load_config_file(config_path) if config_path is not None else {}
    chosen = _chosen_spec(cli_model, environ, config, config_path)
    if chosen is None:
        return None
    name = _model_name(*chosen)
    explicit_url = cli_base_url or environ.get("DSH_BASE_URL") or config.get("base_url")
    base_url = _check_base_url(str(explicit_url) if explicit_url else default_base_url(name)).rstrip("/")
    provider = _provider(base_url)
    key = _api_key(provider, environ, config, config_path)
    return ModelSettings(
        model=name,
        base_url=base_url,
        api_key=key.value,
        key_source=key.source,
        key_hint=key.hint,
        config_path=str(config_path) if config_path is not None else None,
        **_model_traits(name, provider, {**config, **(config.get("models") or {}).get(name, {})}),
        **_tuning(config),
    )


def _chosen_spec(
    cli_model: str | None,
    environ: Mapping[str, str],
    config: Mapping[str, Any],
    config_path: str | Path | None,
) -> tuple[str, str] | None:
    """The model spec that wins, as ``kind:name``, and where it was given; with none given, the
    default of the first provider whose own key is set; ``None`` when there is none either."""
    if cli_model:
        spec, source = cli_model, "--model"
    elif environ.get("DSH_MODEL"):
        spec, source = environ["DSH_MODEL"], "DSH_MODEL"
    elif config.get("model"):
        spec, source = str(config["model"]), f"model in {config_path}"
    else:
        default = next((model for variable, model in _DEFAULT_MODELS if environ.get(variable)), None)
        return None if default is None else (f"openai:{default}", "DSH_MODEL")
    # A bare name is allowed wherever the spec is given.
    return (spec if ":" in spec else f"openai:{spec}"), source


def _model_name(spec: str, source: str) -> str:
    kind, colon, name = spec.partition(":")
    if kind != "openai" or not colon or not name.strip():
        raise SettingsError(f"{source}: unknown model {spec!r}; expected openai:NAME (or script:PATH)")
    return name.strip()


# A provider's own key variable is read only for its own host: a key is never sent to another provider.
_PROVIDER_KEY_VARIABLES: Final = {"openai": "OPENAI_API_KEY", "deepseek": "DEEPSEEK_API_KEY"}


@dataclass(frozen=True, slots=True)
class _Key:
    value: str | None
    source: str | None
    hint: str


def _api_key(
    provider: str, environ: Mapping[str, str], config: Mapping[str, Any], config_path: str | Path | None
) -> _Key:
    """The first key set among ``DSH_API_KEY``, the provider's own variable and the file's ``api_key``."""
    provider_variable = _PROVIDER_KEY_VARIABLES.get(provider)
    candidates = [("DSH_API_KEY", environ.get("DSH_API_KEY"))]
    if provider_variable:
        candidates.append((provider_variable, environ.get(provider_variable)))
    candidates.append((f"api_key in {config_path}", config.get("api_key")))
    hint = f"DSH_API_KEY (or {provider_variable})" if provider_variable else "DSH_API_KEY"
    for where, value in candidates:
        if value and value.strip():
            return _Key(value.strip(), where, hint)
    return _Key(None, None, hint)


def _model_traits(name: str, provider: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """What the model can hold and take: the config's overrides, else the table of known models,
    else what its provider implies."""
    known = known_model(name)
    return {
        "context_window": overrides.get("context_window", known.context_window if known else None),
        "context_window_configured": "context_window" in overrides,
        "accepts_images": overrides.get("accepts_images", known.accepts_images if known else False),
        # DeepSeek's thinking mode answers 400 when reasoning_content is not echoed after tool calls.
        "send_reasoning": overrides.get("send_reasoning", provider == "deepseek"),
        "price_provider": overrides.get("price_provider", provider if provider != "custom" else None),
        "reasoning_efforts": _EFFORTS if overrides.get("reasoning_effort", _takes_effort(name)) else (),
    }


def _tuning(config: Mapping[str, Any]) -> dict[str, Any]:
    """The timeouts and retry count the config file sets (the rest keep their defaults)."""
    tuning: dict[str, Any] = {key: float(config[key]) for key in _TIMEOUT_KEYS if key in config}
    if "max_retries" in config:
        tuning["max_retries"] = config["max_retries"]
    return tuning


_EFFORTS: Final = ("low", "medium", "high")


def _takes_effort(model: str) -> bool:
    """Models known to take ``reasoning_effort``: OpenAI's o-series and gpt-5, DeepSeek's reasoner."""
    name = model.rsplit("/", 1)[-1].lower()
    return bool(re.match(r"o\d", name)) or name.startswith(("gpt-5", "deepseek-reasoner"))


def default_base_url(model: str) -> str:
    """The API root a model name goes to when none is set: DeepSeek's for ``deepseek*``, else OpenAI's."""
    return DEEPSEEK_BASE_URL if model.rsplit("/", 1)[-1].lower().startswith("deepseek") else OPENAI_BASE_URL


def _check_base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"base URL {url!r} must be an http:// or https:// URL")
    return url


def is_self_hosted(base_url: str) -> bool:
    """A server on this machine or a private network (llama.cpp, vLLM, Ollama...): one worth
    asking about its models, unlike a cloud API whose list is long and says little."""
    host = (urlsplit(base_url).hostname or "").lower()
    if _is_loopback(base_url) or "." not in host or host.endswith((".local", ".lan", ".internal")):
        return True

    try:
        return ipaddress.ip_address(host).is_private
    except ValueError:
        return False


def _provider(base_url: str) -> str:
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "api.openai.com":
        return "openai"
    if host == "deepseek.com" or host.endswith(".deepseek.com"):
        return "deepseek"
    return "custom"


def _is_loopback(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def missing_key_message(settings: ModelSettings | None) -> str | None:
    """Why ``authenticate`` must fail (one line, naming what to set), or ``None`` when a key is
    configured, none is needed (a server on this machine), or no model is configured at all."""
    if settings is None or settings.api_key or not settings.key_required:
        return None
    return (
        f"no API key for {settings.base_url}: set {settings.key_hint} in the agent's environment, "
        "or run `dsh-acp login`"
    )
