"""The pure rules of questions from servers and of OAuth (spec §7.8, §7.9), as tables: which requested schemas a
form can show (MCP 2025-11-25 "Requested Schema"), how answers are typed and checked, the refresh margin, the OAuth
error sentence, the OAuth log filter, and the CIMD configuration key."""

from __future__ import annotations

import logging

import pytest

from palui.config import load_settings
from palui.errors import ConfigError
from palui.text.commands import CommandError, answer_args, parse
from palui.text.elicitation import answer_problems, apply_defaults, fields, parse_pairs, question_text, schema_problem


def form(**props) -> dict:
    return {"type": "object", "properties": props}


@pytest.mark.parametrize("prop", [
    {"type": "string"}, {"type": "string", "format": "email", "minLength": 3, "maxLength": 80, "title": "Mail"},
    {"type": "string", "format": "date-time"}, {"type": "integer", "minimum": 1, "maximum": 12, "default": 2},
    {"type": "number"}, {"type": "boolean", "default": False, "description": "yes?"},
    {"type": "string", "enum": ["a", "b"], "default": "a"},
    {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},  # legacy titled
    {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
    {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "minItems": 1, "default": ["x"]},
    {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}, "maxItems": 1},
])
def test_flat_primitive_schemas_are_shown(prop):
    assert schema_problem(form(f=prop)) is None


@pytest.mark.parametrize("schema,why", [
    (form(f={"type": "object", "properties": {}}), "not a primitive"),
    (form(f={"type": "array", "items": {"type": "string"}}), "multi-select enum"),
    (form(f={"type": "string", "format": "hostname"}), "format 'hostname'"),
    (form(f={"type": "string", "pattern": "^a"}), "uses 'pattern'"),
    (form(f={"$ref": "#/x"}), "not a primitive"),
    (form(f={"type": "integer", "default": "two"}), "default does not fit"),
    (form(f={"type": "string", "enum": ["a"], "enumNames": ["A", "B"]}), "enumNames must match"),
    ({"type": "object", "properties": {"f": {"type": "string"}}, "required": ["g"]}, "required list"),
    ({"type": "object", "properties": {}, "additionalProperties": False}, "additionalProperties"),
    ({"type": "array"}, "not an object"), (None, "not an object"),
])
def test_other_schemas_are_declined(schema, why):
    assert why in (schema_problem(schema) or "")


BOOKING = {"type": "object", "required": ["confirm"], "properties": {
    "confirm": {"type": "boolean"}, "party_size": {"type": "integer", "minimum": 1, "maximum": 12, "default": 2},
    "seating": {"type": "string", "enum": ["inside", "terrace"], "default": "inside"},
    "days": {"type": "array", "items": {"anyOf": [{"const": "mon", "title": "Monday"}, {"const": "tue",
                                                                                         "title": "Tuesday"}]}},
    "note": {"type": "string", "maxLength": 20}}}


def test_answers_are_typed_from_the_schema_and_checked():
    content = parse_pairs(BOOKING, ["confirm=yes", "party_size=4", "seating=Terrace", "days=Monday,tue",
                                    "note=by the door"])
    assert content == {"confirm": True, "party_size": 4, "seating": "terrace", "days": ["mon", "tue"],
                       "note": "by the door"}
    assert answer_problems(BOOKING, content) == []
    with pytest.raises(ValueError) as e:
        parse_pairs(BOOKING, ["confirm=maybe", "party_size=lots", "seating=roof", "colour=red", "oops"])
    said = str(e.value)
    for bit in ("'confirm' must be yes or no", "'party_size' must be a whole number", "'seating' must be one of",
                "'colour' is not asked for", "'oops' is not field=value"):
        assert bit in said
    assert "maybe" not in said and "lots" not in said  # the person's values are not echoed
    filled = apply_defaults(BOOKING, {"confirm": False})
    assert filled == {"confirm": False, "party_size": 2, "seating": "inside"}
    assert answer_problems(BOOKING, {"party_size": 20, "note": "x" * 21, "days": ["wed"]}) == [
        "'confirm' is required", "'party_size' is out of range", "'note' has the wrong length",
        "'days' is not one of the choices"]


def test_the_channel_text_is_self_contained_and_escaped():
    e = {"id": "e-1", "connector": "mcp-x", "tool": "mcp-x__book", "mode": "form", "message": "Book\u202e it?",
         "schema": BOOKING, "expires_at": "2026-12-01T10:00:00+00:00"}
    text = question_text(e)
    assert "In the server's words:" in text and "Book\\u202e it?" in text and "\u202e" not in text
    assert "/answer e-1 confirm=…" in text and "/deny e-1" in text
    assert "party_size (whole number 1–12, optional, default 2)" in text
    assert [f.kind for f in fields(BOOKING)] == ["boolean", "integer", "choice", "choices", "string"]
    url = question_text({**e, "mode": "url", "url": "https://evil.example/\u200bx", "schema": None})
    assert "https://evil.example/\\u200bx" in url and "host: evil.example" in url and "never opens it" in url


def test_answer_command():
    assert parse("/answer e-1 a=1").arg == "e-1 a=1"
    with pytest.raises(CommandError):
        parse("/answer")
    assert answer_args('e-1 note="by the door" x=1') == ("e-1", ["note=by the door", "x=1"])
    with pytest.raises(CommandError):
        answer_args('e-1 note="open')


@pytest.mark.parametrize("lifetime,margin", [(3600, 360), (600, 60), (120, 60), (60, 30), (4, 2), (86400, 8640)])
def test_refresh_margin(lifetime, margin):
    from palui.connectors.mcp.oauth import refresh_margin

    assert refresh_margin(lifetime) == margin


def test_oauth_errors_and_log_records_carry_no_secret():
    from mcp.client.auth import OAuthRegistrationError, OAuthTokenError

    from palui.connectors.mcp.oauth import describe_oauth_error
    from palui.connectors.mcp.oauth.redact import OAuthLogFilter, remember_secret

    body = '{"error":"invalid_grant","error_description":"code \\u202e used","access_token":"at_SECRETSECRET"}'
    said = describe_oauth_error(OAuthTokenError(f"Token exchange failed (400): {body}"))
    assert said == ("the token endpoint refused the sign-in: HTTP 400, invalid_grant (code \\u202e used"
                    " (contains hidden characters))")
    assert "SECRET" not in describe_oauth_error(OAuthTokenError("Invalid token response: input_value='at_SECRET'"))
    assert describe_oauth_error(OAuthRegistrationError('Registration failed: 400 {"client_secret":"cs"}')) == (
        "the authorization server refused to register Palui as a client: HTTP 400")
    remember_secret("rt_VERYSECRETVALUE")
    try:
        raise OAuthTokenError(f"Token exchange failed (400): {body}")
    except OAuthTokenError:
        import sys

        record = logging.LogRecord("mcp.client.auth.oauth2", logging.ERROR, __file__, 1,
                                   "OAuth flow error with rt_VERYSECRETVALUE", None, sys.exc_info())
    assert OAuthLogFilter().filter(record)
    assert record.exc_info is None and "VERYSECRET" not in record.getMessage()
    assert "invalid_grant" in record.getMessage() and "at_SECRETSECRET" not in record.getMessage()


@pytest.mark.parametrize("value,ok", [("https://palui.example.org/client.json", True), ("http://x.org/c.json", False),
                                      ("https://x.org/", False), ("https://x.org", False)])
def test_client_metadata_url_must_be_https_with_a_path(home, value, ok):
    env = {"PALUI_HOME": str(home), "PALUI_MCP__OAUTH__CLIENT_METADATA_URL": value}
    if ok:
        assert load_settings(env).mcp.oauth.client_metadata_url == value
    else:
        with pytest.raises(ConfigError, match="mcp.oauth.client_metadata_url"):
            load_settings(env)
