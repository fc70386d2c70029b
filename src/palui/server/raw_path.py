"""Routes matched on the path as the client sent it, so an id reaches the service exactly as typed (spec §8.1).

Starlette matches a route against ``scope["path"]``, which the server has already percent-decoded: an
approval id ``a-../../x`` sent as one segment (``a-..%2F..%2Fx``) arrives as three, matches no route and
gets Starlette's bare ``Not Found``. A :class:`RawPathRoute` matches the same template against
``scope["raw_path"]`` (still encoded: a ``%2F`` stays inside its segment) and decodes each path
parameter afterwards, so the service sees ``a-../../x`` and answers ``unknown approval 'a-../../x'``.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from starlette.routing import Match, Route
from starlette.types import Scope


def raw_path(scope: Scope) -> str:
    """The request's path still percent-encoded (``raw_path`` without a query string; the decoded
    ``path`` encoded again when the server gives no ``raw_path``)."""
    raw = scope.get("raw_path")
    if raw is None:
        return quote(scope["path"])
    return bytes(raw).split(b"?", 1)[0].decode("latin-1")


class RawPathRoute(Route):
    """A Starlette :class:`~starlette.routing.Route` whose ``{param}`` segments are matched on the raw
    path and percent-decoded one by one (a parameter may hold ``/``, ``?`` or ``..``). Only plain string
    parameters are used with it (no ``:path`` or ``:int`` convertors)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        found = self.path_regex.match(raw_path(scope))
        if found is None:
            return Match.NONE, {}
        params = {**scope.get("path_params", {}), **{k: unquote(v) for k, v in found.groupdict().items()}}
        child: Scope = {"endpoint": self.endpoint, "path_params": params}
        if self.methods and scope["method"] not in self.methods:
            return Match.PARTIAL, child
        return Match.FULL, child
