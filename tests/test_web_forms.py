"""The web forms' models (palui.web.forms): an optional number left empty is None, a bad one a UsageError
naming the field — never another exception (which the server would answer with a 500)."""

from __future__ import annotations

import pytest

from palui.errors import UsageError
from palui.web.forms import JobForm, ServerForm, form_as


@pytest.mark.parametrize(("model", "field"), [(JobForm, "token_cap"), (ServerForm, "timeout")])
def test_an_optional_number_left_empty_is_none(model, field) -> None:
    assert getattr(form_as(model, {field: ""}), field) is None
    assert getattr(form_as(model, {field: "  "}), field) is None
    assert getattr(form_as(model, {}), field) is None


@pytest.mark.parametrize(("model", "field", "bad"), [
    (JobForm, "token_cap", "-1"), (JobForm, "token_cap", "abc"), (JobForm, "token_cap", str(2**64)),
    (ServerForm, "timeout", "0"), (ServerForm, "timeout", "abc"), (ServerForm, "timeout", "86401"),
])
def test_an_optional_number_out_of_range_is_refused_naming_the_field(model, field, bad) -> None:
    with pytest.raises(UsageError, match=f"^{field}: "):
        form_as(model, {field: bad})


def test_an_optional_number_in_range_is_kept() -> None:
    assert form_as(JobForm, {"token_cap": "5000"}).token_cap == 5000
    assert form_as(ServerForm, {"timeout": "2.5"}).timeout == 2.5


@pytest.mark.parametrize(("model", "field", "bad", "said"), [
    (JobForm, "token_cap", "99999999999999", "token_cap: must be greater than 0 and at most 1,000,000,000,000 tokens"),
    (JobForm, "tz", "Europe/Paris\x1b[2J", "tz: must not contain control characters"),
    (JobForm, "tz", "Mars/Olympus", "tz: unknown time zone 'Mars/Olympus'"),
    (ServerForm, "timeout", "inf", "timeout: must be a finite number"),
])
def test_a_field_that_gives_what_a_setting_gives_takes_its_rule(model, field, bad, said) -> None:
    """A job's own token cap and zone are ``caps.job_daily_tokens`` and ``caps.timezone`` for one job, a
    server's timeout ``mcp.call_timeout_seconds`` for one server: the same rule as in palui.toml (spec §10.4)."""
    with pytest.raises(UsageError) as e:
        form_as(model, {field: bad})
    assert str(e.value) == said
