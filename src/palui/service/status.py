"""Service part: ``/status``, the pause state and the webhook share (spec §6, §8).

``status()`` is composed here, once: the connectors as the MCP part shows them, the caps and the pause,
the webhook share, the counts, the audit head, the jobs' brake, the governance summary and, last, the
chat channels' lines from the channels part.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from palui.config import Settings
from palui.connectors.hub import ConnectorHub
from palui.runner import audit, caps, gateway_pause
from palui.service.channels import ChannelsPart
from palui.service.clock import Clock
from palui.service.connectors import ConnectorsPart
from palui.service.notifier import Notifier
from palui.store import report as report_store
from palui.store.db import Database
from palui.triggers import jobs as jobs_mod
from palui.types import Origin

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from palui.results import PauseState, PendingApprovalLine, Status, StatusConnector, WebhookShare


class StatusPart:
    """What the person sees of the whole: status, the pause, the webhook share.

    Args:
        db, settings, hub, notifier, clock: the service's shared collaborators.
        connectors_part: the connectors as the person sees them.
        channels_part: the chat channels' lines.
    """

    def __init__(self, db: Database, settings: Settings, hub: ConnectorHub, notifier: Notifier, clock: Clock,
                 connectors_part: ConnectorsPart, channels_part: ChannelsPart) -> None:
        self.db = db
        self.settings = settings
        self.hub = hub
        self.notifier = notifier
        self.clock = clock
        self.connectors_part = connectors_part
        self.channels_part = channels_part

    def get(self) -> Status:
        """``{"model","tokens_today","cached_tokens_today","caps","runs_last_hour","paused","paused_reason","paused_until",
        "webhook_runs_last_hour","webhooks_held","webhooks_held_until","connectors","pending_approvals",
        "pending_approval_list","pending_elicitations","audit_head","jobs_paused","gateway_paused","governance"}``
        (spec §8
        /status; the webhook share, spec §6.6; a connector that needs a sign-in says ``error: sign in again``;
        ``pending_approval_list`` the pending approvals oldest first, ``[{"id","tool","expires_at"}]``, so
        ``/status`` on a phone names them; ``governance`` counts the last 7 days' asks, spec §5.8:
        ``{"days","asks","approved","denied","expired","cancelled","median_answer_seconds"}``; ``audit_head``
        is the last audit row's ``{"id","hash"}`` or None, spec §10.3; ``jobs_paused`` ``{"since","by"}``
        while the emergency brake holds the jobs, ``gateway_paused`` ``{"since","by"}`` while it holds the
        gateway, spec §5.7; ``channels`` the chat channels:
        ``[{"name","kind","state","person","last_failure"}]``)."""
        now = self.clock.now()
        conns: list[StatusConnector] = []
        for c in self.connectors_part.list():
            live = self.hub.state(c["id"])
            conns.append(
                {"id": c["id"], "state": live or c["state"], "tools": c["tools"], "enabled_tools": c["enabled_tools"]}
            )
        pause = self.pause_state()
        waiting: list[PendingApprovalLine] = [
            {"id": r["id"], "tool": r["tool"], "expires_at": datetime.fromtimestamp(r["expires_at"], UTC).isoformat()}
            for r in self.db.all("SELECT id, tool, expires_at FROM approvals WHERE status = 'pending'"
                                 " AND expires_at > ? ORDER BY created_at, id", (now,))]
        return {
            "model": self.settings.model,
            "tokens_today": caps.tokens_today(self.db, self.clock.timezone()),
            "cached_tokens_today": caps.cached_today(self.db, self.clock.timezone()),
            "caps": {
                "daily_tokens": self.settings.caps.daily_tokens,
                "job_daily_tokens": self.settings.caps.job_daily_tokens,
                "runs_per_hour": self.settings.caps.runs_per_hour,
                "webhook_runs_per_hour": self.settings.caps.webhook_runs_per_hour,
                "timezone": self.settings.caps.timezone or "system",
                "cached_input_weight": self.settings.caps.cached_input_weight,
            },
            "runs_last_hour": caps.runs_last_hour(self.db),
            **pause,
            **self.webhook_share(),
            "connectors": conns,
            # What waits now, through (status, expires_at): reads only, whatever the history.
            "pending_approvals": len(waiting),
            "pending_approval_list": waiting,
            "pending_elicitations": self.db.row("SELECT COUNT(*) FROM elicitations WHERE status = 'pending'"
                                                " AND expires_at > ?", (now,))[0],
            "audit_head": audit.head(self.db),
            "jobs_paused": jobs_mod.paused(self.db),
            "gateway_paused": gateway_pause.paused(self.db),
            "governance": report_store.summary(self.db, 7, now, self.clock.timezone()),
            "channels": self.channels_part.status_lines(),
        }

    def timezone(self) -> ZoneInfo | None:
        """The zone times are shown in and days start in (``caps.timezone``; None is the system zone)."""
        return self.clock.timezone()

    def pause_state(self) -> PauseState:
        """Whether a global cap pauses new turns: ``{"paused","paused_reason","paused_until"}``."""
        tz = self.clock.timezone()
        if caps.tokens_today(self.db, tz) >= self.settings.caps.daily_tokens:
            return {"paused": True, "paused_reason": "daily token cap", "paused_until": caps.next_day(tz)}
        with self.db.read() as c:  # a turn waits for more room than is left today (spec §6.5)
            if caps.waiting_for_tokens(c):
                return {"paused": True, "paused_reason": "daily token cap", "paused_until": caps.next_day(tz)}
        runs = caps.runs_last_hour(self.db)
        if runs >= self.settings.caps.runs_per_hour:
            return {
                "paused": True,
                "paused_reason": "runs per hour cap",
                "paused_until": caps.window_frees_at(self.db, self.settings.caps.runs_per_hour),
            }
        return {"paused": False, "paused_reason": None, "paused_until": None}

    def webhook_share(self) -> WebhookShare:
        """The webhook share of the hourly runs (spec §6.6), not a global pause:
        ``{"webhook_runs_last_hour","webhooks_held","webhooks_held_until"}`` (ISO time or None)."""
        share = self.settings.caps.webhook_runs_per_hour
        used = caps.runs_last_hour(self.db, origin=Origin.WEBHOOK.value)
        held = used >= share
        return {"webhook_runs_last_hour": used, "webhooks_held": held,
                "webhooks_held_until": caps.window_frees_at(self.db, share, origin=Origin.WEBHOOK.value)
                if held else None}

    def tell_webhooks_held(self) -> None:
        """Tell the person once per hold of the webhook share (called only by the claim that started it)."""
        share = self.settings.caps.webhook_runs_per_hour
        until = self.webhook_share()["webhooks_held_until"]
        self.notifier("cap", f"Webhook deliveries are held: webhook turns used their share of the hourly runs "
                           f"(caps.webhook_runs_per_hour = {share}). New webhook turns wait"
                           + (f" until {until}" if until else "") + "; your own messages and jobs go on.")
