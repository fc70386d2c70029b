"""Service part: the person's policy pinned as tests (spec §3.4).

``palui policy snapshot`` writes, for every tool listed now, one CSV row per origin and taint with
today's verdict, and two per gateway client (``gateway:NAME``: its connectors decide what it may call);
``palui policy check FILE`` reads such a file and names every row that no longer
holds, with the current reason. With ``policy.check_file`` set, ``palui serve`` checks it before the
service starts its work (:meth:`PolicyPart.enforce_file`, the first step of the service's
``start_background``): a tool that would now be looser than pinned is
switched off and the person told; a missing tool, a tighter verdict or an unreadable file is a notice.
The service starts either way (no crash loop under a restart-on-failure unit). The comparison itself
is :mod:`palui.policy.pinned`.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from palui.config import Settings
from palui.errors import NotFound, UsageError
from palui.files import POLICY_MAX_BYTES, Unreadable, read_text
from palui.policy import pinned
from palui.policy.matrix import decide
from palui.policy.standing import describe
from palui.service.notifier import Notifier
from palui.service.tools import ToolsPart
from palui.types import Decision, Origin, Verdict

log = logging.getLogger(__name__)
SITUATIONS = ((Origin.CHAT, False), (Origin.CHAT, True), (Origin.JOB, False), (Origin.JOB, True),
              (Origin.WEBHOOK, False), (Origin.WEBHOOK, True), (Origin.GATEWAY, False), (Origin.GATEWAY, True))


class PolicyPart:
    """Snapshots of the policy and checks against them.

    Args:
        settings: ``policy.check_file``.
        notifier: the person's channel (what the start-up check found).
        tools_part: the tools and their switches.
    """

    def __init__(self, settings: Settings, notifier: Notifier, tools_part: ToolsPart) -> None:
        self.settings = settings
        self.notifier = notifier
        self.tools_part = tools_part

    def _decision_now(self, tool: str, origin: Origin, tainted: bool, client: str | None = None) -> Decision | None:
        try:
            row = self.tools_part.get(tool)
        except NotFound:
            return None
        if not row.present:
            return None
        if client is not None:
            from palui.runner.offer import gateway_offers  # the model library's types: only for a client's rows

            connectors = self._clients().get(client, ())
            if connectors == () or not gateway_offers(row, connectors):
                why = "no such gateway client" if connectors == () else f"not offered to gateway client {client}"
                return Decision(Verdict.OFF, f"off: {why}", "client")
        return decide(row.tool_class, row.enabled, origin, tainted)

    def _clients(self) -> dict[str, tuple[str, ...] | None]:
        """Each gateway client's connectors (None: every MCP connector), by name."""
        return {r["name"]: tuple(json.loads(r["connectors_json"])) if r["connectors_json"] else None
                for r in self.tools_part.db.all("SELECT name, connectors_json FROM gateway_clients ORDER BY name")}

    def snapshot(self) -> str:
        """The CSV text of ``palui policy snapshot``: every listed tool, sorted, in every situation, then in each
        gateway client's (``gateway:NAME``, untainted and tainted: spec §8.6); then one line per active or suspended
        standing approval (spec §5.9), starting ``#`` (``palui policy check`` skips it)."""
        listed = sorted(self.tools_part.list(), key=lambda r: r.name)
        clients = self._clients()
        rows: list[tuple[str, str, bool, Decision]] = []
        for r in listed:
            rows += [(r.name, o.value, t, decide(r.tool_class, r.enabled, o, t)) for o, t in SITUATIONS]
            for name in clients:
                rows += [(r.name, pinned.origin_word(Origin.GATEWAY, name), t,
                          self._decision_now(r.name, Origin.GATEWAY, t, name) or decide(r.tool_class, r.enabled,
                                                                                      Origin.GATEWAY, t))
                         for t in (False, True)]
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerows(pinned.snapshot_records(rows))
        for s in self.tools_part.db.all("SELECT id, tool, context, constraints, status, expires_at FROM"
                                        " standing_approvals WHERE status IN ('active', 'suspended')"
                                        " ORDER BY tool, created_at"):
            until = datetime.fromtimestamp(s["expires_at"], UTC).isoformat(timespec="minutes")
            line = (f"# standing approval {s['id']}: {s['tool']} in {s['context']}: "
                    f"{describe(json.loads(s['constraints']))}; {s['status']} until {until}")
            writer.writerow([" ".join(line.split())])  # one record of one line, whatever the values hold
        return out.getvalue()

    def check(self, text: str) -> list[dict[str, Any]]:
        """Check the CSV ``text`` against the live configuration. Returns the rows that do not hold:
        ``[{"kind","line","tool","origin","tainted","pinned","verdict","reason","message"}]`` (``kind`` is
        ``looser``, ``tighter``, ``differs``, ``missing`` or ``bad``); empty when every row holds."""
        try:
            records = list(csv.reader(io.StringIO(text)))
        except csv.Error as e:
            raise UsageError(f"the policy file is not CSV: {e}") from None
        pins, bad = pinned.parse(records)
        found = bad + pinned.compare(pins, lambda p: self._decision_now(p.tool, p.origin, p.tainted, p.client))
        return [{"kind": f.kind, "line": f.line, "tool": f.pin.tool if f.pin else None,
                 "origin": f.pin.origin.value if f.pin else None, "tainted": f.pin.tainted if f.pin else None,
                 "pinned": f.pin.verdict.value if f.pin else None,
                 "verdict": f.current.verdict.value if f.current else None,
                 "reason": f.current.reason if f.current else None, "message": f.message}
                for f in sorted(found, key=lambda f: f.line)]

    def _check_file(self) -> Path | None:
        """``policy.check_file`` as a path (relative to the directory of ``palui.toml``), None when unset."""
        value = self.settings.policy.check_file
        if not value:
            return None
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.settings.config_file.parent / p

    def enforce_file(self) -> list[dict[str, Any]]:
        """The start-up check of ``policy.check_file``: switch off every tool that would now be looser than
        pinned, tell the person about each finding (one notice), and never raise. Returns the findings."""
        try:
            return self._enforce_policy_file()
        except Exception as e:  # the service starts whatever the check met (no crash loop)
            log.exception("policy.check_file could not be checked")
            self.notifier("notice", f"The policy file (policy.check_file) could not be checked: {type(e).__name__}: "
                                  f"{e}. Nothing was switched off.")
            return [{"kind": "bad", "line": 0, "message": str(e)}]

    def _enforce_policy_file(self) -> list[dict[str, Any]]:
        path = self._check_file()
        if path is None:
            return []
        try:
            found = self.check(read_text(path, POLICY_MAX_BYTES))
        except (Unreadable, UsageError) as e:
            self.notifier("notice", f"The policy file {path} (policy.check_file) could not be read: {e}. Nothing was "
                                  "checked at this start.")
            return [{"kind": "bad", "line": 0, "message": str(e)}]
        if not found:
            return []
        looser = sorted({f["tool"] for f in found if f["kind"] == "looser"})
        if looser:
            self.tools_part.set_enabled(looser, False)
        lines = [f"- {f['message']}" for f in found]
        head = (f"The policy file {path} does not hold: switched off {', '.join(looser)} (it would now do more than "
                "the file pins). " if looser else f"The policy file {path} does not hold. ")
        self.notifier("notice", head + "Check with palui policy check " + str(path) + ", then fix the tool or write a "
                    "new snapshot (palui policy snapshot > FILE).\n" + "\n".join(lines[:50])
                    + (f"\n… and {len(lines) - 50} more" if len(lines) > 50 else ""))
        return found
