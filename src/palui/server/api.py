"""The JSON API declared once: each operation's method, path, input models and answer types (spec §8.1).

An :class:`Operations` table is filled by its decorators::

    @API.get("/api/inbox", query=InboxQuery, answer=list[InboxItem], summary="the person's inbox")
    async def inbox(svc: Service, query: InboxQuery) -> list[InboxItem]: ...

The handler takes the service, each ``{param}`` of the path (a string, exactly as the client sent it:
:class:`~palui.server.raw_path.RawPathRoute`), ``query`` (a :class:`~palui.server.inputs.Query`) and
``body`` (a :class:`~palui.server.inputs.Body`) when the operation declares them, already validated, and
returns the answer (sent as JSON with 200) or a whole response (a stream). The same declaration gives
the route (:meth:`Operations.routes`) and the OpenAPI document (:mod:`palui.server.openapi`), so the
schema cannot drift from what the route checks.

Answers: input outside its model is 400 ``{"error", "kind": "usage", "field"}`` (:func:`validation_answer`);
a refusal of the service is 400/404/409 (:func:`palui.server.endpoint.error_response`); anything else is
500 with an id (:mod:`palui.server.unexpected`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from palui.config_rules import Refused
from palui.errors import PaluiError
from palui.server.body import BodyTooLarge, json_duplicate, pairs_duplicate, read_body, shown_name
from palui.server.endpoint import error_response, service_of
from palui.server.inputs import BODY_BYTES, Body, Query
from palui.server.raw_path import RawPathRoute

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from palui.results import ErrorAnswer

#: An operation's handler: ``(svc, **path params, query=…, body=…)`` → the answer, or a Response.
Handler = Callable[..., Awaitable[Any]]
H = TypeVar("H", bound=Handler)

PARAM = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Operation:
    """One route of the JSON API as the OpenAPI document describes it.

    ``answer`` is the 200 answer's type (from :mod:`palui.results`, read by ``pydantic.TypeAdapter``);
    ``stream`` the type of each NDJSON line when the operation can answer with a stream (``"stream":
    true`` in its body); ``refusals`` the statuses it answers besides 200, 400, 401 and 500 (404 unknown
    id, 409 already answered or expired), each with :class:`~palui.results.ErrorAnswer`; ``public``: no
    access token needed; ``links`` OpenAPI links of the 200 answer (a stateful test follows them);
    ``max_body`` the longest body taken, in bytes (413 over it, whether or not the operation reads one).
    """

    method: str
    path: str
    handler: Handler
    summary: str
    answer: Any
    query: type[Query] | None = None
    body: type[Body] | None = None
    refusals: tuple[int, ...] = ()
    stream: Any = None
    public: bool = False
    links: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    max_body: int = BODY_BYTES

    @property
    def params(self) -> list[str]:
        """The path's ``{param}`` names, in order."""
        return PARAM.findall(self.path)

    @property
    def name(self) -> str:
        """The operation's id: its handler's name."""
        return self.handler.__name__


class Operations:
    """A table of operations, filled by :meth:`get` and :meth:`post`, served by :meth:`routes`."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []

    def get(self, path: str, **declared: Any) -> Callable[[H], H]:
        return self._add("GET", path, declared)

    def post(self, path: str, **declared: Any) -> Callable[[H], H]:
        return self._add("POST", path, declared)

    def _add(self, method: str, path: str, declared: dict[str, Any]) -> Callable[[H], H]:
        def add(handler: H) -> H:
            op = Operation(method, path, handler, **declared)
            _check_signature(op)
            self.operations.append(op)
            return handler

        return add

    def routes(self) -> list[RawPathRoute]:
        """One route per operation (matched on the raw path, so ids arrive exactly as sent)."""
        return [RawPathRoute(op.path, endpoint(op), methods=[op.method], name=op.name) for op in self.operations]


def _check_signature(op: Operation) -> None:
    """The handler takes exactly what the operation declares (checked at import, so a route cannot
    read an input the schema does not show)."""
    wanted = {"svc", *op.params, *(["query"] if op.query else []), *(["body"] if op.body else [])}
    got = set(inspect.signature(op.handler).parameters)
    if got != wanted:
        raise TypeError(f"{op.method} {op.path}: the handler takes {sorted(got)}, "
                        f"the operation declares {sorted(wanted)}")


def endpoint(op: Operation) -> Callable[[Request], Awaitable[Response]]:
    """The Starlette endpoint of ``op``: validate the query and the body, call the handler, answer."""

    async def run(request: Request) -> Response:
        inputs: dict[str, Any] = {name: request.path_params[name] for name in op.params}
        try:
            raw = await read_body(request, op.max_body)
        except BodyTooLarge as e:
            return usage_answer(str(e), "body", 413)
        pairs = request.query_params.multi_items()
        twice = pairs_duplicate(pairs)
        if twice is not None:
            return usage_answer(f"the query parameter '{shown_name(twice)}' is given twice", twice)
        twice = json_duplicate(raw) if op.body is not None and raw else None
        if twice is not None:
            return usage_answer(f"the key '{shown_name(twice)}' appears twice in the body", twice)
        try:
            inputs_query = (op.query or Query).model_validate(dict(pairs))  # an unknown parameter is refused
            if op.query is not None:
                inputs["query"] = inputs_query
            if op.body is not None:
                inputs["body"] = op.body.model_validate_json(raw or b"{}")
        except ValidationError as e:
            return validation_answer(e)
        try:
            out = await op.handler(service_of(request), **inputs)
        except PaluiError as e:
            return error_response(e)
        return out if isinstance(out, Response) else JSONResponse(out)

    run.__name__ = op.name
    return run


def _refusal(e: ErrorDetails) -> tuple[str, str]:
    """(field, sentence) for one pydantic error: the input's path (``content.party_size``; ``body`` for
    the body as a whole) and what is wrong with it, never its value (docs/decisions/0017). A key the sender
    chose is said escaped and cut (:func:`~palui.server.body.shown_name`), so the sentence holds no raw
    control character for a later surface to escape again."""
    where = ".".join(str(p) for p in e["loc"]) or "body"
    said = shown_name(where)
    kind = e["type"]
    if kind == "json_invalid":
        return where, "the request body is not valid JSON"
    if kind in ("model_type", "model_attributes_type") and not e["loc"]:
        return where, "the request body must be a JSON object"
    if kind == "missing":
        return where, f"{said} is required"
    if kind == "extra_forbidden":
        return where, f"{said} is not an input of this route"
    if kind == "value_error":  # a model's own rule (StopBody: one of conversation, turn, all), or a setting's
        error = (e.get("ctx") or {}).get("error", e["msg"])
        return where, f"{said}: {error}" if isinstance(error, Refused) else str(error)
    pattern = (e.get("ctx") or {}).get("pattern")
    if kind == "string_pattern_mismatch" and pattern == r"\S":
        return where, f"{said} must contain more than white space"
    msg = e["msg"]
    return where, f"{said}: {msg[:1].lower()}{msg[1:]}"


def refusal(e: ValidationError) -> tuple[str, str]:
    """(field, sentence) for the first input of ``e`` that does not fit its model (the web page's forms
    say the same sentence)."""
    return _refusal(e.errors(include_url=False, include_input=False)[0])


def validation_answer(e: ValidationError) -> JSONResponse:
    """400 ``{"error", "kind": "usage", "field"}`` for the first input that does not fit its model."""
    where, sentence = refusal(e)
    return usage_answer(sentence, where)


def usage_answer(sentence: str, where: str, status: int = 400) -> JSONResponse:
    """``status`` (400, or 413 for a body over its limit) ``{"error", "kind": "usage", "field"}``."""
    answer: ErrorAnswer = {"error": sentence, "kind": "usage", "field": where}
    return JSONResponse(answer, status_code=status)
