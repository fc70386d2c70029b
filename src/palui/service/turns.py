"""Service part: starting, running, resuming and stopping turns, one at a time per conversation (spec §3-§8).

The doors every front end and the runtime's tick go through:

- :meth:`TurnsPart.start` creates a turn (status ``queued``). A conversation runs one
  turn at a time (spec §8): a message that arrives while a turn of its conversation is
  running, queued or awaiting approval waits as the next turn (``queued_behind``).
- :meth:`TurnsPart.launch` is the one method that starts a stored turn: it claims it (a new
  turn is admitted by the caps and the one-turn rule in the same transaction) and runs it in
  a task of this process (:class:`~palui.service.turn_tasks.TurnTasks`). :meth:`run` is launch-and-wait.
- :meth:`TurnsPart.stop` is the one method that stops a conversation's or a turn's work.

The caps' pause state and the webhook share are the status part's; this part tells the person when a
claim pauses Palui.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from palui.config import Settings
from palui.connectors.hub import ConnectorHub
from palui.errors import NotFound, UsageError
from palui.policy.caps import WEBHOOK_RUNS_PER_HOUR
from palui.runner import approvals, caps
from palui.runner import state as st
from palui.runner.deps import RunnerDeps
from palui.service import stopping, turn_shape
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.service.status import StatusPart
from palui.service.tools import ToolsPart
from palui.service.turn_tasks import EventSink, TurnTasks
from palui.store import ids
from palui.store.db import Database
from palui.text.display import named
from palui.triggers import jobs as jobs_mod
from palui.types import Origin, TurnStatus

if TYPE_CHECKING:
    import asyncio
    import sqlite3

    from palui.policy.caps import CapVerdict
    from palui.results import TurnEvent, TurnResult

RESUMABLE = (TurnStatus.AWAITING_APPROVAL,)
#: A channel's name: where a conversation was started or an answer given (``terminal``, ``web``, ``telegram``…).
CHANNEL = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
LIVE = ("running", "awaiting_approval", "queued")


@dataclass(frozen=True)
class Launched:
    """What :meth:`TurnsPart.launch` did: ``task`` runs the turn here (None when not started);
    ``cap`` names the cap that keeps a new turn queued; ``behind`` the earlier turn of the
    conversation it waits for."""

    task: asyncio.Task[TurnResult] | None
    cap: str | None = None
    behind: str | None = None


#: One import of the runner at a time: two first turns at once each started one in a thread of its own, and two
#: threads importing the model library's circular modules together get one of them half-initialised (ImportError:
#: "partially initialized module", a 500 on the first requests after a start).
#: A module is in ``sys.modules`` from the start of its import, so "imported" is this flag, set once it ended.
_IMPORT_LOCK = threading.Lock()
_imported = threading.Event()


def _import_runner() -> None:
    import importlib

    with _IMPORT_LOCK:
        importlib.import_module("palui.runner.turn_runner")
        _imported.set()


class TurnsPart:
    """Running, pausing, resuming and stopping governed turns.

    Args:
        db, settings, hub, notifier, clock: the service's shared collaborators (the runner receives the
            first four as :class:`~palui.runner.deps.RunnerDeps`).
        tools_part: the stored tool of a stopped call (its audit row names the tool's class).
        status_part: the pause state and the webhook share, and telling the person about them.
        turn_tasks: runs a claimed turn in a task of this process.
    """

    def __init__(self, db: Database, settings: Settings, hub: ConnectorHub, notifier: Notifier, clock: Clock,
                 tools_part: ToolsPart, status_part: StatusPart, turn_tasks: TurnTasks) -> None:
        self.db = db
        self.settings = settings
        self.hub = hub
        self.notifier = notifier
        self.clock = clock
        self.tools_part = tools_part
        self.status_part = status_part
        self.turn_tasks = turn_tasks

    def runner_deps(self) -> RunnerDeps:
        """The narrow seam the runner receives (never the service itself)."""
        return RunnerDeps(db=self.db, settings=self.settings, hub=self.hub, notify=self.notifier,
                          job_token_cap=partial(jobs_mod.own_token_cap, self.db),
                          job_connectors=partial(jobs_mod.scope_of, self.db))

    async def ready(self) -> None:
        """The turn runner and the model library imported (about 0.5 s of CPU, once per process), in a worker
        thread when they are not yet, so the event loop keeps answering meanwhile. ``palui serve`` no longer
        imports them at its start (docs/decisions/0190-nothing-before-it-is-needed.md): the first turn's
        entry points (``POST /api/turns``, the web page's send, :meth:`send`, :meth:`run_claimed`) await this
        before they need them."""
        if not _imported.is_set():
            import asyncio

            await asyncio.to_thread(_import_runner)

    # -- creating turns --------------------------------------------------------------------------

    def new_conversation(self, origin: Origin = Origin.CHAT, channel: str | None = None) -> str:
        """A new, clean conversation (spec §4: ``/new`` clears taint). Returns its id.

        ``channel`` is where it was started: ``terminal`` (``palui chat``), ``cli`` (``palui run``),
        ``web``, ``api``, or a chat app's name; a job's or webhook's conversation is on ``job`` /
        ``webhook``. Raises UsageError for a channel that is not a short lower-case word."""
        if channel is None and origin is not Origin.CHAT:
            channel = origin.value
        if channel is not None and not CHANNEL.match(channel):
            raise UsageError(f"unknown channel {named(channel)}")
        cid = st.new_id("c")
        with self.db.write() as c:
            c.execute(
                "INSERT INTO conversations (id, origin, channel, created_at) VALUES (?,?,?,?)",
                (cid, origin.value, channel, self.clock.now()),
            )
        return cid

    def check_model(self, spec: str | None) -> str | None:
        """``spec`` (or the configured model when None) checked now, before anything is stored.

        A ``script:`` path is made absolute, so a live service (another working directory)
        reads the same file; ``@NAME`` is checked against this service's ``[models.NAME]``
        tables and stored as written (spec §9.1). A control character in it (a ``script:`` path with a NUL)
        is refused like one in palui.toml (spec §10.4). Returns the model string to store. Raises
        ModelConfigError, UsageError.
        """
        import os

        from palui.models import resolve_model  # the model library is slow to import: only here
        from palui.text.escape import control_character

        where = control_character(spec) if spec else None
        if where:
            raise UsageError(f"model: must not contain control characters ({where})")
        spec = spec or self.settings.model
        if spec and spec.startswith("script:"):
            spec = "script:" + os.path.abspath(os.path.expanduser(spec[len("script:") :]))
        resolve_model(spec, models=self.settings.models)
        return spec

    def start(
        self,
        text: str,
        *,
        origin: Origin = Origin.CHAT,
        conversation: str | None = None,
        model: str | None = None,
        job_id: str | None = None,
        webhook_id: str | None = None,
        prompt: str | None = None,
        channel: str | None = None,
    ) -> str:
        """Create a turn (status ``queued``; it counts as a run when it is admitted). Returns the turn id.

        ``prompt`` is what the model is given when it is not ``text`` itself: a chat channel adds
        quoted, untrusted content (a forwarded message) while ``text``, the turn's input, stays the
        person's own words (approval marks never treat the quoted text as theirs, spec §4).

        The turn starts tainted when its conversation is (spec §4: taint is sticky), and
        a webhook turn starts tainted by its payload. When the conversation has a live turn,
        the new one waits behind it (:meth:`result` says ``queued_behind``). Without a
        ``conversation`` a new one is started on ``channel`` (:meth:`new_conversation`).
        A chat message longer than ``limits.message_chars`` is refused here, before anything is stored, so
        every front end and channel refuses it alike (spec §8.1); a job's prompt is bounded when the job is
        added, a webhook's payload by its body limit.
        Raises UsageError (empty or too long message, bad channel), NotFound (unknown conversation).
        """
        if not isinstance(text, str) or not text.strip():
            raise UsageError("a turn needs a non-empty message")
        limit = self.settings.limits.message_chars
        if origin is Origin.CHAT and len(text) > limit:
            raise UsageError(f"the message is too long: {len(text):,} characters, at most {limit:,} "
                             "(limits.message_chars); nothing was stored")
        with self.db.write():  # a new conversation commits with its first turn
            return self._start(text, origin, conversation, model, job_id, webhook_id, prompt, channel)

    def _start(self, text: str, origin: Origin, conversation: str | None, model: str | None, job_id: str | None,
               webhook_id: str | None, prompt: str | None, channel: str | None) -> str:
        if conversation is None:
            conversation = self.new_conversation(origin, channel)
        conversation = ids.resolve(self.db, conversation)  # a unique prefix is enough
        conv = self.db.one("SELECT * FROM conversations WHERE id = ?", (conversation,))
        if conv is None:
            raise NotFound(f"unknown conversation {named(conversation)}")
        model = model or self.settings.model
        tid = st.new_id("t")
        now = self.clock.now()
        tainted, source = bool(conv["tainted"]), conv["taint_source"]
        if tainted:
            source = f"{source}, earlier in this conversation"
        from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

        # The turn's first message is stored with its row: one transaction, nothing read back.
        first = ModelMessagesTypeAdapter.dump_json([ModelRequest(parts=[UserPromptPart(prompt or text)])]).decode()
        with self.db.write() as c:
            ahead = c.execute(
                "SELECT id FROM turns WHERE conversation_id = ? AND status IN"
                " ('running','awaiting_approval','queued') ORDER BY rowid DESC LIMIT 1",
                (conversation,),
            ).fetchone()
            c.execute(
                "INSERT INTO turns (id, conversation_id, origin, status, input, model, tainted, taint_source, job_id,"
                " webhook_id, queued_behind, messages_json, created_at, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    tid,
                    conversation,
                    origin.value,
                    TurnStatus.QUEUED.value,
                    text,
                    model,
                    int(tainted),
                    source,
                    job_id,
                    webhook_id,
                    ahead[0] if ahead else None,
                    first,
                    now,
                    now,
                ),
            )
        return tid

    # -- claiming and running --------------------------------------------------------------------

    def claim(self, turn_id: str, from_status: tuple[TurnStatus, ...] = (TurnStatus.QUEUED,)) -> st.Claim:
        """Claim a turn for this process (compare-and-set, spec §5). A queued turn is admitted by the
        caps and the one-turn-per-conversation rule in the same transaction (spec §6, §8), and the
        pause state changes in that transaction too (the person is told once per pause).
        Raises NotFound."""
        if self.db.one("SELECT 1 FROM turns WHERE id = ?", (turn_id,)) is None:
            raise NotFound(f"unknown turn {named(turn_id)}")
        if TurnStatus.QUEUED in from_status:
            got = st.claim_new(self.db, turn_id, self.caps_verdict)
            if got.paused_now:
                self.tell_paused(got.paused_now)
            if got.claimed or got.cap or got.behind or from_status == (TurnStatus.QUEUED,):
                return got
        others = tuple(s for s in from_status if s is not TurnStatus.QUEUED)
        return st.Claim(claimed=bool(others) and st.claim(self.db, turn_id, others))

    def launch(
        self,
        turn_id: str,
        from_status: tuple[TurnStatus, ...] = (TurnStatus.QUEUED,),
        on_event: EventSink | None = None,
        claimed: st.Claim | None = None,
    ) -> Launched:
        """Start a stored turn: claim it and run it in a task of this process (the one start door;
        the runtime's tick, the HTTP routes, the web page and the CLI all call it). Needs a running
        event loop. Returns :class:`Launched`; a turn another process holds is left alone. ``claimed``: the
        claim already made (in the transaction that stored the turn, :meth:`send`)."""
        got = claimed or self.claim(turn_id, from_status)
        if not got.claimed:
            return Launched(self.turn_tasks.tasks.get(turn_id), got.cap, got.behind)
        return Launched(self.turn_tasks.launch(turn_id, self._run_task, on_event))

    async def _run_task(self, turn_id: str, on_event: EventSink, drain: Callable[[], bool]) -> TurnResult:
        return await self.run_claimed(turn_id, on_event, drain=drain)

    async def run_claimed(
        self, turn_id: str, on_event: EventSink | None = None, drain: Callable[[], bool] | None = None
    ) -> TurnResult:
        """Run a turn this process has claimed until it is done, paused or stopped (the runtime's task body)."""
        await self.ready()
        from palui.runner.turn_runner import TurnRunner  # imports the model library (slow): only when a turn runs

        runner = TurnRunner(self.runner_deps(), on_event, drain=drain)
        await runner.run(turn_id)
        return self.result(turn_id, runner.run_events)

    async def run(
        self,
        turn_id: str,
        on_event: EventSink | None = None,
        from_status: tuple[TurnStatus, ...] = (TurnStatus.QUEUED,),
        claimed: st.Claim | None = None,
    ) -> TurnResult:
        """Launch a turn and wait for it here (``claimed``: see :meth:`launch`). Returns :meth:`result`.

        If the caps refuse a queued turn, it stays queued: the result has status ``queued``,
        ``queued_reason`` (the cap) and ``start_after`` (ISO time). A turn waiting behind
        another of its conversation is ``queued`` with ``queued_behind``. If another process
        holds the turn, returns its current state without running it.
        """
        launched = self.launch(turn_id, from_status, on_event, claimed)
        if launched.task is not None and launched.cap is None and launched.behind is None:
            return await launched.task
        result = self.result(turn_id, [])
        if launched.cap:
            result["queued_reason"] = launched.cap
            result["start_after"] = (self.status_part.pause_state().get("paused_until")
                                     or caps.next_day(self.clock.timezone()))
        return result

    async def send(
        self,
        text: str,
        *,
        conversation: str | None = None,
        model: str | None = None,
        origin: Origin = Origin.CHAT,
        on_event: EventSink | None = None,
        channel: str | None = None,
    ) -> TurnResult:
        """Start a turn and run it here: the ``palui run`` path. The new conversation (none given), the turn row
        with its first message and its claim commit in one durable transaction
        (docs/decisions/0189-a-durable-turn-in-few-transactions.md)."""
        await self.ready()
        with self.db.write(durable=True):
            tid = self.start(text, origin=origin, conversation=conversation, model=model, channel=channel)
            got = self.claim(tid)
        return await self.run(tid, on_event, claimed=got)

    async def resume(self, turn_id: str, on_event: EventSink | None = None) -> TurnResult:
        """Go on with a turn paused for an approval that is no longer pending, here (the CLI's way;
        a live service's tick does it by itself). Returns :meth:`result`."""
        return await self.run(turn_id, on_event, from_status=RESUMABLE)

    async def resume_ready(self, on_event: EventSink | None = None,
                           on_turn: Callable[[str], EventSink | None] | None = None) -> list[TurnResult]:
        """Resume turns that no process is running but that can go on: their approval was
        answered or expired, the process running them died (kill -9, a crash), or the turn they
        waited behind has ended. Used where no service runs (the service does this on every tick).
        ``on_turn(turn_id)``, when given, is called before each turn runs and returns that turn's
        event sink (a chat labels them); otherwise every turn's events go to ``on_event``."""
        approvals.sweep(self.db)
        st.recover_orphans(self.db)
        out: list[TurnResult] = []

        def sink(tid: str) -> EventSink | None:
            return on_turn(tid) if on_turn is not None else on_event

        for tid in st.answered_turn_ids(self.db):
            out.append(await self.run(tid, sink(tid), from_status=RESUMABLE))
        # Recovered orphans (already counted as runs) and turns that waited behind another.
        for r in self.db.all(
            "SELECT t.id FROM turns t WHERE t.status = 'queued' AND (t.queued_behind IS NOT NULL"
            " OR EXISTS (SELECT 1 FROM runs x WHERE x.turn_id = t.id)) ORDER BY t.rowid"
        ):
            if st.live_turn_before(self.db, r["id"]) is not None:
                continue  # still behind a live turn of its conversation: not ready
            result = await self.run(r["id"], sink(r["id"]))
            if result["status"] != "queued":
                out.append(result)
        return out

    def caps_verdict(self, c: sqlite3.Connection, turn_row: sqlite3.Row | Mapping[str, Any], now: float) -> CapVerdict:
        """The caps verdict for starting ``turn_row`` now, read on ``c`` inside the admitting transaction
        (:func:`palui.runner.caps.verdict_in_tx`, with the job's own token cap)."""
        return caps.verdict_in_tx(c, turn_row, now, self.settings, jobs_mod.own_token_cap(self.db, turn_row["job_id"]))

    def tell_paused(self, cap: str) -> None:
        """Tell the person once per pause (spec §6): called only by the claim that paused. The
        webhook share's hold (spec §6.6) is told once per hold, and says chat turns go on."""
        if cap == WEBHOOK_RUNS_PER_HOUR:
            return self.status_part.tell_webhooks_held()
        until = self.status_part.pause_state().get("paused_until")
        self.notifier(
            "cap", f"Palui is paused: the {cap} is reached. New turns wait" + (f" until {until}." if until else ".")
        )

    # -- results --------------------------------------------------------------------------------

    def result(self, turn_id: str, events: list[TurnEvent] | None = None) -> TurnResult:
        """The ``palui run --json`` shape: ``{"status","answer","conversation","turn","events","usage",…}``
        (see :func:`palui.service.turn_shape.turn_result`); a unique prefix of the id is enough. Raises
        NotFound, UsageError (an ambiguous prefix)."""
        return turn_shape.turn_result(self.db, ids.resolve(self.db, turn_id), events)

    # -- stop ------------------------------------------------------------------------------------------

    def status(self, turn_id: str) -> str | None:
        """A turn's status word only, None for an unknown turn (cheap: a channel's typing indicator asks four
        times a second)."""
        r = self.db.one("SELECT status FROM turns WHERE id = ?", (turn_id,))
        return None if r is None else str(r[0])

    def stop(self, conversation: str | None = None, turn: str | None = None) -> list[str]:
        """``/stop``: cancel the conversation's running, awaiting-approval or queued turns (spec §5).

        A running turn (in any process) is asked to stop at its next boundary; a paused
        or queued one is stopped now and its pending approvals cancelled. Returns the
        turn ids acted on. Raises UsageError (neither given), NotFound (unknown turn or conversation).
        """
        turn, conversation = (ids.resolve(self.db, turn) if turn else turn,
                              ids.resolve(self.db, conversation) if conversation else conversation)
        if turn:
            rows = self.db.all("SELECT * FROM turns WHERE id = ?", (turn,))
        elif conversation:
            if self.db.one("SELECT 1 FROM conversations WHERE id = ?", (conversation,)) is None:
                raise NotFound(f"unknown conversation {named(conversation)} (see: palui conversations list)")
            rows = self.db.all(
                "SELECT * FROM turns WHERE conversation_id = ? AND status IN ('running','awaiting_approval','queued')",
                (conversation,),
            )
        else:
            raise UsageError("stop needs a conversation or a turn")
        if turn and not rows:
            raise NotFound(f"unknown turn {named(turn)}")
        return stopping.stop_rows(self.db, rows, self.tools_part.find)
