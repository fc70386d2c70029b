"""Where a model's requests go and which key they carry (spec §9: "a key goes only to its own
provider (a custom base URL gets the key its configuration names, else none)";
docs/decisions/0040-a-base-url-gets-no-key.md).

Used through :func:`palui.models.resolve_model`; nothing else imports this module.

| model string | requests go to | key sent |
|---|---|---|
| ``openai:MODEL`` | ``https://api.openai.com/v1`` | ``OPENAI_API_KEY`` (required) |
| ``anthropic:MODEL`` | ``https://api.anthropic.com`` | ``ANTHROPIC_API_KEY`` (required) |
| ``ollama:MODEL`` | ``OLLAMA_BASE_URL``, default ``http://127.0.0.1:11434/v1`` | none |
| ``openai:MODEL@URL``, ``anthropic:MODEL@URL``, ``ollama:MODEL@URL`` | URL | none |
| ``@NAME`` with ``base_url`` | ``base_url`` | the variable ``api_key_env`` names, else none |
| ``@NAME`` without ``base_url`` | the provider's own endpoint, as above | ``api_key_env``'s variable, else as above |

The provider SDKs would otherwise fill in what Palui did not choose from the environment
(``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_AUTH_TOKEN``, profiles on disk,
``OPENAI_ORG_ID``, ``*_CUSTOM_HEADERS``…), so every client gets its base URL and a key
explicitly, and a client for any endpoint but the provider's own gets a wire guard
(:class:`_WireGuard`): on every request it removes the credential headers and the SDK's
ambient headers, then sets only the key Palui chose, and only towards the configured
origin (a redirect elsewhere gets no key). A key-less client is built with the placeholder
:data:`NO_KEY` (the SDKs refuse an empty key); the guard takes it off every request, and it
is never a redaction word (:func:`secrets`).
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from palui.errors import ModelConfigError

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

    from palui.config import ModelEntry

OPENAI_ENDPOINT = "https://api.openai.com/v1"
ANTHROPIC_ENDPOINT = "https://api.anthropic.com"
OLLAMA_ENDPOINT = "http://127.0.0.1:11434/v1"
#: The provider's standard key variable, sent only to its own endpoint.
STANDARD_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: What a key-less client is built with; the wire guard removes it from every request.
NO_KEY = "palui-no-key"
ANTHROPIC_MAX_TOKENS = 4096
#: Secrets shorter than this are not redacted: they would blank out ordinary words.
MIN_SECRET_LEN = 6
# Headers that carry credentials or account ids; a guarded client sends only Palui's own.
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "openai-organization", "openai-project"})
# The SDKs add headers from these variables to every request.
_CUSTOM_HEADER_ENV = {"openai": "OPENAI_CUSTOM_HEADERS", "anthropic": "ANTHROPIC_CUSTOM_HEADERS"}
SCRIPT_HINT = "Without a provider key you can use the replay model: --model script:PATH (see the README)."


@dataclass(frozen=True)
class Route:
    """Where one model string's requests go. ``provider`` is ``openai``, ``anthropic`` or ``ollama``
    (ollama speaks the OpenAI wire); ``key_env`` names the variable whose value ``key`` is sent,
    None for no key; ``own_endpoint`` is True only for OpenAI's and Anthropic's own endpoints."""

    spec: str
    provider: str
    model_name: str
    base_url: str
    key_env: str | None = None
    key: str | None = field(default=None, repr=False)
    own_endpoint: bool = False

    @property
    def wire(self) -> str:
        return "anthropic" if self.provider == "anthropic" else "openai"


def public_spec(spec: str) -> str:
    """``spec`` as shown to the person: a password in a base URL replaced by ``***``."""
    head, at, url = spec.partition("@")
    try:
        password = urlsplit(url).password if at else None
    except ValueError:
        return spec
    return spec.replace(f":{password}@", ":***@", 1) if password else spec


def route(spec: str, env: Mapping[str, str], tables: Mapping[str, ModelEntry]) -> Route:
    """Decide endpoint and key for ``spec`` (a provider string or ``@NAME``) — the table above.

    Raises:
        ModelConfigError: an unknown provider or ``@NAME``, a base URL that is not http(s),
            or a key that must be sent but is not in the environment.
    """
    from palui.text.display import named  # a mistaken paste is echoed cut and escaped

    shown = public_spec(spec)
    if spec.startswith("@"):
        entry = tables.get(spec[1:])
        if entry is None:
            known = ", ".join(f"@{n}" for n in sorted(tables)) or "none is configured"
            raise ModelConfigError(f"model {named(shown)}: no [models.{spec[1:]}] table in the configuration "
                                   f"(palui.toml, or PALUI_MODELS__{spec[1:].upper()}__MODEL); named models: {known}")
        provider, _, name = entry.model.partition(":")
        return _route(spec, f"model {named(shown)} ([models.{entry.name}] in {entry.where})", provider, name,
                      entry.base_url, entry.api_key_env, env)
    provider, _, rest = spec.partition(":")
    if provider not in ("openai", "anthropic", "ollama"):
        raise ModelConfigError(f"model {named(shown)}: unknown provider {named(provider)} "
                               "(use openai:, anthropic:, ollama:, script: or @NAME)")
    name, at, url = rest.partition("@")
    if not name or (at and not url):
        raise ModelConfigError(f"model {named(shown)}: expected {provider}:MODEL or {provider}:MODEL@BASE_URL")
    # A base URL in the model string gets no key: only a [models.NAME] table can name one.
    return _route(spec, f"model {named(shown)}", provider, name, url or None, None, env)


def _route(spec: str, what: str, provider: str, name: str, base_url: str | None, key_env: str | None,
           env: Mapping[str, str]) -> Route:
    own = base_url is None and provider != "ollama"
    if base_url is None and provider == "ollama":
        base_url = env.get("OLLAMA_BASE_URL") or OLLAMA_ENDPOINT
        what += " (OLLAMA_BASE_URL)" if env.get("OLLAMA_BASE_URL") else ""
    if base_url is None:
        base_url = OPENAI_ENDPOINT if provider == "openai" else ANTHROPIC_ENDPOINT
        key_env = key_env or STANDARD_KEYS[provider]
    if not _is_http_url(base_url):
        raise ModelConfigError(f"{what}: the base URL must be an http:// or https:// URL with a host")
    if provider == "anthropic" and not own:
        # The Anthropic SDK appends /v1/messages itself: accept a base URL written with /v1 too.
        base_url = base_url.rstrip("/").removesuffix("/v1")
    key = None
    if key_env:
        key = env.get(key_env) or None
        if key is None:
            to = base_url if not own else f"{base_url} only"
            raise ModelConfigError(f"{what} needs {key_env} in the environment (it is sent to {to}). {SCRIPT_HINT}")
    return Route(spec, provider, name, base_url, key_env if key else None, key, own)


def _is_http_url(url: str) -> bool:
    try:
        u = urlsplit(url)
        return u.scheme in ("http", "https") and bool(u.hostname) and (u.port is None or u.port > 0)
    except ValueError:
        return False


def secrets(r: Route) -> tuple[str, ...]:
    """The values to redact from this model's messages (spec §10): the key sent and a password in
    the base URL — never :data:`NO_KEY` or any other value that was not sent."""
    try:
        password = urlsplit(r.base_url).password
    except ValueError:
        password = None
    return tuple(v for v in (r.key, password) if v and len(v) >= MIN_SECRET_LEN)


def build(r: Route, env: Mapping[str, str]) -> tuple[Model, ModelSettings | None]:
    """The model library's model for ``r``, with its SDK client (retries off: ours, within the
    turn's time budget). Returns (model, model settings or None)."""
    guard = None if r.own_endpoint else _WireGuard(r, env)
    if r.wire == "openai":
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = AsyncOpenAI(base_url=r.base_url, api_key=r.key or NO_KEY, max_retries=0,
                             http_client=DefaultAsyncHttpxClient(event_hooks={"request": [guard]}) if guard else None)
        if guard:
            guard.keep = dict(client.auth_headers) if r.key else guard.url_auth
        return OpenAIChatModel(r.model_name, provider=OpenAIProvider(openai_client=client)), None
    from anthropic import AsyncAnthropic
    from anthropic import DefaultAsyncHttpxClient as AnthropicHttpClient
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    # An explicit api_key also keeps the SDK from reading ANTHROPIC_AUTH_TOKEN and profiles on disk.
    aclient = AsyncAnthropic(base_url=r.base_url, api_key=r.key or NO_KEY, max_retries=0,
                             http_client=AnthropicHttpClient(event_hooks={"request": [guard]}) if guard else None)
    if guard:
        guard.keep = dict(aclient.auth_headers) if r.key else guard.url_auth
    return (AnthropicModel(r.model_name, provider=AnthropicProvider(anthropic_client=aclient)),
            {"max_tokens": ANTHROPIC_MAX_TOKENS})


class _WireGuard:
    """A request hook: the request's credential headers become exactly ``keep`` (the SDK's header
    for Palui's key, else the base URL's own user and password, else nothing), and only towards
    the route's own origin."""

    def __init__(self, r: Route, env: Mapping[str, str]) -> None:
        self.origin = _origin(r.base_url)
        custom = env.get(_CUSTOM_HEADER_ENV[r.wire], "")
        # Parsed as the SDKs do: one "Name: value" per line.
        self.strip = _CREDENTIAL_HEADERS | {line.partition(":")[0].strip().lower()
                                            for line in custom.split("\n") if ":" in line}
        # A user and password written in the base URL itself are that URL's own credentials
        # (HTTP Basic, as httpx sends them); only a model string can carry them (a table may not).
        u = urlsplit(r.base_url)
        userinfo = f"{unquote(u.username or '')}:{unquote(u.password or '')}".encode()
        self.url_auth = {"Authorization": "Basic " + b64encode(userinfo).decode()} if u.username or u.password else {}
        self.keep: dict[str, str] = {}

    async def __call__(self, request: Any) -> None:
        for name in [n for n in request.headers if n.lower() in self.strip]:
            del request.headers[name]
        if self.keep and _origin(str(request.url)) == self.origin:
            request.headers.update(self.keep)


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urlsplit(url)
    return (u.scheme, (u.hostname or "").lower(), u.port or (443 if u.scheme == "https" else 80))
