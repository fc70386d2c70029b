"""Answering the held tool calls of one model response, one by one and in order (spec §3-§5): a turn's door to
the governed call.

:class:`PendingCalls` is held by the runner (:class:`~palui.runner.turn_runner.TurnRunner`) and walks
``Turn.pending`` (:mod:`palui.runner.pending`): each call not yet answered goes through
:meth:`GovernedCall.run <palui.runner.governed_call.GovernedCall.run>`, the same steps in the same order as a
gateway session's calls (the turn's :class:`~palui.runner.call_options.CallOptions` are the runner's). A call
that is held (an approval, a server's questions) pauses the turn, and the calls after it wait with it.

When every call is answered, their results go to the model as one request (the outcome tells providers that
mark failed results, such as Anthropic's ``is_error``, which ones failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic_ai.messages import ModelRequest, ToolReturnPart

from palui.runner.pending import CallState, outcome

if TYPE_CHECKING:
    from palui.runner.governed_call import GovernedCall
    from palui.runner.state import Turn


class PendingCalls:
    """The walk over one turn's held calls.

    Args:
        governed: the governed call, with the turn's options.
        time_left: the turn's time left in seconds (:meth:`TurnClock.time_left`).
    """

    def __init__(self, governed: GovernedCall, time_left: Callable[[Turn], float]) -> None:
        self._governed = governed
        self._time_left = time_left

    async def process(self, t: Turn) -> bool:
        """Decide and run the held calls in order. True if the turn must pause for the person (an approval
        or a server's questions); otherwise every call is answered, their results are appended to the
        turn's messages and ``t.pending`` is cleared.

        Raises:
            StopRequested: a stop was requested between two calls, or while one was in flight.
        """
        for call in t.pending or []:
            if call["state"] == CallState.DONE:
                continue
            if await self._governed.run(t, call) == "held":
                return True
        loops = self._governed.loops
        if not loops.stop and self._time_left(t) > 0:  # out of time: the time budget is what ended it
            loops.check_streak(t)
        returns = [
            ToolReturnPart(tool_name=c["tool"], content=c["result"], tool_call_id=c["id"], outcome=outcome(c))
            for c in t.pending or []
        ]
        t.messages.append(ModelRequest(parts=returns))
        t.pending = None
        return False
