#!/usr/bin/env python
"""The client command for the MCP conformance suite (``@modelcontextprotocol/conformance``).

Usage (the suite appends the server URL and sets ``MCP_CONFORMANCE_SCENARIO``, and for
some scenarios ``MCP_CONFORMANCE_CONTEXT``)::

    python scripts/mcp_conformance_client.py [--timeout SECONDS] URL

It drives Palui's own MCP stack, not a client of its own: an :class:`MCPConnector`
(``palui.connectors.mcp``) over streamable HTTP, against a throw-away ``PALUI_HOME``.
Connecting lists the tools and syncs them into that home's store (naming, classes,
definition hashes, spec §2 and §7), exactly as ``palui connectors add --url`` does;
the calls go through ``MCPConnector.call_tool`` (timeouts, output limit, error
results), which is what the turn runner calls.

- OAuth: Palui's provider (the SDK's ``OAuthClientProvider`` plus refresh ahead, stored
  discovery, registrations per issuer) with the headless sign-in (the suite's authorization
  server consents at once: the authorization URL is fetched and its redirect read, no browser),
  ``mcp.oauth.client_metadata_url`` set to the suite's Client ID Metadata Document URL, and the
  ``client_id``/``client_secret`` of ``MCP_CONFORMANCE_CONTEXT`` as a client the person
  registered (``palui connectors add --client-id``) for ``auth/pre-registration``.
- Elicitation: the "person" accepts every form with the schema's defaults (SEP-1034), and
  ``confirmed: true`` where asked, through ``CallContext.ask`` (older connections) or the
  2026-07-28 retry with ``CallContext.resume`` (the runner's path); URL mode is declined.

What each scenario gets (``SCENARIOS`` below): connect, list, then the tool calls the
scenario expects; the calls named in ``MCP_CONFORMANCE_CONTEXT["toolCalls"]`` are
made as given. Scenarios not in the table get connect + list, the behaviour of the
suite's own reference client for them.

Exit status: 0 when the connection, the listing and every call that the scenario
expects to succeed did; 1 otherwise (the reasons on stderr). The last stdout line says
the same (``result: ok`` or ``result: failed: <first reason>``). The suite judges the
scenario by what the server saw; this is the client's own view.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CONNECTOR_ID = "mcp-conformance"
CIMD_URL = "https://conformance-test.local/client-metadata.json"  # the suite's fixed document
MAX_ROUNDS = 10

Args = dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """What to do for one scenario.

    ``calls(tools)`` gets the stored tools (``{raw name: ToolRow}``, as the model would
    see them) and returns ``[(raw tool name, arguments)]``. ``must_succeed`` is False
    where Palui declines the scenario on purpose (no client capabilities, spec §7): the
    call then returns an error or a declined result, and that is the expected outcome.
    """

    calls: Callable[[dict[str, Any]], list[tuple[str, Args]]] = field(default=lambda tools: [])
    must_succeed: bool = True


def _every_tool(tools: dict[str, Any]) -> list[tuple[str, Args]]:
    return [(name, {}) for name in sorted(tools)]


def _one(name: str, args: Args | None = None) -> Callable[[dict[str, Any]], list[tuple[str, Args]]]:
    return lambda tools: [(name, dict(args or {}))]


def _echo_schema(tools: dict[str, Any]) -> list[tuple[str, Args]]:
    # The schema as Palui stored it (what the model is shown), not the SDK's parse of it:
    # the scenario checks that no JSON Schema 2020-12 keyword is lost on the way.
    focal = tools.get("json_schema_2020_12_tool")
    if focal is None:
        raise SystemExit("json-schema-2020-12-preservation: the server did not list json_schema_2020_12_tool")
    return [("json_schema_2020_12_tool", {}), ("json_schema_echo", {"schema": focal.input_schema})]


SCENARIOS: dict[str, Plan] = {
    "initialize": Plan(),
    "tools_call": Plan(_one("add_numbers", {"a": 5, "b": 3})),
    "sse-retry": Plan(_one("test_reconnection")),
    "elicitation-sep1034-client-defaults": Plan(_one("test_client_elicitation_defaults")),
    # Multi-round-trip tools: one answers without resultType on purpose (a malformed result).
    "sep-2322-client-request-state": Plan(_every_tool, must_succeed=False),
    "http-standard-headers": Plan(_every_tool),
    "json-schema-ref-no-deref": Plan(),
    "json-schema-2020-12-preservation": Plan(_echo_schema),
    "request-metadata": Plan(),
    "http-invalid-tool-headers": Plan(_every_tool),
}


async def accept_with_defaults(q: Any) -> Any:
    """The conformance "person": a form accepted with its defaults (and ``confirmed: true``); URL mode declined."""
    from palui.connectors.base import Reply
    from palui.text.elicitation import apply_defaults, schema_problem

    if q.mode != "form" or schema_problem(q.schema):
        return Reply("decline")
    props = (q.schema or {}).get("properties") or {}
    return Reply("accept", apply_defaults(q.schema, {"confirmed": True} if "confirmed" in props else {}))


async def call_answering(conn: Any, name: str, args: Args) -> Any:
    """``conn.call_tool`` with the conformance person answering, in both eras (the runner's path)."""
    from palui.connectors.base import CallContext, Resume
    from palui.types import Origin

    def ctx(resume: Resume | None = None) -> CallContext:
        return CallContext(turn_id="t-conformance", conversation_id="c-conformance", origin=Origin.CHAT,
                           tainted=False, taint_source=None, step=1, db=conn.env.db, settings=conn.env.settings,
                           ask=accept_with_defaults, resume=resume)

    result = await conn.call_tool(name, args, ctx())
    for _ in range(MAX_ROUNDS):
        if result.input_required is None:
            return result
        ir = result.input_required
        replies = {q.key: await accept_with_defaults(q) for q in ir.questions}
        result = await conn.call_tool(name, args, ctx(Resume(replies, ir.request_state)))
    return result


async def run(url: str, scenario: str, context: dict[str, Any], timeout: float) -> list[str]:
    """Connect to ``url`` with Palui's MCP connector and play ``scenario``.

    Returns the problems found (empty: success). The connector's own errors
    (``ConnectorError`` on connect, error results on calls) become problems.
    """
    from palui.config import load_settings
    from palui.connectors.mcp.config import ServerConfig
    from palui.connectors.mcp.connector import MCPConnector
    from palui.connectors.mcp.oauth.signin import HeadlessSignIn
    from palui.errors import ConnectorError
    from palui.service import Service
    from palui.types import OAuthClient

    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="palui-conformance-") as home:
        svc = Service(load_settings({"PALUI_HOME": home, "PALUI_MCP__OAUTH__CLIENT_METADATA_URL": CIMD_URL}))
        if context.get("client_id") and scenario == "auth/pre-registration":
            svc.connectors.save_client(CONNECTOR_ID, OAuthClient(context["client_id"], context.get("client_secret")))
        conn = MCPConnector(svc._hub.env, CONNECTOR_ID, "conformance",
                            ServerConfig("http", url=url, timeout_seconds=timeout), sign_in=HeadlessSignIn())
        try:
            try:
                await conn.start()  # connect + tools/list + sync into the store
            except ConnectorError as e:
                return [f"connect: {e}"]
            print(f"connected: protocol {conn._session.protocol_version if conn._session else '?'}")
            tools = {t.tool: t for t in svc.tools.list(CONNECTOR_ID) if t.present}
            print(f"tools: {sorted(tools)}")
            plan = SCENARIOS.get(scenario) or (Plan(_every_tool) if scenario.startswith("auth/") else Plan())
            calls = [(c["name"], dict(c.get("arguments") or {})) for c in context.get("toolCalls") or []]
            calls = calls or plan.calls(tools)
            for name, args in calls:
                result = await call_answering(conn, name, args)
                print(f"call {name}: {'error' if result.is_error else 'ok'}: {result.text[:200]!r}")
                if result.is_error and plan.must_succeed:
                    problems.append(f"call {name}: {result.text}")
        finally:
            await conn.close()
            svc.db.close()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="per-call timeout of the connector, seconds (the suite gives up after 30 s)")
    parser.add_argument("url", help="the scenario server's URL (the suite passes it last)")
    ns = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError:
        context = {}
    print(f"scenario: {scenario or '(none)'}")
    problems = asyncio.run(run(ns.url, scenario, context if isinstance(context, dict) else {}, ns.timeout))
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    # The last stdout line is the client's verdict; run_conformance.sh reads it (the suite
    # does not report a client's exit status for every scenario).
    print("result: failed: " + problems[0].splitlines()[0] if problems else "result: ok", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
