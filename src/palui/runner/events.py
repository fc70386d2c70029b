"""A turn's events: stored with the turn in order and handed to the front end as they happen.

:class:`TurnEvents` owns the events of one run (``run_events``) and the front end's sink. The runner
holds it; every collaborator that reports something gets its :meth:`~TurnEvents.emit` (an
:data:`Emit`), and the call sender its :meth:`~TurnEvents.live` too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from palui.runner.state import Turn

EventSink = Callable[[dict[str, Any]], None]
#: ``emit(turn, event)``: store ``event`` with the turn and hand it to the front end.
Emit = Callable[["Turn", dict[str, Any]], None]


class TurnEvents:
    """The events of one run.

    Args:
        on_event: called with each event dict as it happens (``step``, ``tool_call``, ``approval``,
            ``answer``…), or None; an exception it raises is swallowed (a front end's printing
            problem must not break the turn).
    """

    def __init__(self, on_event: EventSink | None) -> None:
        self.on_event = on_event
        self.run_events: list[dict[str, Any]] = []

    def emit(self, t: Turn, event: dict[str, Any]) -> None:
        """Store ``event`` with the turn (its ``seq`` is its index there) and hand it to the front end."""
        event = {"time": time.time(), "seq": len(t.events), **event}
        t.events.append(event)
        self.run_events.append(event)
        self.live(t, event)

    def live(self, t: Turn, event: dict[str, Any]) -> None:
        """Hand ``event`` to the front end only, not stored: the pieces of streamed text (``text_delta``,
        ``text_discarded``) and ``tool_start``. The stored events (``text``, ``tool_call``) carry the
        same facts when complete."""
        if self.on_event:
            try:
                self.on_event(event if "time" in event else {"time": time.time(), **event})
            except Exception:  # a front end's printing problem must not break the turn
                pass

    def on_request_event(self, t: Turn, event: dict[str, Any]) -> None:
        """What the model request reports while it runs (:data:`palui.models.StreamSink`): text pieces
        and discards go to the front end only; a provider retry is stored too."""
        event = {**event, "step": t.steps + 1}
        if event["type"] == "retry":
            self.emit(t, event)
        else:
            self.live(t, event)
