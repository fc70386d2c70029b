"""How long a test waits for an event before it calls it a hang.

Every wait helper of the suite (``live_service.wait_for``, the chat drivers, the Matrix and Telegram rigs)
returns as soon as what it waits for happens; its timeout only turns a hang into a failure. On a loaded
machine (a load of 12 on 2 cores) a step that takes a second idle can take tens, so a timeout a test passes
is raised to at least :data:`GUARD` seconds: a wait never fails a test for being slow, and how fast
something is gets measured in ``bench/``, never asserted.
"""

from __future__ import annotations

GUARD = 120.0  # seconds


def guard(timeout: float) -> float:
    """``timeout`` (seconds) raised to at least :data:`GUARD`."""
    return max(float(timeout), GUARD)
