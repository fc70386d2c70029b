"""MCP ``tools/list`` entries and ``tools/call`` results, converted once at the boundary.

- :func:`spec_from_raw` turns one raw ``tools/list`` entry (the JSON object exactly as
  the server sent it) into a :class:`ToolSpec` whose ``annotations`` are that raw
  object, so spec §2's "only JSON booleans count" can be applied.
- :func:`render_result` turns a ``CallToolResult`` into the text the model sees;
  :func:`cap_text` enforces the output size limit with a clear marker (spec §7).
- :func:`wire_result` keeps a ``CallToolResult`` as the server sent it, within the output limit, for a gateway
  client (spec §8.6).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from palui.connectors.base import ToolSpec


def spec_from_raw(tool: dict[str, Any]) -> ToolSpec:
    """A :class:`ToolSpec` from one raw ``tools/list`` entry.

    ``annotations`` is the raw ``annotations`` object as sent (None when the key is
    absent or null); ``description`` defaults to ``""`` and ``inputSchema`` to ``{}``;
    ``task_support`` is ``execution.taskSupport`` when it is a string (MCP 2025-11-25 "Tasks").
    MCP tool output is untrusted by default (spec §4).
    """
    annotations = tool.get("annotations")
    schema = tool.get("inputSchema")
    description = tool.get("description")
    execution = tool.get("execution")
    task_support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return ToolSpec(
        name=tool["name"],
        description=description if isinstance(description, str) else "",
        input_schema=schema if isinstance(schema, dict) else {},
        annotations=annotations if isinstance(annotations, dict) else None,
        untrusted_output=True,
        task_support=task_support if isinstance(task_support, str) else None,
    )


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} content ({block.mime_type}), {len(block.data)} base64 characters, not shown]"
    if isinstance(block, types.ResourceLink):
        desc = f": {block.description}" if block.description else ""
        return f"[resource link {block.name} <{block.uri}>{desc}]"
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return f"[resource <{res.uri}>]\n{res.text}"
        return f"[binary resource <{res.uri}> ({res.mime_type or 'unknown type'}), not shown]"
    try:
        return json.dumps(block.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False,
                          allow_nan=False)
    except Exception:  # an unknown block type must not break the call
        return f"[{type(block).__name__} content, not shown]"


def render_result(result: types.CallToolResult) -> str:
    """The text of a ``tools/call`` result: content blocks joined by newlines.

    Text blocks verbatim; images and audio as a short placeholder; embedded text
    resources with their text. With no content blocks, the structured content as JSON.
    """
    parts = [_block_text(b) for b in result.content or []]
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, allow_nan=False)
    return "\n".join(parts)


def cap_text(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes, ending with a truncation marker.

    The marker names the original size and the limit; the returned text, marker
    included, is never longer than ``max_bytes`` bytes (unless the limit is smaller
    than the marker itself). Text within the limit is returned unchanged.
    """
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    marker = f"\n[output truncated by Palui: the result was {len(data)} bytes, the limit is {max_bytes} bytes]"
    room = max(max_bytes - len(marker.encode("utf-8")), 0)
    return data[:room].decode("utf-8", errors="ignore") + marker


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8"))


def _left_out(block: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    kind = block.get("type", "content")
    what = f"{kind} content" + (f" ({block['mimeType']})" if isinstance(block.get("mimeType"), str) else "")
    return {"type": "text", "text": f"[{what} left out by Palui: the result is over the limit of {max_bytes} bytes]"}


def wire_result(result: types.CallToolResult, max_bytes: int) -> dict[str, Any]:
    """``result`` as JSON, exactly as the server sent it (every content type, ``structuredContent``, resource
    links, ``isError``, its ``_meta``), when it fits in ``max_bytes`` (``mcp.max_output_bytes``); otherwise its
    content blocks in order while they fit: a text block that does not is cut with :func:`cap_text`'s marker,
    any other block (an image, audio, a resource) is replaced by a text saying it was left out, and a
    ``structuredContent`` that does not fit is left out (a text says so)."""
    out: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if _size(out) <= max_bytes:
        return out
    room = max_bytes - _size({k: v for k, v in out.items() if k not in ("content", "structuredContent")})
    kept: list[dict[str, Any]] = []
    for block in out.get("content") or []:
        size = _size(block)
        if size <= room:
            kept.append(block)
            room -= size
        elif block.get("type") == "text" and isinstance(block.get("text"), str) and room > 300:
            cut = {**block, "text": cap_text(block["text"], room - 100)}
            kept.append(cut)
            room -= _size(cut)
        else:
            note = _left_out(block, max_bytes)
            kept.append(note)
            room -= _size(note)
    out["content"] = kept
    if "structuredContent" in out and _size(out["structuredContent"]) > room:
        del out["structuredContent"]
        kept.append({"type": "text", "text": f"[structured content left out by Palui: the result is over the limit "
                                             f"of {max_bytes} bytes]"})
    return out
