"""The web page's session: its cookie and CSRF token, both derived from the access token (spec §8).

Shared by the :class:`~palui.server.app.Guard` (which checks them on every request) and the web
pages (which set the cookie at login and put the CSRF token in every form). This module imports
neither the app nor the pages, so both import it downwards.
"""

from __future__ import annotations

import hmac

SESSION_COOKIE = "palui_session"


def session_value(token: str) -> str:
    """The session cookie's value: an HMAC-SHA256 (hex) of the token, so the cookie is not the token itself."""
    return hmac.new(token.encode(), b"palui-session", "sha256").hexdigest()


def csrf_value(token: str) -> str:
    """The CSRF token of the web page's session (header ``X-Palui-CSRF`` or form field ``csrf``):
    an HMAC-SHA256 (hex) of the access token, the same for every page of a session."""
    return hmac.new(token.encode(), b"palui-csrf", "sha256").hexdigest()
