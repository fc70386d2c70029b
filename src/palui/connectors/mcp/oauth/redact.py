"""OAuth without secrets in messages and logs (spec §7.9, §10.5).

The SDK's ``OAuthTokenError`` quotes the token endpoint's whole response body, its
``OAuthRegistrationError`` the registration response (which may hold a client secret), a state
mismatch both states; and ``mcp.client.auth.oauth2`` logs every flow error with its traceback at
ERROR. :func:`describe_oauth_error` turns those into one sentence for the person (the RFC 6749
``error`` code and an escaped, capped ``error_description`` at most), and :class:`OAuthLogFilter`,
installed once on the SDK's auth loggers, puts that sentence in place of the traceback and replaces
every token and client secret this process has seen with ``***``.
"""

from __future__ import annotations

import json
import logging
import re
import threading

from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from palui.text.display import shown

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
_STATUS = re.compile(r"\((\d{3})\)")
_LOGGERS = ("mcp.client.auth", "mcp.client.auth.oauth2", "mcp.client.auth.utils", "mcp.shared._httpx_utils")
MIN_SECRET = 8


class SignInRequired(Exception):
    """The connector needs the person to sign in again; raised where nobody can (a turn, a job), or
    when an interactive sign-in did not finish (timeout, refused)."""


class RefreshUnavailable(Exception):
    """The authorization server did not refresh the tokens now (an outage: a 5xx, no connection, an
    error other than a dead grant) and the access token held cannot be used: the tokens are kept and
    the refresh is tried again later (spec §7.9)."""


#: Token-endpoint errors (RFC 6749 §5.2) after which only a new sign-in helps; any other refusal of a
#: refresh is taken for an outage: the tokens are kept and the refresh is tried again.
GRANT_ENDED = frozenset({"invalid_grant", "invalid_client", "unauthorized_client"})


def oauth_error_code(body: bytes | str) -> str | None:
    """The RFC 6749 ``error`` code of a token endpoint's JSON answer (None when it has none)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return _fields(text[:65536])[0]


def remember_secret(value: str | None) -> None:
    """A token or client secret of this process: never shown in a log record."""
    if value and len(value) >= MIN_SECRET:
        with _LOCK:
            _SECRETS.add(value)


def redact_secrets(text: str) -> str:
    """``text`` with every remembered token and client secret replaced by ``***``."""
    with _LOCK:
        values = sorted(_SECRETS, key=len, reverse=True)
    for v in values:
        if v in text:
            text = text.replace(v, "***")
    return text


def _fields(body: str) -> tuple[str | None, str | None]:
    try:
        data = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    error, description = data.get("error"), data.get("error_description")
    error = error if isinstance(error, str) and re.fullmatch(r"[\x20-\x21\x23-\x5B\x5D-\x7E]{1,64}", error) else None
    return error, description if isinstance(description, str) else None


def describe_oauth_error(e: BaseException, limit: int = 200) -> str:
    """One line for the person from an SDK OAuth exception, without response bodies, states or tokens."""
    msg = str(e)
    if isinstance(e, (SignInRequired, RefreshUnavailable)):
        return msg or "sign in again"
    if isinstance(e, OAuthTokenError) and msg.startswith("Token exchange failed"):
        status = _STATUS.search(msg)
        error, description = _fields(msg.split(": ", 1)[1] if ": " in msg else "")
        what = f"the token endpoint refused the sign-in: HTTP {status.group(1) if status else '?'}"
        if error:
            what += f", {error}"
        if description:
            what += f" ({shown(description[:limit], one_line=True)})"
        return what
    if isinstance(e, OAuthTokenError):
        return "the token endpoint sent an answer Palui cannot use"
    if isinstance(e, OAuthRegistrationError):
        found = re.search(r"Registration failed: (\d{3})", msg)
        if found:
            return f"the authorization server refused to register Palui as a client: HTTP {found.group(1)}"
        return "the authorization server's answer to the client registration cannot be used"
    if isinstance(e, OAuthFlowError) and msg.startswith("State parameter mismatch"):
        return "the sign-in answer did not belong to this sign-in (state mismatch)"
    if isinstance(e, OAuthFlowError):
        return shown(redact_secrets(msg)[:limit], one_line=True)
    return f"{type(e).__name__}: {shown(redact_secrets(msg)[:limit], one_line=True)}"


class OAuthLogFilter(logging.Filter):
    """Rewrites SDK auth log records: a flow error's traceback becomes :func:`describe_oauth_error`,
    and every remembered secret becomes ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {describe_oauth_error(record.exc_info[1])}"
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = redact_secrets(text), None
        return True


_installed = False


def install_log_filter() -> None:
    """Attach :class:`OAuthLogFilter` to the SDK's auth loggers (once per process)."""
    global _installed
    if _installed:
        return
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(OAuthLogFilter())
    _installed = True
