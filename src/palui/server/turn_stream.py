"""A launched turn as an HTTP answer: its result, or its events as NDJSON while it runs here (spec §8).

Shared by the JSON routes that start or resume a turn (``POST /api/turns``, an approval's or a
question's answer) and ``POST /api/jobs/{name}/run``. A stream's first line says the turn is stored
(``{"type": "turn", "turn", "conversation"}``), then its events, and ``{"type": "result", …}`` last.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, TypeAlias

from starlette.responses import JSONResponse, Response, StreamingResponse

if TYPE_CHECKING:
    from palui.results import ResultLine, TurnEvent, TurnStoredLine
    from palui.service.api import Service
    from palui.service.turns import Launched

#: A turn's event queue from ``LivePart.subscribe`` (None when its task ends).
Events: TypeAlias = "asyncio.Queue[TurnEvent | None]"

NDJSON = "application/x-ndjson"


async def stream_or_wait(svc: Service, turn_id: str, launched: Launched | None, stream: bool,
                         q: Events | None = None) -> Response:
    """The response for a launched turn: its result when it is not running here (queued behind a
    cap or another turn, or held by another process), else its events (``stream``) or its result.
    ``q`` is the turn's event queue when the caller subscribed before launching it (unsubscribed here)."""
    task = launched.task if launched is not None else None
    if launched is None or task is None or launched.cap or launched.behind:
        if q is not None:
            svc.live.unsubscribe(turn_id, q)
        result = svc.turns.result(turn_id, [])
        if launched is not None and launched.cap:
            result["queued_reason"] = launched.cap
            result["start_after"] = svc.status.pause_state().get("paused_until")
        if stream:
            last: ResultLine = {"type": "result", **result}
            return StreamingResponse(iter([json.dumps(last, allow_nan=False) + "\n"]), media_type=NDJSON)
        return JSONResponse(result)
    if not stream:
        if q is not None:
            svc.live.unsubscribe(turn_id, q)
        return JSONResponse(await asyncio.shield(task))
    events: Events = q if q is not None else svc.live.subscribe(turn_id)
    conversation = svc.conversations.of_turn(turn_id)

    async def lines() -> AsyncIterator[str]:
        try:
            # First, that the turn is stored: a client that loses the connection after this knows it is kept.
            stored: TurnStoredLine = {"type": "turn", "turn": turn_id, "conversation": conversation}
            yield json.dumps(stored, allow_nan=False) + "\n"
            while True:
                ev = await events.get()
                if ev is None:
                    break
                yield json.dumps(ev, default=str, allow_nan=False) + "\n"
            result = await asyncio.shield(task)
            done: ResultLine = {"type": "result", **result}
            yield json.dumps(done, default=str, allow_nan=False) + "\n"
        finally:
            svc.live.unsubscribe(turn_id, events)

    return StreamingResponse(lines(), media_type=NDJSON)
