"""Every numeric setting has a range, checked at start (spec §10.4): a value outside it refuses to start
naming the key and the range, whatever the file or variable holds; the loader never fails another way.

The property tests (Hypothesis) write random TOML values of every type to every key, and random text to
every variable: the loader either accepts a value inside its range or refuses with a ConfigError that names
the key, never another exception.
"""

from __future__ import annotations

import math
import tempfile
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from palui.config import documented_keys, load_settings
from palui.config_rules import NUMERIC_KINDS
from palui.config_schema import KEYS, RANGES, Settings, checked, range_text
from palui.errors import ConfigError

NUMERIC = sorted(k for k, key in KEYS.items() if key.rule.kind in NUMERIC_KINDS)


def env_for(home, **extra) -> dict[str, str]:
    return {"PALUI_HOME": str(home), **extra}


def toml_line(key: str, value_text: str) -> str:
    section, _, leaf = key.rpartition(".")
    return (f"[{section}]\n" if section else "") + f"{leaf} = {value_text}\n"


def test_every_numeric_key_has_a_range_and_only_those():
    assert set(RANGES) == set(NUMERIC)
    assert {"limits.message_chars", "gateway.wait_seconds", "caps.gateway_calls_per_hour"} <= set(NUMERIC)
    for key in NUMERIC:  # every default lies inside its own range
        default = documented_keys()[key]
        assert 0 < default <= RANGES[key][0], key


@pytest.mark.parametrize("key", NUMERIC)
def test_a_value_above_the_range_refuses_to_start_naming_the_key_and_the_range(home, key):
    high, unit = RANGES[key]
    (home / "palui.toml").write_text(toml_line(key, str(high + 1)))
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home))
    said = str(e.value)
    top = "65535" if key == "serve.port" else f"{high:,}"  # a port is written without a thousands comma
    assert "palui.toml" in said and f"key '{key}'" in said and top in said and unit in said, said
    variable = "PALUI_" + key.upper().replace(".", "__")
    (home / "palui.toml").unlink()
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home, **{variable: str(high + 1)}))
    assert variable in str(e.value) and top in str(e.value)
    (home / "palui.toml").write_text(toml_line(key, str(high)))  # the top of the range is accepted
    if key == "caps.webhook_runs_per_hour":  # a share of the hour: at most caps.runs_per_hour
        (home / "palui.toml").write_text(f"[caps]\nruns_per_hour = {high}\nwebhook_runs_per_hour = {high}\n")
    assert load_settings(env_for(home)).value(key) == high


@pytest.mark.parametrize("toml,key,words", [
    ("[approvals]\nchat_expiry_seconds = 99999999999999999999999\n", "approvals.chat_expiry_seconds",
     "must be greater than 0 and at most 2,592,000 seconds (30 days) (got 99999999999999999999999)"),
    ("[budgets]\nsteps = 99999999999999999999999999\n", "budgets.steps",
     "must be greater than 0 and at most 1,000 model steps"),
    ("[budgets]\nrepeat_calls = -1\n", "budgets.repeat_calls", "must be 0 (off) or a whole number greater than 0"),
    ("[limits]\nmessage_chars = 0\n", "limits.message_chars",
     "must be greater than 0 and at most 1,000,000 characters"),
    ("[gateway]\nwait_seconds = 1e9\n", "gateway.wait_seconds",
     "must be greater than 0 and at most 3,600 seconds (an hour)"),
])
def test_the_cli_refuses_to_start_on_a_value_out_of_range(cli, home, toml, key, words):
    (home / "palui.toml").write_text(toml)
    r = cli("status")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"configuration error: {home / 'palui.toml'}: key '{key}': {words}" in r.stderr, r.stderr
    assert not (home / "palui.db").exists()  # refused before touching the database


def test_a_number_of_thousands_of_digits_is_cut_when_echoed(home):
    digits = "9" * 5000
    with pytest.raises(ConfigError) as e:
        load_settings(env_for(home, PALUI_CAPS__DAILY_TOKENS=digits))
    said = str(e.value)
    assert "at most 1,000,000,000,000 tokens" in said and "(5,000 characters)" in said and len(said) < 300, said
    (home / "palui.toml").write_text(toml_line("caps.daily_tokens", digits))  # past Python's int limit
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(env_for(home))
    (home / "palui.toml").write_text("x = " + "[" * 5000)  # nested past the recursion limit
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(env_for(home))


@pytest.mark.parametrize("variable,value,form", [
    ("PALUI_CAPS", '{"daily_tokens": 5}', "PALUI_CAPS__DAILY_TOKENS=5"),
    ("PALUI_CAPS", '{"daily_tokens": 5, "timezone": "UTC"}', "PALUI_CAPS__DAILY_TOKENS=5 PALUI_CAPS__TIMEZONE=…"),
    ("PALUI_WEB", '{"allow_private": true}', "PALUI_WEB__ALLOW_PRIVATE=true"),
    ("PALUI_MCP", '{"oauth": {"client_metadata_url": "https://x/y"}}', "PALUI_MCP__OAUTH__CLIENT_METADATA_URL=…"),
    ("PALUI_NOTIFY", '{"apprise": ["tgram://SECRET/1"]}', "PALUI_NOTIFY__APPRISE=…"),
    ("PALUI_BUDGETS", "12", "PALUI_BUDGETS__STEPS=…"),
])
def test_a_section_as_json_is_refused_with_the_exact_variables_to_set(cli, variable, value, form):
    r = cli("status", env={variable: value})
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    section = variable.removeprefix("PALUI_").lower()
    assert f"environment variable {variable}: '{section}' is a section, not a key" in r.stderr, r.stderr
    assert f"e.g. {form}" in r.stderr and "SECRET" not in r.stderr, r.stderr


def test_the_form_given_works(cli):
    assert cli.json("status", "--json", env={"PALUI_CAPS__DAILY_TOKENS": "5"})["caps"]["daily_tokens"] == 5


# -- property tests ---------------------------------------------------------------------------------

def _toml(value: Any) -> str:
    """``value`` as a TOML value (the standard library reads TOML but does not write it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return '"' + "".join(c if c.isalnum() or c in " .:/-_" else f"\\U{ord(c):08x}" for c in value) + '"'
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f'"{k}" = {_toml(v)}' for k, v in value.items()) + "}"


_SCALARS = (st.booleans() | st.integers(min_value=-10**30, max_value=10**30) | st.floats()
            | st.text(max_size=30) | st.datetimes(timezones=st.just(UTC)) | st.dates() | st.times())
VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(st.characters(categories=["Ll"]), min_size=1, max_size=5), inner,
                                        max_size=3), max_leaves=6)
PROPERTY = settings(max_examples=300, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _accepted_or_refused_naming(key: str, home: Path, env: dict[str, str], where: str) -> None:
    try:
        s = load_settings(env)
    except ConfigError as e:
        assert key in str(e) and where in str(e), str(e)
        return
    if key in RANGES:  # an accepted number lies in its range
        value = s.value(key)
        assert not isinstance(value, bool) and 0 <= value <= RANGES[key][0], (key, value)


@PROPERTY
@given(key=st.sampled_from(sorted(KEYS)), value=VALUES)
def test_any_toml_value_of_any_key_is_accepted_in_range_or_refused_naming_the_key(key, value):
    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        (home / "palui.toml").write_text(toml_line(key, _toml(value)), encoding="utf-8")
        _accepted_or_refused_naming(key, home, env_for(home), "palui.toml")


@PROPERTY
@given(key=st.sampled_from(sorted(KEYS)),
       text=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)
       | st.integers().map(str) | st.floats().map(str))
def test_any_variable_text_is_accepted_in_range_or_refused_naming_the_key(key, text):
    with tempfile.TemporaryDirectory() as d:
        variable = "PALUI_" + key.upper().replace(".", "__")
        _accepted_or_refused_naming(key, Path(d), env_for(d, **{variable: text}), variable)


def test_the_range_words_are_the_ones_the_readme_shows():
    assert range_text("budgets.steps") == "1 to 1,000 model steps"
    assert range_text("budgets.repeat_calls") == "0 (off) to 1,000 calls"
    assert range_text("approvals.chat_expiry_seconds") == "above 0, up to 2,592,000 seconds (30 days)"


# -- pydantic reads the same model ------------------------------------------------------------------


def _nested(key: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    here = out
    *sections, leaf = key.split(".")
    for s in sections:
        here = here.setdefault(s, {})
    here[leaf] = value
    return out


_PATHS = {"home": Path("/h"), "data_dir": Path("/h"), "config_file": Path("/h/palui.toml")}


@PROPERTY
@given(key=st.sampled_from(sorted(KEYS)), value=VALUES)
@example(key="serve.host", value="127.0.0.1\x00").via("a control character")
@example(key="caps.timezone", value="Mars/Olympus").via("a check of the rule's own")
@example(key="budgets.seconds", value=math.inf).via("not finite")
@example(key="caps.daily_tokens", value=True).via("a boolean is not a number")
def test_pydantic_reads_the_model_with_the_same_rules(key, value):
    """``TypeAdapter(Settings)`` (pydantic reading the model's ``Annotated`` rules) accepts exactly the file
    values Palui's own check accepts, and gives the same value."""
    from pydantic import TypeAdapter, ValidationError

    try:
        ours = checked("palui.toml", key, value)
    except ConfigError:
        ours = ConfigError
    try:
        theirs = TypeAdapter(Settings).validate_python({**_PATHS, **_nested(key, value)}).value(key)
    except ValidationError:
        theirs = ConfigError
    if ours is None and KEYS[key].rule.kind == "int+?":  # never from a file: None is only an empty variable
        return
    assert theirs == ours, (key, value, ours, theirs)


def test_the_models_json_schema_has_the_ranges():
    from pydantic import TypeAdapter

    schema = TypeAdapter(Settings).json_schema()
    steps = schema["$defs"]["Budgets"]["properties"]["steps"]
    assert (steps["type"], steps["minimum"], steps["maximum"], steps["default"]) == ("integer", 1, 1000, 12)
    assert schema["$defs"]["Approvals"]["properties"]["chat_expiry_seconds"]["exclusiveMinimum"] == 0
