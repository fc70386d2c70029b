"""A governed MCP tool call against a direct ``mcp`` SDK call, with mcp-server-time over stdio.

Three server processes of ``python -m mcp_server_time`` run side by side: one behind Palui
(added with ``ConnectorsPart.add_async``, its read tools switched on), one held by the SDK's
``Client`` and one by a plain SDK ``ClientSession``. Alternating call by call in one process, it measures:

- call level: Palui's connector ``MCPConnector.call_tool`` (the stored flags read with the
  catalog version, timeouts, output cap, result rendering, taint flags) against two baselines:
  the SDK's ``Client.call_tool`` with ``mode="auto"`` (what Palui's session uses: the same
  protocol era, 2026-07-28 for mcp-server-time; the ratio is Palui's own cost), and a bare
  ``ClientSession.call_tool`` after ``initialize`` (the 2025-11-25 handshake era: the ratio
  adds the cost of the newer era's client path);
- turn level: a whole governed turn (``TurnsPart.send``, ``script:`` model: one MCP call,
  then an answer) vs a hand loop of the same two ``model_request`` calls and a direct
  ``ClientSession.call_tool`` (baseline).

Usage: ``.venv/bin/python bench/mcp_call.py [--calls N] [--server-python PATH]``
(default ``/work/venv/bin/python``, which must have ``mcp-server-time`` installed).
Prints p50/p99 in ms and the ratios; no thresholds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from common import QUICK_HELP, fresh_home, quick, report

ARGS = {"timezone": "UTC"}


def tool_of(context: type, row: object) -> dict:
    """``{"tool": row}`` where the call context carries the decided tool's row (the previous main's has none)."""
    return {"tool": row} if "tool" in getattr(context, "__dataclass_fields__", {}) else {}


async def main(calls: int, warmup: int, python: str) -> None:
    home = fresh_home()
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from pydantic_ai.direct import model_request
    from pydantic_ai.messages import ModelRequest, SystemPromptPart, ToolCallPart, ToolReturnPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    from palui.connectors.base import CallContext
    from palui.connectors.mcp.config import ServerConfig
    from palui.models import resolve_model
    from palui.service import Service
    from palui.types import Origin

    svc = Service()
    config = ServerConfig("stdio", command=python, args=("-m", "mcp_server_time"))
    added = await svc.connectors.add_async("time", config, enable_read=True)
    cid = added["id"]
    row = next(r for r in svc.tools.list(cid) if r.tool == "get_current_time")
    if not row.enabled:  # the hints did not make it a read tool: say so rather than bench a refusal
        sys.exit(f"{row.name} is not switched on after enable-read (class {row.tool_class.value} from "
                 f"{row.class_source.value}); cannot bench a governed call")
    connector = await svc._hub.get(cid)
    # As the runner sends a decided call: with the tool's row it read when it decided it.
    ctx = CallContext(turn_id="bench", conversation_id="bench", origin=Origin.CHAT, tainted=False,
                      taint_source=None, step=1, db=svc.db, settings=svc.settings, **tool_of(CallContext, row))

    script = home / "mcp-script.json"
    script.write_text(json.dumps({"steps": [
        {"tool_calls": [{"tool": row.name, "args": ARGS}], "usage": {"input_tokens": 400, "output_tokens": 20}},
        {"text": "It is now …", "usage": {"input_tokens": 450, "output_tokens": 12}},
    ]}))
    model = f"script:{script}"
    handle = resolve_model(model)
    defs = [ToolDefinition(name=r.name, description=r.description or r.tool,
                           parameters_json_schema=r.input_schema or {"type": "object"})
            for r in svc.tools.list() if r.enabled]
    params = ModelRequestParameters(function_tools=defs, allow_text_output=True)

    params_direct = StdioServerParameters(command=python, args=["-m", "mcp_server_time"])
    from mcp import Client

    with open("/dev/null", "w") as devnull:
        async with (stdio_client(params_direct, errlog=devnull) as (read, write), ClientSession(read, write) as session,
                    Client(stdio_client(params_direct, errlog=devnull), mode="auto") as client):
            await session.initialize()

            async def direct_call() -> None:
                r = await session.call_tool("get_current_time", ARGS)
                assert not r.is_error, r

            async def client_call() -> None:
                r = await client.call_tool("get_current_time", ARGS)
                assert not r.is_error, r

            async def palui_call() -> None:
                r = await connector.call_tool("get_current_time", ARGS, ctx)
                assert not r.is_error, r.text

            async def palui_turn() -> None:
                r = await svc.turns.send("What time is it in UTC?", model=model)
                assert r["status"] == "done" and r["usage"]["steps"] == 2, r
                assert not any(e.get("is_error") for e in r["events"] if e["type"] == "tool_call"), r["events"]

            async def baseline_turn() -> None:
                messages: list = [ModelRequest(parts=[SystemPromptPart("You are Palui."),
                                                      UserPromptPart("What time is it in UTC?")])]
                while True:
                    response = await model_request(handle.model, messages, model_request_parameters=params)
                    messages.append(response)
                    tool_calls = [p for p in response.parts if isinstance(p, ToolCallPart)]
                    if not tool_calls:
                        break
                    returns = []
                    for c in tool_calls:
                        r = await session.call_tool("get_current_time", c.args_as_dict())
                        text = "".join(getattr(b, "text", "") for b in r.content)
                        returns.append(ToolReturnPart(tool_name=c.tool_name, content=text,
                                                      tool_call_id=c.tool_call_id))
                    messages.append(ModelRequest(parts=returns))

            for title, ways, base in (
                ("MCP call: get_current_time over stdio (vs the SDK's Client in the same protocol era)",
                 {"palui MCPConnector.call_tool": palui_call, "direct Client.call_tool (auto era)": client_call,
                  "direct ClientSession.call_tool": direct_call},
                 "direct Client.call_tool (auto era)"),
                ("turn with one MCP call + answer, script: model",
                 {"palui (TurnsPart.send)": palui_turn, "baseline (hand loop)": baseline_turn},
                 "baseline (hand loop)"),
            ):
                times: dict[str, list[float]] = {k: [] for k in ways}
                cpu: dict[str, list[float]] = {k: [] for k in ways}
                for i in range(warmup + calls):
                    for name, fn in ways.items():
                        t0, c0 = time.perf_counter(), time.process_time()
                        await fn()
                        if i >= warmup:
                            times[name].append((time.perf_counter() - t0) * 1000)
                            cpu[name].append((time.process_time() - c0) * 1000)
                # CPU of this process (the client side; each server is a process of its own): Palui's own cost.
                report(f"{title}, CPU", "ms", cpu, base)
                report(f"{title}, wall", "ms", times, base)
    await svc._hub.close()
    svc.db.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=quick(300, 5))
    ap.add_argument("--warmup", type=int, default=quick(20, 1))
    ap.add_argument("--quick", action="store_true", help=QUICK_HELP)
    ap.add_argument("--server-python", default="/work/venv/bin/python")
    a = ap.parse_args()
    asyncio.run(main(a.calls, a.warmup, a.server_python))
