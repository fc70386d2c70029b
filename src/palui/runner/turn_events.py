"""A turn's events: stored with the turn in order and handed to the front end as they happen.

:class:`TurnEvents` owns the events of one run (``run_events``) and the front end's sink. The runner
holds it; every collaborator that reports something gets its :meth:`~TurnEvents.emit` (an
:data:`Emit`), and the call sender its :meth:`~TurnEvents.live` too. A collaborator reports an event's
fields (:data:`palui.results.EventFields`, one ``TypedDict`` per ``type``); :class:`TurnEvents` stamps them with
``time`` and ``seq`` into a :data:`palui.results.TurnEvent`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from palui.types import wants_text

if TYPE_CHECKING:
    from palui.results import EventFields, TurnEvent
    from palui.runner.state import Turn

#: Receives each event of a turn as it happens (a front end's printer, a stream, a queue).
EventSink = Callable[["TurnEvent"], None]
#: ``emit(turn, fields)``: stamp an event's fields, store the event with the turn, hand it to the front end.
Emit = Callable[["Turn", "EventFields"], None]


class TurnEvents:
    """The events of one run.

    Args:
        on_event: called with each event dict as it happens (``step``, ``tool_call``, ``approval``,
            ``answer``…), or None; an exception it raises is swallowed (a front end's printing
            problem must not break the turn).
    """

    def __init__(self, on_event: EventSink | None) -> None:
        self.on_event = on_event
        self.run_events: list[TurnEvent] = []

    def emit(self, t: Turn, fields: EventFields) -> None:
        """Store the event of ``fields`` with the turn (its ``seq`` is its index there) and hand it to the
        front end."""
        # The stamp comes first in the stored JSON, as it always did; mypy cannot follow a union through **.
        event = cast("TurnEvent", {"time": time.time(), "seq": len(t.events), **fields})
        t.events.append(event)
        self.run_events.append(event)
        self._hand_out(event)

    def live(self, t: Turn, fields: EventFields) -> None:
        """Hand the event of ``fields`` to the front end only, not stored: the pieces of streamed text
        (``text_delta``, ``text_discarded``) and ``tool_start``. The stored events (``text``,
        ``tool_call``) carry the same facts when complete."""
        self._hand_out(cast("TurnEvent", {"time": time.time(), **fields}))

    def shows_text(self) -> bool:
        """Whether the front end shows text as it arrives now (:func:`palui.types.wants_text`): the next model
        request is streamed only then (spec §9.3)."""
        return wants_text(self.on_event)

    def _hand_out(self, event: TurnEvent) -> None:
        if self.on_event:
            try:
                self.on_event(event)
            except Exception:  # a front end's printing problem must not break the turn
                pass

    def on_request_event(self, t: Turn, event: dict[str, Any]) -> None:
        """What the model request reports while it runs (:data:`palui.models.StreamSink`: ``text_delta``,
        ``text_discarded``, ``retry``), with the step it belongs to: text pieces and discards go to the
        front end only; a provider retry is stored too."""
        # The model layer reports plain dicts (it knows no turn); they become typed events here.
        fields = cast("EventFields", {**event, "step": t.steps + 1})
        if fields["type"] == "retry":
            self.emit(t, fields)
        else:
            self.live(t, fields)
