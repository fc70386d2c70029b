"""Which fields of a server's form ask for a secret (palui.text.secret_fields, spec §7.8): the words of the name,
title, format and description; a description's clause that warns against a secret does not ask for one."""

from __future__ import annotations

import pytest

from palui.text.secret_fields import secret_fields, secret_kind


@pytest.mark.parametrize(("name", "prop", "kind"), [
    ("password", {"type": "string"}, "a password"),
    ("x", {"type": "string", "format": "password"}, "a password"),
    ("apiKey", {"type": "string"}, "an API key"),
    ("code", {"type": "string", "title": "One-time code"}, "a one-time code"),
    ("code", {"type": "string", "description": "Your PIN"}, "a PIN"),
    ("code", {"type": "string", "description": "Your PIN, never stored"}, "a PIN"),
    ("code", {"type": "string", "description": "Enter the PIN. It is never stored."}, "a PIN"),
    ("t", {"type": "string", "description": "The token (never shared)"}, "a token"),
    ("iban", {"type": "string"}, "an IBAN"),
])
def test_a_field_that_asks_for_a_secret(name, prop, kind) -> None:
    assert secret_kind(name, prop) == kind


@pytest.mark.parametrize(("name", "prop"), [
    # server-everything's own form: a warning in the description is not a question
    ("integer", {"type": "integer", "description": "Your favorite integer (do not give us your phone number, pin, "
                                                  "or other sensitive info)"}),
    ("nick", {"type": "string", "description": "Not your password: your nickname"}),
    ("check", {"type": "boolean", "title": "Password saved?"}),  # yes/no never carries a secret
    ("pick", {"type": "string", "title": "PIN style", "enum": ["a", "b"]}),  # a choice from the server's list
    ("email", {"type": "string", "format": "email", "description": "never shared with anyone else"}),
])
def test_a_field_that_does_not(name, prop) -> None:
    assert secret_kind(name, prop) is None


def test_secret_fields_names_each_field() -> None:
    schema = {"type": "object", "properties": {"user": {"type": "string"},
                                               "pass": {"type": "string", "title": "Password"},
                                               "pin": {"type": "integer"}}}
    assert secret_fields(schema) == {"pass": "a password", "pin": "a PIN"}
    assert secret_fields(None) == {} and secret_fields({"properties": []}) == {}
