"""Why a server did not start or refused the handshake, in one sentence for the person (spec §7).

No secret values here: the caller redacts (``palui.connectors.mcp.config.redact``). A server's own
words (a 403 body's reason, a ``WWW-Authenticate`` challenge) are escaped and capped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx2
import mcp_types as types
from mcp.client.auth import OAuthFlowError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from palui.connectors.mcp.config import ServerConfig
from palui.connectors.mcp.oauth import SignInRequired, describe_oauth_error
from palui.text.display import shown

REASON_LIMIT = 200  # characters of a server's reason kept in a message


@dataclass(frozen=True)
class AuthRefusal:
    """A 401/403 answer seen by the HTTP client: its status, its challenge, the reason in its body
    (escaped, capped) and whether the request carried credentials (an ``Authorization`` header)."""

    status: int
    challenge: str
    reason: str
    credentials_sent: bool


def body_reason(content: bytes, content_type: str) -> str:
    """The server's reason in a refusal's body: a JSON ``error_description``/``message``/``error``, or the
    text itself; escaped, on one line, at most :data:`REASON_LIMIT` characters."""
    text = content[:4096].decode("utf-8", "replace")
    if "json" in content_type:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("error_description", "message", "error", "detail"):
                value = data.get(key)
                if isinstance(value, str) and value.strip():
                    text = value
                    break
                if isinstance(value, dict) and isinstance(value.get("message"), str):
                    text = value["message"]
                    break
    if "<html" in text[:200].lower():
        return ""
    text = " ".join(text.split())
    return shown(text[:REASON_LIMIT] + ("…" if len(text) > REASON_LIMIT else ""), one_line=True)


def connection_closed(e: BaseException) -> bool:
    """True for the SDK's "connection closed" error, also inside an exception group."""
    if isinstance(e, BaseExceptionGroup):
        return any(connection_closed(inner) for inner in e.exceptions)
    return isinstance(e, MCPError) and e.code == types.CONNECTION_CLOSED


def find(e: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``e`` (also inside exception groups and causes)."""
    if isinstance(e, kind):
        return e
    if isinstance(e, BaseExceptionGroup):
        for inner in e.exceptions:
            hit = find(inner, kind)
            if hit is not None:
                return hit
    return None


def explain_auth_refusal(r: AuthRefusal, connector_id: str, oauth: bool) -> str:
    """Why an HTTP server refused the handshake with 401/403. Credentials are mentioned only when some
    were sent; a 403's reason is the server's own (docs/decisions/0101-oauth-errors-in-one-sentence.md)."""
    challenge = shown(" ".join(r.challenge.split())[:REASON_LIMIT], one_line=True)
    if r.status == 401:
        what = "HTTP 401 Unauthorized: the server wants authorization"
        if challenge:
            what += f" (WWW-Authenticate: {challenge})"
        if oauth:
            return (f"refused the MCP handshake: {what}. Sign in: palui connectors login {connector_id} (or "
                    "“Sign in” on its sheet)")
        return (f"refused the MCP handshake: {what}. The Authorization header given with --header was not "
                "accepted")
    what = "HTTP 403 Forbidden"
    if r.reason:
        what += f": the server says “{r.reason}”"
    if r.credentials_sent:
        what += "; it does not accept the credentials sent"
    return f"refused the MCP handshake: {what}"


def explain_start_error(e: BaseException, cfg: ServerConfig) -> str:
    """One sentence for why a server did not start (no secret values: the caller redacts)."""
    flow = find(e, OAuthFlowError) or find(e, SignInRequired)
    if flow is not None:
        return f"wants a sign-in that did not finish: {describe_oauth_error(flow)}"
    if isinstance(e, FileNotFoundError):
        return f"could not be started: command {cfg.command!r} not found"
    if isinstance(e, PermissionError):
        return f"could not be started: command {cfg.command!r} is not executable"
    if isinstance(e, OSError) and cfg.transport == "stdio":
        return f"could not be started: {e.strerror or e}"
    if isinstance(e, MCPError):
        if e.code == types.CONNECTION_CLOSED:
            return "exited (or closed the connection) during the MCP handshake"
        return f"refused the MCP handshake: {e.message} (code {e.code})"
    if isinstance(e, ValidationError):
        return "sent a malformed answer to the MCP handshake"
    if isinstance(e, httpx2.HTTPError) or type(e).__module__.startswith("httpx"):
        return f"could not be reached at {cfg.display_url}: {type(e).__name__}: {e}"
    if isinstance(e, BaseExceptionGroup):
        inner = e.exceptions[0] if e.exceptions else e
        return explain_start_error(inner, cfg)
    return f"failed to start: {type(e).__name__}: {e}"
