"""The service: the one API every front end (CLI, HTTP routes, web pages, chat channels) uses.

Front ends parse and print; everything else happens here or below (docs/architecture.md).
:class:`~palui.service.api.Service` is a small facade: it builds the shared collaborators and each
part once, and forwards every public method, in one line, to the one part that owns it
(:class:`~palui.service.forward.Forward`: ``svc.tools()`` is ``svc.tools_part.tools()``). A part is a
plain class, one concept per module; it inherits from no other part and reaches another only through a
reference given to its ``__init__``. Built in this order, each part after the parts it holds (``→``),
so the parts form a DAG and the modules import no circle::

    shared collaborators (collaborators.py): settings, database, Clock (clock.py), the person's channel
      Notifier (notifier.py), Redecision (re-decides pending approvals, suspends standing approvals whose
      tool changed: the lowest part), ConnectorHub
      (its on_change is Redecision's method: the hub, below the service, never sees a part)

    TurnTasks           the turn tasks of this process and their events      (turn_tasks.py)
    ToolsPart           connectors' rows, tools, classes, switches, explain   (tools.py)       → redecide
    MCPPart             MCP servers: add, refresh, remove, enable; connectors() (mcp_connectors.py) → Tools
    MCPImportPart       an mcpServers file                                    (mcp_import.py)  → MCP
    MCPSignInPart       OAuth: login, logout, the web sheet's sign-in         (mcp_signin.py)  → MCP, redecide
    PolicyPinPart       policy snapshot and check, policy.check_file          (policy_pin.py)  → Tools
    SuggestionsPart     classes suggested for unknown tools                   (suggestions.py) → Tools
    OutsidePart         Rule of Two flags: reaches outside, private           (outside.py)     → Tools
    ReportPart          the governance report and its suggestions             (report.py)      → Tools
    AuditLogPart        the hash-chained audit: verify, export, daily head    (audit_log.py)
    MemoriesPart        memories and tasks                                    (memories.py)
    MaintenancePart     retention (pruning) and backups                       (maintenance.py)
    ChannelsPart        chat channels: list, pairing, state, held invites     (channels.py)
    ChannelOutboxPart   the channels' durable outbox: take, render, mark sent (channel_outbox.py)
    MailRecordsPart     the email channel's answer addresses and threads      (mail_records.py)
    StatusPart          /status, the pause state, the audit rows              (status.py)      → MCP, Channels
    TurnsPart           start, claim, launch, run, resume, stop               (turns.py)       → Status, TurnTasks
    ConversationsPart   conversations and turns as shown                      (conversations.py) → Turns, Status
    ElicitationsPart    the one door for a server's questions                 (elicitations.py) → Conversations, Turns
    RulesPart           standing approvals: list, make, remove, suspend       (rules.py)
    ApprovalsPart       the one door for answers                              (approvals.py)   → Conversations,
                                                                                 Elicitations, Turns, Rules, redecide
    ChannelUpdatesPart  updates once, chats, sent messages                    (channel_updates.py) → Channels,
                                                                                 Turns, Approvals
    LivePart            following a turn, waiting for an answer               (live.py)        → TurnTasks, Turns,
                                                                                 Status, Approvals
    GatewayPart         the gateway: clients, sessions, tools, calls          (gateway.py)     → Turns
    BrakePart           stop everything, pause/resume jobs                    (brake.py)       → Turns
    TriggersPart        jobs and webhooks                                     (triggers.py)    → Turns, Brake
    Scheduler           due jobs, every tick                                  (scheduler.py)   → Triggers, Brake,
                                                                                 Turns, TurnTasks
    Runtime             palui serve's tick, its tickers, the drain            (runtime.py)     → TurnTasks, Turns,
                                                                                 Maintenance, redecide, the tickers
                                                                                 (Scheduler, AuditHeadPost)

Where several parts contribute to one answer, one owner composes it: ``status()`` is the status part's,
which asks the channels part for its lines last; ``connectors()`` is the MCP part's, over the tools
part's stored rows; ``oauth_state()`` is the MCP part's (the sign-in part asks it); ``start_job_now()``
is the triggers part's, which asks the brake part first. The facade itself runs the start-up steps
in a fixed order (the built-in tools stored, then expired approvals swept) and ``start_background()``
(the policy file checked, then the runtime started). The light service (:mod:`palui.service.light`)
is the same collaborators and the same tools part, nothing else built. Methods raise
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
