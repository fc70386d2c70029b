"""The ``web`` connector: ``fetch_page`` with size/time limits and private-address refusal (spec §7).

Settings: ``web.max_bytes`` (2 MiB), ``web.timeout_seconds`` (20 s for the whole
fetch), ``web.allow_private`` (false). Every result, errors included, is untrusted
(spec §4). HTML becomes its title and visible text; text and JSON pages are returned
as they are; other content types are described, not shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palui.connectors.base import CallContext, ToolResult, ToolSpec
from palui.connectors.builtin.common import BuiltinConnector
from palui.types import ToolClass

if TYPE_CHECKING:
    import ssl

    from palui.connectors.builtin.fetch import Page
    from palui.connectors.builtin.netguard import AddressPolicy, Resolver

TOOLS = [
    ToolSpec(
        name="fetch_page",
        description="Fetch a web page (http or https) and return its text content.",
        input_schema={
            "type": "object",
            "properties": {"url": {"type": "string", "description": "The http(s) URL to fetch."}},
            "required": ["url"],
        },
        declared_class=ToolClass.READ,
        untrusted_output=True,
    ),
]


_HTML = {"text/html", "application/xhtml+xml"}
_ERROR_SNIPPET_CHARS = 2000


def _is_textual(media_type: str) -> bool:
    return (media_type.startswith("text/") or media_type in ("application/json", "application/xml",
                                                                "application/javascript", "application/x-ndjson",
                                                                "application/yaml", "application/x-yaml")
            or media_type.endswith(("+json", "+xml")))


class WebConnector(BuiltinConnector):
    """``fetch_page`` [read, untrusted output].

    Args:
        policy: the address policy; default :func:`netguard.address_refusal`, or
            allow-all when ``web.allow_private`` is true. Injectable for tests.
        resolver, verify: a fake DNS resolver (None: the system's) and a TLS trust setting, for tests.
    """

    id = "web"

    def __init__(self, policy: AddressPolicy | None = None, resolver: Resolver | None = None,
                 verify: ssl.SSLContext | bool = True) -> None:
        self._policy = policy
        self._resolver = resolver
        self._verify = verify

    tools = TOOLS
    untrusted_errors = True

    async def call_checked(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        """Fetch ``args["url"]``. Never raises: every failure is an ``is_error`` result, untrusted."""
        if name != "fetch_page":
            return ToolResult(text=f"web has no tool {name!r}", is_error=True, untrusted=True)
        url = args.get("url")
        if not isinstance(url, str) or not url.strip():
            return ToolResult(text="fetch_page: missing argument 'url' (an http or https URL)", is_error=True,
                              untrusted=True)
        url = url.strip()
        # httpx (with what it pulls in) is imported by the first fetch, not by every command that
        # lists the built-in tools (docs/decisions/0085-a-light-cli-start.md).
        from palui.connectors.builtin.fetch import FetchError, fetch
        from palui.connectors.builtin.netguard import address_refusal, allow_all, system_resolver

        s = ctx.settings
        policy = self._policy or (allow_all if s.web.allow_private else address_refusal)
        try:
            page = await fetch(url, max_bytes=s.web.max_bytes, timeout=s.web.timeout_seconds,
                               policy=policy, resolver=self._resolver or system_resolver, verify=self._verify)
        except FetchError as e:
            text = f"fetch_page failed: {e}"
            if e.page is not None:
                snippet = render(e.page)[:_ERROR_SNIPPET_CHARS]
                text += f"\n\nThe server answered:\n{snippet}"
            return ToolResult(text=text, is_error=True, untrusted=True, taint_detail=f"fetch of {url}")
        except Exception as e:  # a bug here must reach the model as an error, not crash the turn
            return ToolResult(text=f"fetch_page failed: {type(e).__name__}: {e}", is_error=True, untrusted=True,
                              taint_detail=f"fetch of {url}")
        return ToolResult(text=render(page), untrusted=True, taint_detail=f"content of {page.url}")


def render(page: Page) -> str:
    """What the model sees of a page: URL, title, a truncation note, then the text (or a description)."""
    from palui.connectors.builtin import extract  # html.parser and friends: only when a page is shown

    media = page.media_type
    kind = "html" if media in _HTML else "text" if _is_textual(media) else ""
    if not media:
        kind = "html" if extract.looks_like_html(page.body) else "text" if extract.is_text(page.body) else ""
    lines = [f"URL: {page.url}"]
    if page.truncated:
        lines.append(f"[Truncated: the page is larger than {len(page.body)} bytes (web.max_bytes); "
                     "only the beginning is shown.]")
    if kind == "html":
        title, text = extract.html_to_text(extract.decode(page.body, page.charset, html=True))
        if title:
            lines.append(f"Title: {title}")
        body = text
    elif kind == "text":
        body = extract.decode(page.body, page.charset, html=False)
    else:
        more = " or more" if page.truncated else ""
        return "\n".join(lines + [f"Content type {media or 'unknown'}, {len(page.body)} bytes{more}: "
                                   "not a text page, so its content is not shown."])
    return "\n".join(lines) + "\n\n" + (body or "(no text)")
