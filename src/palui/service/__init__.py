"""The service: the one API every front end (CLI, HTTP routes, web pages, chat channels) uses.

Front ends parse and print; everything else happens here or below (docs/architecture.md).
The service is composed of parts, one concept per module, each a class that builds on
:class:`~palui.service.core.ServiceCore` and on the parts it uses (a part may call only what
it inherits)::

    ServiceCore   settings, database, notifier, connector hub, turn runtime      (core.py)
    ├── ToolsPart        connectors, tools, classes, switches, review, explain    (tools.py)
    │   ├── MCPPart      MCP servers: add, import, refresh, remove, enable        (mcp_connectors.py)
    │   │   └── MCPSignInPart  OAuth: login, logout, the web sheet's sign-in    (mcp_signin.py)
    │   ├── PolicyPinPart  policy snapshot and check, policy.check_file at start  (policy_pin.py)
    │   ├── SuggestionsPart  classes suggested for unknown tools                  (suggestions.py)
    │   ├── OutsidePart  Rule of Two flags: reaches outside, private connectors   (outside.py)
    │   └── StatusPart   /status, the pause state, the audit log                  (status.py)
    │       ├── AuditLogPart  the hash-chained audit: verify, export, daily head  (audit_log.py)
    │       ├── ReportPart  the governance report and its suggestions             (report.py)
    │       └── TurnsPart  start, launch, run, resume, stop                       (turns.py)
    │           ├── ConversationsPart  conversations and turns as shown           (conversations.py)
    │           │   └── ElicitationsPart  the one door for a server's questions   (elicitations.py)
    │           │       └── ApprovalsPart  the one door for answers, re-decision  (approvals.py)
    │           │           ├── ChannelsPart  chat channels: list, pairing, state  (channels.py)
    │           │           │   └── ChannelUpdatesPart  updates once, chats, sent (channel_updates.py)
    │           │           └── LivePart   following a turn, waiting for an answer (live.py)
    │           └── TriggersPart       jobs and webhooks                          (triggers.py)
    │               └── BrakePart      stop everything, pause/resume jobs         (brake.py)
    ├── MemoriesPart     memories and tasks                                       (memories.py)
    └── MaintenancePart  retention (pruning) and backups                           (maintenance.py)

Mixins rather than delegation so that the API stays one flat object (``svc.tools()``,
``svc.answer_approval(…)``) for front ends and tests, while each module stays small and a
reader sees from a part's base classes what it may use. Methods raise
:class:`~palui.errors.PaluiError` subclasses with messages fit for the person.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from palui.service.api import Service
    from palui.service.turns import Launched

__all__ = ["Launched", "Service"]


def __getattr__(name: str) -> Any:
    """``Service`` and ``Launched`` are imported on first use (PEP 562), so that importing one part
    (``palui.service.tools``) does not import every part."""
    if name == "Service":
        from palui.service.api import Service

        return Service
    if name == "Launched":
        from palui.service.turns import Launched

        return Launched
    raise AttributeError(f"module 'palui.service' has no attribute {name!r}")
