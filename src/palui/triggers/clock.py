"""The scheduler's clock: real time, or a test clock so cron tests do not wait minutes.

``PALUI_TEST_CLOCK`` (tests and demos only) replaces the clock the *scheduler* reads —
when a job is due, its next run, the time it was started. It is either a number (epoch
seconds, a fixed time) or the path of a file holding such a number; the file is read
again at every call, so a test moves time forward by rewriting it. Everything else
(caps counters, approval expiry, turn budgets) keeps the real clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from palui.errors import ConfigError

ENV = "PALUI_TEST_CLOCK"


def now(env: dict[str, str] | None = None) -> float:
    """The scheduler's current time in epoch seconds.

    Raises:
        ConfigError: ``PALUI_TEST_CLOCK`` is set but is neither a number nor a readable
            file holding one (fail closed: a test must not silently run on real time).
    """
    value = (os.environ if env is None else env).get(ENV, "").strip()
    if not value:
        return time.time()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        text = Path(value).read_text(encoding="utf-8").strip()
        return float(text)
    except (OSError, ValueError):
        raise ConfigError(f"environment variable {ENV}: expected epoch seconds or a file holding them, "
                          f"got {value!r}") from None
