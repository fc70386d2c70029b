"""A test MCP server that elicits the 2026-07-28 way: resolvers and "input required" results.

Tools declare what they need as ``Annotated[..., Resolve(fn)]`` parameters whose resolver returns
``Elicit(message, Model)`` (``mcp.server.mcpserver``). On a 2026-07-28 connection the SDK answers
the ``tools/call`` with an ``InputRequiredResult`` (``resultType: "input_required"``,
``inputRequests`` keyed by resolver, a sealed ``requestState``) without running the tool body; the
client retries the same call with ``inputResponses`` and the ``requestState`` echoed. Independent
resolvers are batched into one round; a resolver that depends on another's answer is a second round.
(On an older connection the same tools fall back to ``ctx.elicit`` inside the call.)

The ``requestState`` is sealed with AES-GCM by the SDK (``RequestStateSecurity``), bound to the tool
name, its arguments and the audience (the server name), and expires after ``--state-ttl`` seconds
(default 600). With ``--state-key HEX`` (>= 32 bytes) a restarted server still accepts state minted
before the restart; without it the key is per process, so a restart makes the client's retry fail
with -32602 "Invalid or expired requestState" ("the server could not resume").

Usage::

    python elicit_server_new.py [--state-key HEX] [--state-ttl S]           # stdio
    python elicit_server_new.py --http [--state-key HEX] [--state-ttl S]    # HTTP; prints "PORT <n>"

Tools (all ``readOnlyHint: false``):

- ``book_table(date)`` - one form question (``confirm``, ``party_size`` with a default, ``seating``
  enum with a default, optional ``note``); the body sees the full outcome (accept/decline/cancel).
- ``ask_three()`` / ``ask_four()`` - three / four independent questions in one round (the client's
  limit is 3 per call).
- ``two_step()`` - a name, then a confirmation that quotes it: two rounds.
- ``sign_up()`` - a form that asks for a secret (``username``, ``password``); the result gives the
  password's length and the start of its SHA-256, never the password.
- ``nested_schema()`` - a hand-rolled ``InputRequiredResult`` whose requested schema is not flat
  (an object inside an object); a client must decline it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    RequestStateSecurity,
    Resolve,
)
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

try:
    from support.tcp import listen_tcp
except ImportError:  # run as a program: tests/support is first on sys.path
    from tcp import listen_tcp  # type: ignore[no-redef]

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
NAME = "elicit-new"


class Booking(BaseModel):
    confirm: bool = Field(description="Book the table?")
    party_size: int = Field(default=2, ge=1, le=12, description="How many people")
    seating: Literal["inside", "terrace"] = Field(default="inside", description="Where to sit")
    note: str | None = Field(default=None, description="Anything the restaurant should know")


class Answer(BaseModel):
    value: str = Field(description="Your answer")


class Confirm(BaseModel):
    ok: bool = Field(description="Is that right?")


class SignUp(BaseModel):
    username: str = Field(description="Your user name")
    password: str = Field(description="Choose a password")


def _outcome(result: ElicitationResult[Any]) -> str:
    if isinstance(result, AcceptedElicitation):
        data = result.data.model_dump(mode="json") if isinstance(result.data, BaseModel) else result.data
        return "accept " + json.dumps(data, sort_keys=True)
    return result.action


# -- resolvers ------------------------------------------------------------------------------------


def ask_booking(date: str) -> Elicit[Booking]:
    return Elicit(f"Book a table for {date}?", Booking)


def ask_q1() -> Elicit[Answer]:
    return Elicit("Question 1", Answer)


def ask_q2() -> Elicit[Answer]:
    return Elicit("Question 2", Answer)


def ask_q3() -> Elicit[Answer]:
    return Elicit("Question 3", Answer)


def ask_q4() -> Elicit[Answer]:
    return Elicit("Question 4", Answer)


def ask_name() -> Elicit[Answer]:
    return Elicit("What name should the booking be under?", Answer)


def ask_sign_up() -> Elicit[SignUp]:
    return Elicit("Create your account", SignUp)


def ask_confirm_name(name: Annotated[Answer, Resolve(ask_name)]) -> Elicit[Confirm]:
    return Elicit(f"Book under the name {name.value!r}?", Confirm)


# -- the server -------------------------------------------------------------------------------------


def build_server(state_key: str | None = None, state_ttl: float = 600.0) -> MCPServer:
    security = (RequestStateSecurity(keys=[bytes.fromhex(state_key)], ttl=state_ttl) if state_key
                else RequestStateSecurity.ephemeral(ttl=state_ttl))
    server = MCPServer(NAME, version="1.0", request_state_security=security)

    @server.tool(annotations=WRITE)
    def sign_up(account: Annotated[ElicitationResult[SignUp], Resolve(ask_sign_up)]) -> str:
        """Create an account; asks for a user name and a password (the result never carries the password)."""
        if isinstance(account, AcceptedElicitation):
            pw = account.data.password
            return (f"sign_up: accept {account.data.username}, a password of {len(pw)} characters, sha256 "
                    f"{hashlib.sha256(pw.encode()).hexdigest()[:12]}")
        return f"sign_up: {account.action}"

    @server.tool(annotations=WRITE)
    def book_table(date: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> str:
        """Book a table; asks the person to confirm and for the party size."""
        return f"book_table({date}): {_outcome(booking)}"

    @server.tool(annotations=WRITE)
    def ask_three(a: Annotated[ElicitationResult[Answer], Resolve(ask_q1)],
                  b: Annotated[ElicitationResult[Answer], Resolve(ask_q2)],
                  c: Annotated[ElicitationResult[Answer], Resolve(ask_q3)]) -> str:
        """Three questions, asked together."""
        return "ask_three: " + "; ".join(_outcome(x) for x in (a, b, c))

    @server.tool(annotations=WRITE)
    def ask_four(a: Annotated[ElicitationResult[Answer], Resolve(ask_q1)],
                 b: Annotated[ElicitationResult[Answer], Resolve(ask_q2)],
                 c: Annotated[ElicitationResult[Answer], Resolve(ask_q3)],
                 d: Annotated[ElicitationResult[Answer], Resolve(ask_q4)]) -> str:
        """Four questions, asked together (one more than a governed client answers)."""
        return "ask_four: " + "; ".join(_outcome(x) for x in (a, b, c, d))

    @server.tool(annotations=WRITE)
    def two_step(confirmed: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm_name)]) -> str:
        """A name, then a confirmation of it: two rounds."""
        return f"two_step: {_outcome(confirmed)}"

    @server.tool(annotations=WRITE)
    async def nested_schema(ctx: Context) -> CallToolResult | InputRequiredResult:
        """A hand-rolled input-required round with a nested (not allowed) requested schema."""
        schema = {"type": "object", "properties": {
            "address": {"type": "object", "properties": {"street": {"type": "string"}}}}}
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # older connection: ask inside the call
            result = await ctx.request_context.session.elicit_form("Where do you live?", schema,
                                                                 related_request_id=ctx.request_id)
            return CallToolResult(content=[TextContent(type="text", text=f"nested_schema: {result.action}")])
        answer = (ctx.input_responses or {}).get("address")
        if answer is None:
            ask = ElicitRequest(params=ElicitRequestFormParams(message="Where do you live?", requested_schema=schema))
            return InputRequiredResult(input_requests={"address": ask}, request_state="nested-1")
        action = answer.action if isinstance(answer, ElicitResult) else "unexpected"
        return CallToolResult(content=[TextContent(type="text", text=f"nested_schema: {action}")])

    return server


def parser() -> argparse.ArgumentParser:
    """The command line (shared with support/mcp_inprocess.py, which builds the same server in the test process)."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 (prints PORT n)")
    p.add_argument("--port", type=int, default=0, help="with --http: this port instead of a free one")
    p.add_argument("--state-key", help="hex key (>= 32 bytes) sealing requestState; default: per process")
    p.add_argument("--state-ttl", type=float, default=600.0, help="seconds a requestState stays valid")
    return p


def main(argv: list[str] | None = None) -> None:
    ns = parser().parse_args(argv)
    server = build_server(ns.state_key, ns.state_ttl)
    if not ns.http:
        server.run("stdio")
        return
    import uvicorn

    sock = listen_tcp("127.0.0.1", ns.port)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
