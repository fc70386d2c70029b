"""A tiny HTTP server on 127.0.0.1 for tests: fixed pages, and a slow page.

A test of something that must happen *while* the slow page is still loading (a stop, a budget) makes the
page slower than any wait of the test (``slow_seconds=600``) and checks :attr:`PageServer.answered`
(``/slow`` not in it: the turn ended before the page came), never a wall-clock upper bound."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class PageServer:
    """Serves ``pages`` (path -> HTML); ``/slow`` waits ``slow_seconds`` first (leaving the context ends
    the wait). ``hits``: the paths asked for; ``answered``: the paths answered, in order. Use as a context
    manager."""

    def __init__(self, pages: dict[str, str], slow_seconds: float = 30.0):
        self.pages = pages
        self.slow_seconds = slow_seconds
        self.hits: list[str] = []
        self.answered: list[str] = []
        self.closing = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.hits.append(self.path)
                if self.path.startswith("/slow"):
                    outer.closing.wait(outer.slow_seconds)
                body = outer.pages.get(self.path.split("?")[0], "<html><body>not found</body></html>")
                data = body.encode()
                self.send_response(200 if self.path in outer.pages or self.path.startswith("/slow") else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass
                outer.answered.append(self.path)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()
