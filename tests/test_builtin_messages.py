"""messages__send_message and the person's channel (spec §1, §7): inbox, apprise targets, contacts.

apprise delivers to ``json://`` targets that point at a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from palui import delivery as channel
from palui.connectors.base import CallContext
from palui.connectors.builtin.messages import MessagesConnector
from palui.types import Origin


class Receiver:
    """Records the JSON bodies POSTed to it (apprise's json:// plugin)."""

    def __init__(self, status: int = 200) -> None:
        self.posts: list[tuple[str, dict]] = []
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.posts.append((self.path, json.loads(body)))
                receiver.got.set()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def target(self, path: str = "/hook") -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def closed_port_target() -> str:
    r = Receiver()
    url = r.target("/gone?token=SECRET123")
    r.close()
    return url


def ctx(svc, **settings) -> CallContext:
    from palui.service.notifier import Notifier

    changed = svc.settings.with_values({k.replace("__", "."): v for k, v in settings.items()})
    return CallContext(turn_id="t1", conversation_id="c1", origin=Origin.CHAT, tainted=False, taint_source=None,
                       step=2, db=svc.db, settings=changed, notifier=Notifier(svc.db, changed))


async def send(svc, args, **settings):
    return await MessagesConnector().call_tool("send_message", args, ctx(svc, **settings))


async def test_without_to_goes_to_the_inbox(svc):
    r = await send(svc, {"text": "Your parcel arrives at 3pm"})
    assert not r.is_error and r.untrusted is False and "inbox" in r.text
    row = svc.db.one("SELECT * FROM inbox")
    assert (row["kind"], row["text"], row["turn_id"], row["conversation_id"]) == \
        ("message", "Your parcel arrives at 3pm", "t1", "c1")
    assert svc.notifier.inbox()[-1]["text"] == "Your parcel arrives at 3pm"


@pytest.mark.slow
async def test_without_to_also_reaches_the_persons_apprise_targets(svc, receiver):
    r = await send(svc, {"text": "hello over apprise"}, notify__apprise=[receiver.target()])
    assert not r.is_error and "Delivered to 1 of 1" in r.text
    path, body = receiver.posts[0]
    assert path == "/hook" and body["message"] == "hello over apprise"
    assert len(svc.notifier.inbox()) == 1


@pytest.mark.slow
async def test_failed_channel_target_keeps_the_inbox_message_and_hides_the_url(svc, receiver):
    bad = closed_port_target()
    r = await send(svc, {"text": "still in the inbox"}, notify__apprise=[bad, receiver.target()])
    assert not r.is_error and "Delivered to 1 of 2" in r.text and "target 1 (json)" in r.text
    assert "SECRET123" not in r.text and "127.0.0.1" not in r.text
    assert [m["text"] for m in svc.notifier.inbox()] == ["still in the inbox"]
    assert receiver.posts[0][1]["message"] == "still in the inbox"


@pytest.mark.slow
async def test_to_a_contact_sends_with_apprise(svc, receiver):
    contacts = {"alice": receiver.target("/alice"), "bob": closed_port_target()}
    r = await send(svc, {"text": "Dinner at 8?", "to": "alice"}, messages__contacts=contacts)
    assert not r.is_error and r.text == "Sent to alice."
    assert receiver.posts == [("/alice", receiver.posts[0][1])] and receiver.posts[0][1]["message"] == "Dinner at 8?"
    assert svc.notifier.inbox() == []

    r = await send(svc, {"text": "case differs", "to": "Alice"}, messages__contacts=contacts)
    assert not r.is_error and r.text == "Sent to alice."

    r = await send(svc, {"text": "Hi", "to": "bob"}, messages__contacts=contacts)
    assert r.is_error and "could not deliver to bob" in r.text and "SECRET123" not in r.text


@pytest.mark.slow
async def test_unknown_contact_is_an_error(svc, receiver):
    r = await send(svc, {"text": "x", "to": "mallory"}, messages__contacts={"alice": receiver.target()})
    assert r.is_error and "unknown contact 'mallory'" in r.text and "alice" in r.text
    assert receiver.target() not in r.text
    r = await send(svc, {"text": "x", "to": "mallory"})
    assert r.is_error and "none are configured" in r.text
    assert receiver.posts == [] and svc.notifier.inbox() == []


@pytest.mark.slow
async def test_ambiguous_case_insensitive_contact_is_not_guessed(svc, receiver):
    contacts = {"Sam": receiver.target("/1"), "sam": receiver.target("/2")}
    r = await send(svc, {"text": "x", "to": "SAM"}, messages__contacts=contacts)
    assert r.is_error and receiver.posts == []


@pytest.mark.parametrize("args", [{}, {"text": ""}, {"text": "  "}, {"text": 3}, {"text": "x", "to": 5}])
async def test_bad_arguments(svc, args):
    r = await send(svc, args)
    assert r.is_error and svc.notifier.inbox() == []


@pytest.mark.slow
def test_contacts_from_palui_toml(home, receiver):
    (home / "palui.toml").write_text(f'[messages.contacts]\nalice = "{receiver.target()}"\n')
    from palui.service import Service

    s = Service()
    try:
        assert s.settings.messages.contacts == {"alice": receiver.target()}
    finally:
        s.db.close()


@pytest.mark.slow
def test_notify_writes_the_inbox_then_delivers_to_apprise(home, receiver):
    (home / "palui.toml").write_text(f'[notify]\napprise = ["{receiver.target("/me")}"]\n')
    from palui.service import Service

    s = Service()
    try:
        s.notifier("approval", "Approve payment? /approve a1")
        assert s.notifier.inbox()[-1]["text"] == "Approve payment? /approve a1"
        assert channel.wait_for_deliveries(10)
        path, body = receiver.posts[0]
        assert path == "/me" and body["message"] == "Approve payment? /approve a1"
        assert body["title"] == "Palui: approval"
    finally:
        s.db.close()


@pytest.mark.slow
def test_notify_never_raises_on_a_failed_delivery(home, caplog):
    (home / "palui.toml").write_text(f'[notify]\napprise = ["{closed_port_target()}", "notascheme://x"]\n')
    from palui.service import Service

    s = Service()
    try:
        s.notifier("notice", "kept anyway")
        assert channel.wait_for_deliveries(10)
        assert s.notifier.inbox()[-1]["text"] == "kept anyway"
    finally:
        s.db.close()
    failures = [r.getMessage() for r in caplog.records if r.name == "palui.channel"]
    assert any("target 1 (json)" in m for m in failures) and any("target 2 (notascheme)" in m for m in failures)
    assert not any("SECRET123" in m for m in failures)


@pytest.mark.slow
def test_deliver_reports_each_target():
    assert channel.deliver([], "nothing") == []
    assert channel.deliver(["not a url"], "x") == ["target 1 (?): not a valid apprise URL"]


def test_contacts_from_the_environment_and_bad_values(home, monkeypatch):
    from palui.config import load_settings
    from palui.errors import ConfigError

    monkeypatch.setenv("PALUI_MESSAGES__CONTACTS", '{"bob": "json://127.0.0.1:9/x"}')
    assert load_settings().messages.contacts == {"bob": "json://127.0.0.1:9/x"}
    monkeypatch.setenv("PALUI_MESSAGES__CONTACTS", "tgram://SECRETTOKEN/1")
    with pytest.raises(ConfigError) as e:
        load_settings()
    assert "messages.contacts" in str(e.value) and "SECRETTOKEN" not in str(e.value)
    monkeypatch.delenv("PALUI_MESSAGES__CONTACTS")
    (home / "palui.toml").write_text('[messages.contacts]\nbob = 3\neve = "pover://SECRETTOKEN@x"\n')
    with pytest.raises(ConfigError) as e:
        load_settings()
    assert "messages.contacts" in str(e.value) and "SECRETTOKEN" not in str(e.value)
