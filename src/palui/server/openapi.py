"""The JSON API's OpenAPI 3.1 document, generated from the operations' declarations (spec §8.1).

Served at ``GET /api/openapi.json`` (the access token needed, like every route but ``/api/health``, which the
document marks public with ``security: []``). Each operation (:class:`~palui.server.api.Operation`) gives its
path parameters, its query parameters (from its :class:`~palui.server.inputs.Query` model), its JSON body (its
:class:`~palui.server.inputs.Body` model), its 200 answer (a :mod:`palui.results` type, and
``application/x-ndjson`` lines when it can stream), its body limit (``x-max-body-bytes``) and its refusals (400,
401, 404, 409, 413, 500, each an :class:`~palui.results.ErrorAnswer`). The result types and body models become
``components/schemas`` in one pass of ``pydantic.TypeAdapter.json_schemas``, so shared shapes (an approval, an
event) are defined once. Starlette's own schema generator reads YAML from docstrings; this one reads the
declarations the routes check, so the document cannot say something the routes do not do.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from pydantic import TypeAdapter, ValidationError

from palui.results import ErrorAnswer
from palui.server.api import Operation
from palui.server.inputs import Body
from palui.server.turn_stream import NDJSON

REF = "#/components/schemas/{model}"
#: Refusals every operation may answer, and those it declares (``Operation.refusals``), with their words.
REFUSALS = {
    "400": "bad input (kind usage: the field named is outside its schema) or a refusal of the service",
    "401": "the access token is missing or wrong",
    "404": "unknown id or name (said as the service says it, e.g. unknown approval 'a-…')",
    "409": "already answered, expired or cancelled",
    "413": "the request body is over the operation's limit (x-max-body-bytes); it is not read further",
    "500": "an unexpected error: its id is in the answer and, with the traceback, in logs/palui.log",
}


def document(operations: Sequence[Operation]) -> dict[str, Any]:
    """The OpenAPI 3.1 document (a JSON object) of ``operations``."""
    keyed: list[tuple[tuple[str, str], Any]] = [(("", "error"), ErrorAnswer)]
    for op in operations:
        if op.answer is not None:
            keyed.append(((op.name, "answer"), op.answer))
        if op.stream is not None:
            keyed.append(((op.name, "stream"), op.stream))
        if op.body is not None:
            keyed.append(((op.name, "body"), op.body))
    schemas, defs = TypeAdapter.json_schemas([(k, "validation", TypeAdapter(t)) for k, t in keyed],
                                             ref_template=REF)
    shape = {key: schema for (key, _mode), schema in schemas.items()}
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, shape)
    responses = {status: {"description": words, "content": {"application/json": {"schema": shape[("", "error")]}}}
                 for status, words in REFUSALS.items()}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Palui", "version": version("palui"),
                 "description": "The JSON API of palui serve: the same service the CLI and the web page use "
                                "(docs/web.md, docs/spec.md §8.1)."},
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "the access token printed by palui serve"}},
            "schemas": defs.get("$defs", {}),
            "responses": responses,
        },
    }


def _operation(op: Operation, shape: dict[tuple[str, str], Any]) -> dict[str, Any]:
    content: dict[str, Any] = {}
    if op.answer is not None:
        content["application/json"] = {"schema": shape[(op.name, "answer")]}
    if op.stream is not None:
        # The schema of each line: NDJSON is one JSON object a line (with stream: true).
        content[NDJSON] = {"schema": {**shape[(op.name, "stream")], "description": "each line of the stream"}}
    ok: dict[str, Any] = {"description": op.summary, "content": content}
    if op.links:
        ok["links"] = dict(op.links)
    refusals = ["400", *(str(s) for s in op.refusals), "413", "500"]
    if not op.public:
        refusals.insert(1, "401")
    out: dict[str, Any] = {
        "operationId": op.name,
        "summary": op.summary,
        "tags": [op.path.split("/")[2]],
        "parameters": [*_path_parameters(op), *_query_parameters(op)],
        "responses": {"200": ok, **{s: {"$ref": f"#/components/responses/{s}"} for s in refusals}},
        "x-max-body-bytes": op.max_body,
    }
    if op.public:
        out["security"] = []
    if op.body is not None:
        required = _refuses_empty(op.body)
        out["requestBody"] = {"required": required, "description": f"a JSON object of at most {op.max_body:,} "
                              "bytes; each key once (a key given twice is refused: 400 naming it)",
                              "content": {"application/json": {"schema": shape[(op.name, "body")]}}}
    return out


def _refuses_empty(body: type[Body]) -> bool:
    """Whether the body is required: an empty one (read as ``{}``) does not fit its model."""
    try:
        body.model_validate({})
    except ValidationError:
        return True
    return False


def _path_parameters(op: Operation) -> list[dict[str, Any]]:
    return [{"name": p, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
             "description": "exactly as typed: percent-encode it as one path segment"} for p in op.params]


def _query_parameters(op: Operation) -> list[dict[str, Any]]:
    if op.query is None:
        return []
    schema = op.query.model_json_schema(ref_template=REF)
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k not in ("title", "description")}
        out.append({"name": name, "in": "query", "required": name in required, "schema": prop,
                    "description": op.query.model_fields[name].description or ""})
    return out
