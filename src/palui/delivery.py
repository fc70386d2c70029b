"""Delivering a text to apprise targets: the person's extra channel targets and contacts (spec §1, §7).

The person's channel is the Palui inbox (SQLite), the paired chat channels and the apprise
URLs in ``notify.apprise`` (:mod:`palui.service.notifier` writes the inbox first). Deliveries
here are best effort: failures are logged and returned, never raised.

apprise is blocking, so :func:`deliver` runs in the caller's thread (use it from a
thread or through :func:`deliver_async`), and :func:`deliver_in_background` starts a
non-daemon thread (a CLI process waits for it before exiting). Apprise URLs hold
secrets (tokens, passwords): logs and returned failure texts name a target only by
its position and scheme, never by its URL.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings

log = logging.getLogger("palui.channel")

#: Upper bound in seconds for one apprise delivery (every target of one call).
DELIVERY_TIMEOUT_SECONDS = 30
TITLE = "Palui"

_pending: set[threading.Thread] = set()
_pending_lock = threading.Lock()
_import_lock = threading.Lock()


def target_label(url: str, position: int) -> str:
    """A secret-free name for a target: ``target 2 (tgram)``."""
    scheme = url.split("://", 1)[0] if "://" in url else "?"
    return f"target {position} ({scheme[:20]})"


def _apprise():
    # Imported late: it takes a noticeable time and most commands never deliver. Its plugins
    # (loaded on first use, so loaded here) raise a DeprecationWarning (imghdr) not ours to fix.
    with _import_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import apprise
        from apprise.manager_plugins import NotificationManager

        NotificationManager().load_modules()
    return apprise


def unknown_targets(urls: list[str]) -> list[int]:
    """Positions (1-based) of the URLs apprise cannot use (an unknown service, a malformed URL).

    The full check of ``palui serve`` (docs/decisions/0122-messages-reworded.md): every start checks the syntax only
    (:func:`palui.config.apprise_syntax_ok`), since importing apprise costs start-up time.
    """
    bad = []
    for position, url in enumerate(urls, 1):
        try:
            if not _apprise().Apprise().add(url):
                bad.append(position)
        except Exception:  # the exception text may quote the URL
            bad.append(position)
    return bad


def deliver(urls: list[str], text: str, *, title: str = TITLE) -> list[str]:
    """Send ``text`` to each apprise URL, one after the other (blocking).

    Returns one secret-free failure description per target that did not accept it
    (empty list: all delivered). Never raises.
    """
    failures: list[str] = []
    for position, url in enumerate(urls, 1):
        label = target_label(url, position)
        try:
            targets = _apprise().Apprise()
            if not targets.add(url):
                failures.append(f"{label}: not a valid apprise URL")
                continue
            if not targets.notify(body=text, title=title, timeout=DELIVERY_TIMEOUT_SECONDS):
                failures.append(f"{label}: not delivered")
        except Exception as e:  # the exception text may quote the URL: keep only its type
            failures.append(f"{label}: {type(e).__name__}")
    for failure in failures:
        log.warning("channel delivery failed: %s", failure)
    return failures


async def deliver_async(urls: list[str], text: str, *, title: str = TITLE) -> list[str]:
    """:func:`deliver` in a worker thread, so the event loop keeps running."""
    if not urls:
        return []
    import asyncio

    return await asyncio.to_thread(deliver, urls, text, title=title)


def deliver_in_background(urls: list[str], text: str, *, title: str = TITLE) -> threading.Thread | None:
    """Start :func:`deliver` in a new thread and return it (None when there are no URLs).

    apprise (and the thread pool it uses) is imported here, in the calling thread: a short-lived
    CLI process whose main thread ends first could not import it in the delivery thread any more
    ("can't register atexit after shutdown") and the delivery would be lost.
    """
    if not urls:
        return None
    _apprise()
    import concurrent.futures.thread  # noqa: F401  (registers its atexit hook while that is still allowed)

    def run() -> None:
        try:
            deliver(urls, text, title=title)
        finally:
            with _pending_lock:
                _pending.discard(threading.current_thread())

    thread = threading.Thread(target=run, name="palui-channel", daemon=False)
    with _pending_lock:
        _pending.add(thread)
    thread.start()
    return thread


def wait_for_deliveries(timeout: float = DELIVERY_TIMEOUT_SECONDS) -> bool:
    """Wait up to ``timeout`` seconds for background deliveries; True when none is left."""
    deadline = time.monotonic() + timeout
    while True:
        with _pending_lock:
            threads = list(_pending)
        if not threads:
            return True
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if time.monotonic() >= deadline:
            with _pending_lock:
                return not _pending


def title_for(kind: str) -> str:
    """The apprise title of an inbox message of ``kind`` ("Palui: approval")."""
    return f"{TITLE}: {kind}" if kind and kind != "message" else TITLE
