"""Service part: standing approvals, the person's answers given in advance (spec §5.9).

Only the person makes one, through the one door for answers (spec §5.6): "approve, and from now on the same" on
an approval card (:meth:`ApprovalsPart.answer <palui.service.approvals.ApprovalsPart.answer>`
with ``always``, which checks the standing approval here before the answer is recorded and makes it after), or
``palui rules add`` from an approval the person approved earlier (a suggestion of ``palui report``, spec §5.8).
Either way the answer comes from the token holder (the CLI, the web page, the JSON API) or the paired person of a
chat channel (decision 0057), named in ``via``: nothing a model, an MCP server, a webhook or a gateway client
sends reaches these methods (there is no tool for them, and a gateway client's token opens ``/mcp`` only).

:class:`RulesPart` lists, shows, makes and removes them; the approval gate answers asks with them
(:mod:`palui.store.standing`), and the re-decision after every change to tools suspends those whose tool changed.
"""

from __future__ import annotations

import builtins
import json
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from palui.errors import UsageError
from palui.policy import standing as rules
from palui.store import catalog, ids, standing
from palui.text.display import named

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.results import StandingApproval
    from palui.service.notifier import Notifier
    from palui.store.db import Database
    from palui.store.tools import ToolRow

#: Where the person answers: a front end or a chat channel's name (as for an approval's answer, spec §5.6).
VIA = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
#: Statuses a listing may ask for.
STATUSES = ("active", "suspended", "expired", "removed")


class RulesPart:
    """Standing approvals.

    Args:
        db, settings, notifier: the service's shared collaborators (``approvals.standing_days``; the person told
            of a suspension).
    """

    def __init__(self, db: Database, settings: Settings, notifier: Notifier) -> None:
        self.db = db
        self.settings = settings
        self.notifier = notifier

    def list(self, status: str | None = None) -> list[StandingApproval]:
        """The standing approvals, newest first: every one but the removed, or those of ``status`` (active,
        suspended, expired, removed). Expired ones are marked first. Raises UsageError for another status."""
        if status is not None and status not in STATUSES:
            raise UsageError(f"a standing approval's status is one of {', '.join(STATUSES)}")
        standing.expire(self.db)
        return standing.listed(self.db, status)

    def get(self, rule_id: str) -> StandingApproval:
        """One standing approval (a unique prefix of its id is enough). Raises NotFound, UsageError."""
        standing.expire(self.db)
        return standing.get(self.db, ids.resolve(self.db, rule_id))

    def remove(self, rule_id: str, via: str) -> StandingApproval:
        """The person removes a standing approval: it answers nothing from now on (audited). Raises NotFound,
        UsageError (removed already)."""
        return standing.remove(self.db, ids.resolve(self.db, rule_id), via)

    def check(self, approval_id: str, widen: Mapping[str, str] | None, confirm: bool,
              pending: bool = True) -> None:
        """Raise UsageError when a standing approval could not be made from ``approval_id`` (its tool, context,
        class and the widenings), without changing anything: called before an answer "approve, and from now on the
        same" is recorded, so a refused widening answers nothing. ``pending``: the approval is about to be answered
        (else it must have been approved by the person)."""
        a = self._approval(approval_id, pending)
        row = self._tool(a)
        context = self.context_of(a)
        why = rules.refusal_to_make(row.tool_class.value, context, confirm)
        if why:
            raise UsageError(f"no standing approval: {why}")
        try:
            rules.constraints_for(json.loads(a["args_json"]), dict(widen or {}), json.loads(a["untrusted_args"]))
        except ValueError as e:
            raise UsageError(f"no standing approval: {e}") from None

    def make(self, approval_id: str, widen: Mapping[str, str] | None, via: str, confirm: bool = False,
             days: float | None = None) -> StandingApproval:
        """Make a standing approval from the approval ``approval_id``, which the person approved (``via`` where they
        answer now). Every argument is pinned to what they saw, except those ``widen`` names (argument → ``any``,
        ``prefix:TEXT``, ``one-of:A,B``), which must have carried no mark. It answers in the approval's context
        (chat, tainted chat, job, a gateway client by name) for ``days`` (default ``approvals.standing_days``), bound
        to the tool's name, effective class and definition hash as they are now. Raises UsageError (refused, with
        why), NotFound."""
        self._check_via(via)
        a = self._approval(approval_id, pending=False)
        row = self._tool(a)
        days = standing.expiry_days(days, float(self.settings.approvals.standing_days))
        return standing.make(self.db, approval=a, row=row, context=self.context_of(a), widen=dict(widen or {}),
                             confirmed=confirm, via=via, expiry_days=days, now=time.time())

    def suspend_changed(self) -> builtins.list[str]:
        """Suspend, telling the person, every standing approval whose tool changed since it was made (class,
        definition, review, its connector removed). Returns their ids."""
        return standing.suspend_changed(self.db, self.notifier)

    # -- helpers ---------------------------------------------------------------------------------------------

    @staticmethod
    def _check_via(via: str) -> None:
        if not isinstance(via, str) or not VIA.match(via) or via in (standing.VIA, "palui"):
            raise UsageError(f"unknown answer channel {via!r}")

    def _approval(self, approval_id: str, pending: bool) -> Any:
        aid = ids.resolve(self.db, approval_id)
        if not isinstance(aid, str) or not aid.startswith("a-"):
            raise UsageError(f"{named(str(approval_id))} is not an approval: a standing approval is made from one "
                             "(see: palui approvals list --all)")
        a = self.db.one("SELECT a.*, t.origin AS turn_origin, t.tainted AS turn_tainted, t.conversation_id"
                        " FROM approvals a JOIN turns t ON t.id = a.turn_id WHERE a.id = ?", (aid,))
        if a is None:
            raise UsageError(f"unknown approval {named(aid)} (see: palui approvals list --all)")
        if pending:
            return a
        if a["status"] != "approved" or a["answered_via"] in (None, standing.VIA):
            raise UsageError(f"approval {aid} is {a['status']}"
                             + (", answered by a standing approval" if a["answered_via"] == standing.VIA else "")
                             + ": a standing approval is made from a call you approved yourself")
        if a["rule_made"]:
            raise UsageError(f"standing approval {a['rule_made']} was made from approval {aid} already")
        return a

    def _tool(self, a: Any) -> ToolRow:
        row = catalog.tool_now(self.db, a["tool"])
        if row is None or not row.usable:
            raise UsageError(f"no standing approval: the tool {named(a['tool'])} is no longer listed")
        if row.changed and (row.review or {}).get("kind") != "loosened":
            raise UsageError(f"no standing approval: {row.name} waits for review (palui tools review {row.name})")
        if row.tool_class.value != a["class"]:
            raise UsageError(f"no standing approval: {row.name} was {a['class']} when you approved it and is "
                             f"{row.tool_class.value} now")
        return row

    def context_of(self, a: Any) -> str | None:
        """The context of an approval's call: its turn's origin and taint, or its gateway client by name."""
        client = None
        if a["turn_origin"] == "gateway":
            s = self.db.one("SELECT client FROM gateway_sessions WHERE turn_id = ?", (a["turn_id"],))
            client = s["client"] if s is not None else None
        return rules.context_of(a["turn_origin"], bool(a["turn_tainted"]), client)
