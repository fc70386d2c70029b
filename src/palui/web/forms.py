"""The web page's form fields and query strings as pydantic models, with the JSON API's bounds (spec §8.1).

A form sends text, so these models convert (``token_cap=500`` is the number 500; an empty optional field
is None) and ignore fields they do not name (``csrf``, ``back``); the bounds are those of
:mod:`palui.server.inputs` (a message's length, an id's, a denial reason's). :func:`form_as` validates,
and a value outside its model is a :class:`~palui.errors.UsageError` with the API's sentence, said on the
page as every refusal is (the form's flash message or the 400 page): nothing is converted by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

from palui.errors import UsageError
from palui.server.api import refusal
from palui.server.inputs import ID_CHARS, MESSAGE_CHARS, REASON_CHARS, Id

M = TypeVar("M", bound=BaseModel)


def _empty_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def setting(key: str) -> BeforeValidator:
    """A field that gives, for one thing, what the configuration key ``key`` gives for all (a job's own
    token cap is ``caps.job_daily_tokens``): its text read and held to the key's rule in the settings model,
    as palui.toml and the command line are (spec §10.4); empty is None. A refusal says what is allowed."""
    from palui.config_schema import option_value

    def read(value: Any) -> Any:
        if isinstance(value, str):
            return option_value(key, value, echo=False) if value.strip() else None
        return value

    return BeforeValidator(read)


#: An optional field a form may send empty.
EmptyIsNone = BeforeValidator(_empty_is_none)
Text = Annotated[str, StringConstraints(max_length=MESSAGE_CHARS)]
Short = Annotated[str, StringConstraints(max_length=ID_CHARS)]


class Form(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def form_as(model: type[M], data: Mapping[str, Any]) -> M:
    """``data`` (a form's fields, a query string, a path's parameters) as ``model``. Raises UsageError
    naming the field and what is wrong with it (never its value)."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as e:
        raise UsageError(refusal(e)[1]) from None


class ChatForm(Form):
    """``POST /chat/send`` and ``POST /chat/command``: a message or a command line, and the conversation."""

    message: Text = ""
    line: Text = ""
    conversation: Annotated[Id | None, EmptyIsNone] = None


class DenyForm(Form):
    """``POST /approvals/{id}/approve|deny``: a denial's reason (spec §5.5)."""

    reason: Annotated[Annotated[str, StringConstraints(max_length=REASON_CHARS)] | None, EmptyIsNone] = None


class AlwaysForm(Form):
    """``POST /approvals/{id}/always``: approve, and from now on the same (spec §5.9). ``confirm`` (a checkbox) for
    a destructive or unknown tool; the widenings are the fields ``widen.ARG`` (``pin``, ``any``, ``prefix``,
    ``one-of``) with their text in ``widen_text.ARG`` (:func:`widenings_of`)."""

    confirm: bool = False


def widenings_of(data: Mapping[str, Any]) -> dict[str, str]:
    """The widenings a card's form asks for (argument → ``any``, ``prefix:TEXT``, ``one-of:A,B``), the JSON API's
    bounds held. Raises UsageError naming the argument, never its value."""
    from palui.server.inputs import WIDEN_ARGS, WIDEN_CHARS

    out: dict[str, str] = {}
    for key, how in data.items():
        if not key.startswith("widen.") or how in ("", "pin"):
            continue
        arg = key.removeprefix("widen.")
        if not arg or len(arg) > ID_CHARS or how not in ("any", "prefix", "one-of"):
            raise UsageError(f"widen.{arg[:ID_CHARS]}: choose exactly this, any, prefix or one-of")
        text = str(data.get(f"widen_text.{arg}", "")).strip()
        if how != "any" and not text or len(text) > WIDEN_CHARS:
            raise UsageError(f"widen_text.{arg}: {how} needs a text of 1 to {WIDEN_CHARS:,} characters")
        out[arg] = "any" if how == "any" else f"{how}:{text}"
    if len(out) > WIDEN_ARGS:
        raise UsageError(f"at most {WIDEN_ARGS} arguments are widened")
    return out


class QuestionForm(Form):
    """``POST /elicitations/{id}/answer``: what to send the server (the fields are checked by the service)."""

    action: Literal["accept", "decline", "cancel"] = "accept"


class JobForm(Form):
    """``POST /jobs/add``."""

    name: Short = ""
    cron: Short = ""
    prompt: Text = ""
    token_cap: Annotated[int | None, setting("caps.job_daily_tokens")] = None
    tz: Annotated[str | None, setting("caps.timezone")] = None
    connectors: Text = ""


class ServerForm(Form):
    """``POST /connectors/add``: the MCP server's call timeout (seconds, ``mcp.call_timeout_seconds``'s range)."""

    timeout: Annotated[float | None, setting("mcp.call_timeout_seconds")] = None


class MemoryPath(Form):
    """``POST /memories/{kind}/{id}/{action}``."""

    kind: Literal["memory", "task"]
    id: int = Field(ge=1, le=2**63 - 1)
    action: Literal["forget", "trust"]


class GovernanceQuery(Form):
    """``GET /governance?days=N``."""

    days: int = Field(7, ge=1, le=366)
