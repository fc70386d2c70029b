"""A provider key goes only to its provider (spec §9.1).

Real provider SDKs talk HTTP to ``tests/support/fake_llm.py`` on 127.0.0.1, which records the
headers it receives. ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` are set in the environment
of every test: a base URL in a model string gets no key, ``ollama:`` none (wherever
``OLLAMA_BASE_URL`` points), and a ``[models.NAME]`` table gets exactly the key its
``api_key_env`` names. Turns run through ``palui run --json`` and the service API; the
``[models.NAME]`` configuration is checked at start like every other key.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from palui.config import ModelEntry, load_settings
from palui.config_models import MODEL_TABLE_KEYS
from palui.errors import ConfigError, ModelConfigError
from support.fake_llm import FakeLLM

OPENAI_KEY = "sk-openai-REAL-0123456789"
ANTHROPIC_KEY = "sk-ant-REAL-0123456789"
LOCAL_KEY = "sk-local-0123456789"
PROVIDER_KEYS = (OPENAI_KEY, ANTHROPIC_KEY)
VIA = pytest.mark.parametrize("via", ["cli", "service"])


@pytest.fixture(autouse=True)
def provider_keys(monkeypatch):
    """The person's real provider keys are in the environment (test values; the CLI copies os.environ)."""
    for name in ("LOCAL_KEY", "OLLAMA_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN",
                 "OPENAI_CUSTOM_HEADERS", "ANTHROPIC_CUSTOM_HEADERS", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)


@pytest.fixture
def fake():
    with FakeLLM() as f:
        yield f


def write_toml(home: Path, text: str) -> None:
    (home / "palui.toml").write_text(text, encoding="utf-8")


def local_table(url: str, model: str = "openai:llama3", key_env: str | None = "LOCAL_KEY", name: str = "local") -> str:
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    return f'[models.{name}]\nmodel = "{model}"\nbase_url = "{url}"\n{key}'


async def turn(via: str, cli, model: str | None, text: str = "hi") -> dict:
    """One turn through ``palui run --json`` or the service API; the result's JSON."""
    if via == "cli":
        r = cli("run", "--json", *(["--model", model] if model else []), text)
        assert r.stdout.strip(), r.stderr
        return json.loads(r.stdout)
    from palui.service import Service

    svc = Service()  # after the test wrote palui.toml
    try:
        result = await svc.turns.send(text, model=model)
        return {**result, "inbox": svc.notifier.inbox()}
    finally:
        svc.db.close()


def credentials(fake: FakeLLM) -> list[tuple[str | None, str | None]]:
    """(Authorization, x-api-key) of every request the fake received."""
    return [(q.headers.get("authorization"), q.headers.get("x-api-key")) for q in fake.requests]


def assert_never_sent(fake: FakeLLM, *secrets: str) -> None:
    assert fake.requests, "the fake received no request"
    for q in fake.requests:
        for name, value in q.headers.items():
            for s in secrets:
                assert s not in value, f"header {name} carried a secret"


# -- no key to a base URL -------------------------------------------------------------------------


@pytest.mark.slow
@VIA
async def test_openai_base_url_gets_no_key(via, cli, fake):
    fake.text("hello from a local server")
    r = await turn(via, cli, f"openai:m@{fake.openai_url}")
    assert r["status"] == "done" and r["answer"] == "hello from a local server", r
    assert credentials(fake) == [(None, None)]
    assert_never_sent(fake, *PROVIDER_KEYS, "palui-no-key")


@pytest.mark.slow
@VIA
async def test_anthropic_base_url_gets_no_key(via, cli, fake):
    fake.text("hello")
    r = await turn(via, cli, f"anthropic:m@{fake.anthropic_url}")
    assert r["status"] == "done", r
    assert [q.path for q in fake.requests] == ["/v1/messages"]
    assert credentials(fake) == [(None, None)]
    assert_never_sent(fake, *PROVIDER_KEYS, "palui-no-key")


@pytest.mark.slow
@VIA
async def test_ollama_gets_no_key_wherever_ollama_base_url_points(via, cli, fake, monkeypatch):
    monkeypatch.setenv("OLLAMA_BASE_URL", fake.openai_url)
    fake.text("hello from ollama")
    r = await turn(via, cli, "ollama:llama3")
    assert r["status"] == "done" and r["answer"] == "hello from ollama", r
    assert fake.requests[0].body["model"] == "llama3"
    assert credentials(fake) == [(None, None)]
    assert_never_sent(fake, *PROVIDER_KEYS, "ollama", "palui-no-key")


@pytest.mark.slow
@VIA
async def test_a_named_model_without_api_key_env_gets_no_key(via, cli, home, fake):
    write_toml(home, local_table(fake.openai_url, key_env=None))
    fake.text("hello")
    r = await turn(via, cli, "@local")
    assert r["status"] == "done", r
    assert credentials(fake) == [(None, None)]
    assert_never_sent(fake, *PROVIDER_KEYS)


# -- the key a [models.NAME] table names, and only that one --------------------------------------------


@pytest.mark.slow
@VIA
async def test_a_named_model_gets_exactly_the_key_its_table_names(via, cli, home, fake, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", LOCAL_KEY)
    write_toml(home, local_table(fake.openai_url))
    fake.tool_call("recall__add_memory", {"text": "buy milk"}).text("Saved.")
    r = await turn(via, cli, "@local", "remember to buy milk")
    assert r["status"] == "done" and r["answer"] == "Saved.", r
    assert [q.body["model"] for q in fake.requests] == ["llama3", "llama3"]
    assert credentials(fake) == [(f"Bearer {LOCAL_KEY}", None)] * 2
    assert_never_sent(fake, *PROVIDER_KEYS)


@pytest.mark.slow
@VIA
async def test_a_named_anthropic_model_gets_its_own_key(via, cli, home, fake, monkeypatch):
    monkeypatch.setenv("CLAUDE_PROXY_KEY", LOCAL_KEY)
    write_toml(home, local_table(fake.anthropic_url + "/v1", model="anthropic:claude-x", key_env="CLAUDE_PROXY_KEY",
                                 name="claude"))
    fake.text("hello")
    r = await turn(via, cli, "@claude")
    assert r["status"] == "done", r
    [q] = fake.requests
    assert q.path == "/v1/messages" and q.body["model"] == "claude-x"
    sent = {v for v in (q.headers.get("authorization"), q.headers.get("x-api-key")) if v}
    assert sent and all(LOCAL_KEY in v for v in sent)  # whichever header the SDK uses, it is that key
    assert_never_sent(fake, *PROVIDER_KEYS)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["file", "PALUI_MODEL"])
def test_the_configured_model_may_be_a_named_model(where, cli, home, fake, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", LOCAL_KEY)
    write_toml(home, ('model = "@local"\n' if where == "file" else "") + local_table(fake.openai_url))
    fake.text("hello")
    r = cli("run", "--json", "hi", env={"PALUI_MODEL": "@local"} if where != "file" else None)
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "done", (r.stdout, r.stderr)
    assert credentials(fake) == [(f"Bearer {LOCAL_KEY}", None)]


@pytest.mark.slow
def test_a_named_model_from_environment_variables_field_by_field(cli, home, fake):
    # The file's table points at a closed port and names no key; the variables override both fields.
    write_toml(home, local_table("http://127.0.0.1:9/v1", key_env=None))
    env = {"PALUI_MODELS__LOCAL__BASE_URL": fake.openai_url, "PALUI_MODELS__LOCAL__API_KEY_ENV": "LOCAL_KEY",
           "LOCAL_KEY": LOCAL_KEY,
           # a table set only by variables
           "PALUI_MODELS__SPARE__MODEL": "openai:spare", "PALUI_MODELS__SPARE__BASE_URL": fake.openai_url}
    fake.text("one").text("two")
    r1 = cli("run", "--json", "--model", "@local", "hi", env=env)
    r2 = cli("run", "--json", "--model", "@spare", "hi", env=env)
    assert json.loads(r1.stdout)["answer"] == "one" and json.loads(r2.stdout)["answer"] == "two", (r1.stderr, r2.stderr)
    assert [q.body["model"] for q in fake.requests] == ["llama3", "spare"]
    assert credentials(fake) == [(f"Bearer {LOCAL_KEY}", None), (None, None)]


@pytest.mark.slow
async def test_the_sdks_own_environment_never_reaches_a_base_url(home, fake, monkeypatch):
    """What the SDKs read by themselves (auth token, custom headers, org and project ids) stays home too."""
    ambient = {"ANTHROPIC_AUTH_TOKEN": "ambient-secret-1", "OPENAI_ORG_ID": "ambient-secret-2",
               "OPENAI_PROJECT_ID": "ambient-secret-3",
               "OPENAI_CUSTOM_HEADERS": "Authorization: Bearer ambient-secret-4\nX-Gateway-Key: ambient-secret-5",
               "ANTHROPIC_CUSTOM_HEADERS": "X-Gateway-Key: ambient-secret-6"}
    for k, v in ambient.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LOCAL_KEY", LOCAL_KEY)
    write_toml(home, local_table(fake.openai_url))
    for model in (f"openai:m@{fake.openai_url}", f"anthropic:m@{fake.anthropic_url}", "@local"):
        fake.text("ok")
        assert (await turn("service", None, model))["status"] == "done"
    assert_never_sent(fake, *PROVIDER_KEYS, *(f"ambient-secret-{i}" for i in range(1, 7)))
    assert credentials(fake) == [(None, None), (None, None), (f"Bearer {LOCAL_KEY}", None)]


@pytest.mark.slow
async def test_a_redirect_to_another_origin_gets_no_key(home, fake, monkeypatch):
    """The key goes to the table's base URL only: a server redirecting elsewhere does not pass it on."""
    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.send_response(307)
            self.send_header("Location", fake.openai_url + self.path.removeprefix("/v1"))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("LOCAL_KEY", LOCAL_KEY)
        write_toml(home, local_table(f"http://127.0.0.1:{server.server_address[1]}/v1"))
        fake.text("redirected")
        r = await turn("service", None, "@local")
    finally:
        server.shutdown()
        server.server_close()
    assert r["status"] == "done" and r["answer"] == "redirected", r
    assert credentials(fake) == [(None, None)]
    assert_never_sent(fake, LOCAL_KEY, *PROVIDER_KEYS)


# -- the providers' own endpoints ----------------------------------------------------------------------


@pytest.mark.parametrize("spec,endpoint,key", [
    ("openai:gpt-test", "https://api.openai.com/v1/", OPENAI_KEY),
    ("anthropic:claude-test", "https://api.anthropic.com", ANTHROPIC_KEY),
])
@pytest.mark.slow
def test_a_provider_key_goes_to_its_own_endpoint_only(spec, endpoint, key, fake, monkeypatch):
    """``openai:MODEL`` / ``anthropic:MODEL`` get their standard key, at the provider's own endpoint, even when
    the SDK's base-URL variable points elsewhere (the SDK would otherwise send the key there)."""
    from palui.models import resolve_model

    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_url)
    client = resolve_model(spec).model.client
    assert str(client.base_url).rstrip("/") == endpoint.rstrip("/")
    assert client.api_key == key
    assert fake.requests == []


# -- messages --------------------------------------------------------------------------------------------


@pytest.mark.slow
@VIA
async def test_an_error_names_the_model_as_written(via, cli, fake, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")  # no key at all: the SDK is given a placeholder
    monkeypatch.setenv("OLLAMA_BASE_URL", fake.openai_url)
    fake.error(404, message="model 'llama3' not found, try pulling it first")
    r = await turn(via, cli, "ollama:llama3")
    assert r["status"] == "error"
    assert "ollama:llama3: the provider refused the request (HTTP 404): model 'llama3' not found" in r["error"]
    assert "[redacted]" not in r["error"]


@pytest.mark.slow
@VIA
async def test_an_error_never_contains_a_key(via, cli, home, fake, monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", LOCAL_KEY)
    write_toml(home, local_table(fake.openai_url))
    fake.error(401, message=f"Incorrect API key provided: {LOCAL_KEY}")
    r = await turn(via, cli, "@local")
    assert r["status"] == "error"
    assert "@local: the provider refused the request (HTTP 401): Incorrect API key provided: [redacted]" in r["error"]
    for key in (LOCAL_KEY, *PROVIDER_KEYS):
        assert key not in json.dumps(r)


@pytest.mark.slow
@VIA
async def test_an_unknown_named_model_is_a_clear_error(via, cli, home, fake):
    write_toml(home, local_table(fake.openai_url, key_env=None))
    if via == "cli":
        r = cli("run", "--json", "--model", "@nope", "hi")
        assert r.returncode == 1
        error = json.loads(r.stdout)["error"]
    else:
        error = (await turn(via, cli, "@nope"))["error"]
    assert "model '@nope': no [models.nope] table" in error and "@local" in error
    assert fake.requests == []


@pytest.mark.slow
def test_a_named_models_key_that_is_not_set_refuses_before_anything_is_sent(cli, home, fake):
    write_toml(home, local_table(fake.openai_url))  # LOCAL_KEY is not set
    r = cli("run", "--model", "@local", "hi")
    assert r.returncode == 1
    assert "needs LOCAL_KEY in the environment" in r.stderr and "[models.local]" in r.stderr
    assert fake.requests == []


def test_check_model_refuses_an_unknown_named_model(svc):
    with pytest.raises(ModelConfigError, match=r"no \[models\.nope\] table"):
        svc.turns.check_model("@nope")


# -- the configuration ------------------------------------------------------------------------------------


def test_model_tables_are_read_from_the_file_and_the_environment(home):
    write_toml(home, '[models.local]\nmodel = "openai:llama3"\nbase_url = "http://127.0.0.1:8000/v1"\n'
                     '[models.work]\nmodel = "anthropic:claude-x"\napi_key_env = "WORK_KEY"\n')
    s = load_settings({"PALUI_HOME": str(home), "PALUI_MODELS__LOCAL__API_KEY_ENV": "LOCAL_KEY",
                       "PALUI_MODELS__WORK__API_KEY_ENV": ""})
    assert s.models["local"] == ModelEntry("local", "openai:llama3", "http://127.0.0.1:8000/v1", "LOCAL_KEY",
                                           where=f"{home.resolve() / 'palui.toml'}, environment variable "
                                                 "PALUI_MODELS__LOCAL__API_KEY_ENV")
    assert (s.models["work"].model, s.models["work"].base_url, s.models["work"].api_key_env) == (
        "anthropic:claude-x", None, None)  # an empty variable unsets a field
    assert load_settings({"PALUI_HOME": str(home / "none")}).models == {}


TABLE = '[models.local]\nmodel = "openai:m"\n'
# (palui.toml text, env, words that must all be in the message, words that must not)
BAD = [
    ('[models.local]\nbase_url = "http://h/v1"', {}, ["palui.toml", "[models.local]", "missing key 'model'"], []),
    (TABLE + 'colour = "red"', {}, ["palui.toml", "unknown key 'models.local.colour'", "api_key_env"], []),
    (TABLE + "base_url = 8000", {}, ["models.local.base_url", "must be a string"], []),
    (TABLE + 'base_url = "ftp://h/v1"', {}, ["palui.toml", "models.local.base_url", "http:// or https://"], []),
    (TABLE + 'base_url = "127.0.0.1:8000/v1"', {}, ["models.local.base_url", "http:// or https://"], []),
    (TABLE + 'base_url = "http://me:sk-in-url-123@h/v1"', {}, ["models.local.base_url", "credentials"],
     ["sk-in-url-123"]),
    (TABLE + 'api_key_env = "sk-the-key-itself-123"', {}, ["models.local.api_key_env", "name of an environment"],
     ["sk-the-key-itself-123"]),
    (TABLE + 'api_key_env = "1KEY"', {}, ["models.local.api_key_env", "name of an environment"], []),
    (TABLE + 'api_key_env = "PALUI_HOME"', {}, ["models.local.api_key_env", "PALUI_"], []),
    ('[models.local]\nmodel = "script:x.json"', {}, ["models.local.model", "openai:MODEL"], []),
    ('[models.local]\nmodel = "openai:m@http://h/v1"', {}, ["models.local.model", "base_url"], []),
    ('[models.local]\nmodel = "openai:"', {}, ["models.local.model", "openai:MODEL"], []),
    ("models = 5", {}, ["palui.toml", "key 'models' must be a table"], []),
    ('[models]\nlocal = "openai:m"', {}, ["palui.toml", "key 'models.local' must be a table"], []),
    ('[models.Local]\nmodel = "openai:m"', {}, ["[models.Local]", "lower-case"], []),
    ('[models."a__b"]\nmodel = "openai:m"', {}, ["[models.a__b]", "lower-case"], []),
    ("", {"PALUI_MODELS__LOCAL__COLOUR": "x"}, ["PALUI_MODELS__LOCAL__COLOUR", "PALUI_MODELS__NAME__FIELD"], []),
    ("", {"PALUI_MODELS__LOCAL": "{}"}, ["PALUI_MODELS__LOCAL", "PALUI_MODELS__NAME__FIELD"], []),
    ("", {"PALUI_MODELS": "{}"}, ["PALUI_MODELS", "PALUI_MODELS__NAME__FIELD"], []),
    (TABLE, {"PALUI_MODELS__LOCAL__BASE_URL": "file:///etc"}, ["PALUI_MODELS__LOCAL__BASE_URL",
                                                             "models.local.base_url", "http://"], []),
    ("", {"PALUI_MODELS__LOCAL__BASE_URL": "http://h/v1"}, ["PALUI_MODELS__LOCAL__BASE_URL", "missing key 'model'"],
     []),
]


@pytest.mark.parametrize("toml,env,words,absent", BAD, ids=[f"{i}-{w[-1]}" for i, (_, _, w, _) in enumerate(BAD)])
def test_a_bad_model_table_refuses_to_start(home, toml, env, words, absent):
    if toml:
        write_toml(home, toml)
    with pytest.raises(ConfigError) as e:
        load_settings({"PALUI_HOME": str(home), **env})
    for w in words:
        assert w in str(e.value)
    for w in absent:
        assert w not in str(e.value)


def test_the_cli_refuses_to_start_on_a_bad_model_table(cli, home):
    write_toml(home, TABLE + 'base_url = "ftp://h/v1"')
    r = cli("tools", "list")
    assert r.returncode == 1 and r.stdout == ""
    assert "configuration error" in r.stderr and "models.local.base_url" in r.stderr
    assert not (home / "palui.db").exists()


def test_the_readme_says_which_key_goes_where():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    for key in MODEL_TABLE_KEYS:
        assert f"| `models.NAME.{key}` |" in readme
    section = readme[readme.index("## Models"):readme.index("### The `script:` model")]
    for words in ("| key sent |", "`[models.NAME]`", "api_key_env", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                  "OLLAMA_BASE_URL", "PALUI_MODELS__NAME__FIELD"):
        assert words in section


@pytest.mark.slow
async def test_a_user_and_password_in_the_base_url_are_its_own_and_never_shown(home, fake):
    """``openai:M@http://user:pass@host/v1``: the URL's own credentials go to it (HTTP Basic), no provider key."""
    import base64

    url = fake.openai_url.replace("http://", "http://me:pw-in-url-123@")
    fake.text("ok").error(400, message="no such model")
    assert (await turn("service", None, f"openai:m@{url}"))["status"] == "done"
    r = await turn("service", None, f"openai:m@{url}")
    basic = "Basic " + base64.b64encode(b"me:pw-in-url-123").decode()
    assert credentials(fake) == [(basic, None)] * 2
    assert_never_sent(fake, *PROVIDER_KEYS)
    assert r["status"] == "error" and "openai:m@http://me:***@127.0.0.1" in r["error"]
    assert "pw-in-url-123" not in json.dumps(r)
