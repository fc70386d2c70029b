"""A call refused for a wider OAuth scope becomes a question to the person (spec §7.11).

Only that call is refused: the connector stays connected and its other tools keep working. The person is
asked once per (tool, scopes) on their channel, like an approval: sign in again for the union of the
scopes granted and needed (``palui connectors login ID`` or "Sign in" on the sheet, which then asks for
exactly that union and shows it first), or ``/deny s-…`` (the tool is switched off with that reason).
A scope the server's protected-resource metadata does not list is never asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.connectors.mcp.oauth.step_up import union
from palui.store import scope_requests

if TYPE_CHECKING:
    from palui.connectors.base import ConnectorEnv
    from palui.connectors.mcp.oauth.step_up import StepUp


def _listed(scopes: tuple[str, ...]) -> str:
    return " ".join(scopes) or "no scope"


def ask_for_scope(env: ConnectorEnv, connector: str, name: str, step: StepUp, turn_id: str | None) -> str:
    """Record (or find) the person's question for ``step`` of tool ``name`` (model-visible) of ``connector`` and
    tell them once; returns what the model is told (the call was not run)."""
    if not step.needed:
        return (f"The tool was refused: the server wants the scope {_listed(step.unlisted)}, which its "
                "protected-resource metadata does not list, so Palui does not ask for it. The call was not run.")
    request, created = scope_requests.ask(env.db, connector=connector, tool=step.tool, name=name, needed=step.needed,
                                          granted=step.granted, turn_id=turn_id)
    if created:
        both = _listed(union(step.granted, step.needed))
        env.notify("notice", f"{name} needs `{_listed(step.needed)}` beyond `{_listed(step.granted)}`: sign in "
                             f"again for both? Yes: palui connectors login {connector} (or “Sign in” on its sheet) "
                             f"asks for `{both}`. No: /deny {request['id']} switches {name} off. The other tools of "
                             f"{connector} keep working meanwhile.")
    return (f"The tool needs more access: the scope {_listed(step.needed)} beyond what the person signed in for "
            f"({_listed(step.granted)}). The person was asked to sign in again for both ({request['id']}); the call "
            "was not run. The connector's other tools keep working.")
