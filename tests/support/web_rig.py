"""The web page's test rig (spec §8.1): a Chromium and a served home per module, the service in the test process.

The fixtures (made available to every test module by ``tests/conftest.py``):

- ``browser`` (a module): Debian's ``/usr/bin/chromium`` through Playwright (whose own browser download is not
  reachable here); a missing one skips the browser tests, except under CI (``CI`` set), where it fails. One
  per module, not per run: while Playwright's sync API is open, its event loop stays the running loop of the
  main thread, so every later ``asyncio.run`` (an in-process command, an async test) would fail; a launch
  costs about 1 s of CPU. A module works in a ``context`` of its own: cookies are per host, not per port, so
  two served homes on 127.0.0.1 must not share one.
- ``web_pages`` (the run): the pages the scripted turns fetch (``/offer``, ``/invoice``, and ``/slow``,
  which answers when the run ends).
- ``served`` (a module): ``palui serve`` of a fresh home, in this process (:class:`support.live_service.
  LiveService`: a start costs ~0.06 s of CPU where a ``palui serve`` child costs ~1.5 s), with a ``script:``
  model whose steps a test writes with ``served.script(...)`` and ``[web] allow_private`` (the pages are on
  127.0.0.1). A module that needs more sets ``served_setup``, a function called once with the service (to
  add connectors, say); in a module marked ``mcp_in_process`` the tests' MCP servers run in this process.
  A home per module keeps one module's approvals, jobs and switches out of another's counts; a test that
  needs a home of its own (other settings) makes one with :class:`ServedHome`.
- ``page``: a logged-in tab (the ``/login?token=…`` link ``palui serve`` prints) of the module's context.
- ``client``: the pages without a browser or a socket: Starlette's ``TestClient`` over the app of the test's
  ``svc`` (access token ``tok``), holding a logged-in session's cookie.

:func:`send` types a message into a new conversation and returns the turn's element.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.httpserver import PageServer
from support.live_service import LiveService
from support.scripts import text, write_script

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IBAN = "DE89370400440532013000"
PAGES = {"/offer": f"<html><head><title>Offer</title></head><body><p>Pay to IBAN {IBAN} today.</p></body></html>",
         "/invoice": f"<html><body><p>Pay to IBAN {IBAN} by Friday.</p></body></html>"}


def chromium_path() -> str:
    """``/usr/bin/chromium``; skips the test (fails under CI) when it is not installed."""
    if not CHROMIUM.exists():
        message = "Debian's chromium is not installed (/usr/bin/chromium): apt-get install -y chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(CHROMIUM)


class ServedHome(LiveService):
    """A served home whose model is ``script:`` (``script(*steps)`` rewrites the steps; each turn reads them when
    it runs). ``toml``: more lines for palui.toml. In this process unless ``process=True``."""

    def __init__(self, home: Path, toml: str = "", **kw: Any) -> None:
        self.script_file = home / "script.json"
        write_script(self.script_file, text("(no script yet)"))
        (home / "palui.toml").write_text(f'model = "script:{self.script_file}"\n\n[web]\nallow_private = true\n'
                                         f"{toml}")
        super().__init__(home, **kw)

    def script(self, *steps: dict) -> None:
        write_script(self.script_file, *steps)


@pytest.fixture
def client(svc: Any) -> Iterator[Any]:
    from starlette.testclient import TestClient

    from palui.server.app import create_app, session_value

    with TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765", follow_redirects=False,
                    cookies={"palui_session": session_value("tok")}) as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    pytest.importorskip("playwright", reason="the playwright package is in the test extra")
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def web_pages() -> Iterator[PageServer]:
    with PageServer(PAGES) as srv:
        yield srv


@pytest.fixture(scope="module")
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedHome]:
    from palui.cli.common import Hooks
    from support import inprocess, mcp_inprocess

    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    with pytest.MonkeyPatch.context() as mp:
        if request.node.get_closest_marker("mcp_in_process"):
            mp.setattr(inprocess, "HOOKS", Hooks(mcp_transport=mcp_inprocess.transport))
        srv = ServedHome(tmp_path_factory.mktemp(f"served-{name}")).start()
        try:
            setup = getattr(request.module, "served_setup", None)
            if setup is not None:
                setup(srv)
            yield srv
        finally:
            srv.stop()


@pytest.fixture(scope="module")
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context()
    yield ctx
    ctx.close()


def login(context: Any, served: LiveService, viewport: dict[str, int] | None = None) -> Any:
    """A new tab of ``context`` (``viewport``: its size in CSS pixels), logged in to ``served``."""
    from playwright.sync_api import expect

    pg = context.new_page()
    if viewport is not None:
        pg.set_viewport_size(viewport)
    pg.goto(f"{served.url}/login?token={served.token}")
    expect(pg).to_have_url(re.compile(r"/chat$"))
    return pg


@pytest.fixture
def page(context: Any, served: ServedHome) -> Iterator[Any]:
    pg = login(context, served)
    yield pg
    pg.close()


def send(page: Any, served: LiveService, message: str, *, response: bool = False) -> Any:
    """Type ``message`` in a new conversation and send it; returns the turn's element (with ``response``:
    ``(the NDJSON response, the turn's element)``)."""
    from playwright.sync_api import expect

    page.goto(served.url + "/new")
    expect(page).to_have_url(re.compile(r"/chat$"))
    page.fill("#composer textarea", message)
    with page.expect_response(lambda r: r.url.endswith("/api/turns") and r.request.method == "POST") as resp:
        page.click("#composer button[type=submit]")
    turn = page.locator("article.turn").last
    return (resp.value, turn) if response else turn
