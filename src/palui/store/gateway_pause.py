"""The emergency brake's pause of the gateway (spec §5.7, §8.6): a ``kv`` row every process sees.

``palui stop --all`` (and ``/stop all`` everywhere) pauses the gateway as it pauses the jobs: while the row is
there, every gateway call and every new gateway session is refused ("Palui is paused by the emergency brake"),
a call waiting for its approval ends with the approval cancelled, and a call in flight is cancelled within a
second (the call's stop guard reads the row). ``palui gateway resume`` ends the pause; chat turns start as usual
all along.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palui.results import GatewayPause
    from palui.store.db import Database

PAUSE_KEY = "gateway_paused"
#: What a paused gateway answers every call and every new session.
PAUSED = "Palui is paused by the emergency brake (palui gateway resume)"


def paused(db: Database) -> GatewayPause | None:
    """The pause while the brake holds the gateway, else None."""
    r = db.one("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,))
    if r is None:
        return None
    state: GatewayPause = json.loads(r[0])  # written by pause() below
    return state


def pause(db: Database, by: str, now: float) -> GatewayPause:
    """Pause the gateway (a pause already in place is kept). Returns the pause."""
    with db.write() as c:
        r = c.execute("SELECT value FROM kv WHERE key = ?", (PAUSE_KEY,)).fetchone()
        if r is not None:
            kept: GatewayPause = json.loads(r[0])
            return kept
        state: GatewayPause = {"since": now, "by": by}
        c.execute("INSERT INTO kv (key, value) VALUES (?, ?)", (PAUSE_KEY, json.dumps(state, allow_nan=False)))
    return state


def resume(db: Database) -> bool:
    """End the pause. True if the gateway was paused."""
    with db.write() as c:
        return c.execute("DELETE FROM kv WHERE key = ?", (PAUSE_KEY,)).rowcount == 1
