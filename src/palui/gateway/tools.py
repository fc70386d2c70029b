"""The gateway's words in the MCP SDK's types: its server, a listed tool and a call's result (spec §8.6).

A result reaches the client as its server sent it (every content type, ``structuredContent``, resource links,
``isError``, docs/decisions/0187-gateway-results-as-sent.md): its text is not rewritten, carriage returns,
line feeds and tabs included. The other hidden characters of spec §4.7 pass through too, and are listed in the
result's ``_meta`` under :data:`HIDDEN_META` (where, how many, which), so a client or a person reading the wire sees
them; the client's model reads the text as Palui's own model would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from palui.text.escape import is_hidden

if TYPE_CHECKING:
    from palui.results import GatewayCallResult, GatewayTool

#: The ``_meta`` key listing the hidden characters a result carries (spec §8.6).
HIDDEN_META = "palui/hidden"
#: Characters of spec §4.7's hidden set that text is made of: never listed, never changed.
LAYOUT = frozenset("\r\n\t")
#: The most distinct characters listed per place (the count says how many there are).
LISTED = 16


def as_mcp_tool(t: GatewayTool) -> types.Tool:
    """A tool as ``tools/list`` sends it: Palui's model-visible name (at most 64 characters; a client adds
    its own prefix), the description and schema as a model is sent them, and hints derived from the *effective*
    class: ``readOnlyHint`` for ``read``, ``destructiveHint`` true only for ``destructive``, ``openWorldHint`` for
    a tool that reaches outside (spec §4.5)."""
    hints = types.ToolAnnotations(read_only_hint=t["read_only"], destructive_hint=t["destructive"],
                                  open_world_hint=t["open_world"])
    return types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"] or
                      {"type": "object"}, annotations=hints)


def hidden_in(text: str) -> tuple[int, list[str]] | None:
    """How many hidden characters (spec §4.7, but carriage return, line feed and tab) ``text`` holds and the first
    :data:`LISTED` distinct ones as ``U+XXXX``; None when it holds none. Linear in the text; ASCII text without
    controls costs one check."""
    if text.isascii() and text.isprintable():
        return None
    count = 0
    seen: dict[str, None] = {}  # distinct characters, in the order met
    for ch in text:
        if ch in LAYOUT or not is_hidden(ch):
            continue
        count += 1
        if len(seen) < LISTED:
            seen.setdefault(f"U+{ord(ch):04X}", None)
    return (count, list(seen)) if count else None


def _strings(value: Any, at: str) -> list[tuple[str, str]]:
    """Every string of a JSON value with its place (``content[0].text``), keys not included."""
    if isinstance(value, str):
        return [(at, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in ("_meta", "blob", "data") for s in _strings(v, f"{at}.{k}")]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{at}[{i}]")]
    return []


def hidden_listing(result: dict[str, Any], fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """``[{"at","count","characters"}]``: where a result's ``fields`` (``content``, ``structuredContent``,
    ``contents``, ``messages``) hold hidden characters."""
    out = []
    for field in fields:
        for at, text in _strings(result.get(field), field):
            found = hidden_in(text)
            if found is not None:
                out.append({"at": at, "count": found[0], "characters": found[1]})
    return out


def with_hidden_listed(result: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """``result`` with :data:`HIDDEN_META` in its ``_meta`` when its text holds hidden characters (the server's own
    ``_meta`` kept)."""
    listed = hidden_listing(result, fields)
    if not listed:
        return result
    return {**result, "_meta": {**(result.get("_meta") or {}), HIDDEN_META: listed}}


def as_call_result(r: GatewayCallResult) -> types.CallToolResult:
    """A call's answer as ``tools/call`` sends it: the server's result as it sent it, or (a built-in tool's answer,
    a refusal, an error) one text content with ``isError`` when it did not run or failed; hidden characters are
    listed in ``_meta``."""
    wire = r["result"]
    if wire is None:
        wire = {"content": [{"type": "text", "text": r["text"]}], "isError": r["is_error"]}
    return types.CallToolResult.model_validate(with_hidden_listed(wire, ("content", "structuredContent")),
                                               by_name=False)


class GatewayServer(Server[Any]):
    """The SDK's low-level server, announcing ``tools.listChanged`` (the session manager starts each session
    with the server's default initialization options, which announce none)."""

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)
