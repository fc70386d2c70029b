"""The Telegram tests' rig: ``palui serve`` with a Telegram channel pointed at the fake Bot API.

The service runs in the test process (:class:`LiveService`; ``process=True`` for a child, where a test
kills it with SIGKILL); the fake runs in the test process on 127.0.0.1; the channel is added through the
real CLI (token from ``PALUI_TELEGRAM_TOKEN``). The model is ``script:`` from a file the test rewrites
between turns (each turn reads it when it runs).

The fixtures (every test module has them through ``tests/conftest.py``): ``fake``, the fake Bot API (a test
fails when the fake itself raised), and ``telegram_rig(toml="", pair=False, process=False)``, which adds
the channel, starts the service (and pairs the person) and, at the end, stops it and checks that the bot
token is in none of its logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.channel_rig import Answer, ChannelRig, Shown, button
from support.fake_telegram import Call, FakeTelegram, QueuedUpdate, button_data, make_token
from support.live_service import LiveService, wait_for
from support.served_channel import ServedChannel

PERSON = 111
STRANGER = 222


def visible(call: Call) -> str:
    """The text a sendMessage/editMessageText shows (HTML entities unescaped, tags dropped)."""
    from support.fake_telegram import visible_text

    return visible_text(call.params.get("text", ""), call.params.get("parse_mode"))


class TelegramRig(ServedChannel):
    """:class:`ServedChannel` with a Telegram channel on ``fake``, the person (@alice) and a stranger
    (@mallory)."""

    kind = "telegram"

    def __init__(self, home: Path, fake: FakeTelegram, toml: str = "", *, process: bool = False) -> None:
        super().__init__(home, toml, process=process)
        self.fake = fake
        fake.user(PERSON, first_name="Alice", username="alice")
        fake.user(STRANGER, first_name="Mallory", username="mallory")

    def add_channel(self) -> None:
        r = self.cli("channels", "add", "telegram", "--api-base", self.fake.url,
                     env={"PALUI_TELEGRAM_TOKEN": self.fake.token})
        assert r.returncode == 0, r.stderr
        assert self.fake.token not in r.stdout + r.stderr

    def pair(self) -> None:
        r = self.cli("channels", "pair", "telegram")
        assert r.returncode == 0, r.stderr
        code = r.stdout.split("pairing code: ")[1].split()[0]
        up = self.fake.push_message(PERSON, PERSON, f"/pair {code}")
        self.fake.wait_for(lambda c: c.method == "sendMessage" and "paired with" in visible(c), 10, after=up)

    def say(self, text: str | None, user: int = PERSON, chat: int | None = None, **extra: Any) -> QueuedUpdate:
        return self.fake.push_message(user, PERSON if chat is None else chat, text, **extra)

    def processed(self, up: QueuedUpdate, timeout: float = 10) -> str:
        """Wait until the service recorded the update; returns its outcome."""
        def outcome():
            rows = self.svc.rows("SELECT outcome FROM channel_updates WHERE channel = 'telegram' AND key = ?",
                                 (str(up.update_id),))
            return rows[0][0] if rows else None
        return wait_for(outcome, timeout, what=f"update {up.update_id} to be recorded")

    def reply_after(self, up: QueuedUpdate | int, pred=None, timeout: float = 15) -> Call:
        return self.fake.wait_for(lambda c: c.method == "sendMessage" and c.ok and (pred is None or pred(c)),
                                  timeout, after=up)


def approval_row(svc: LiveService, aid: str) -> dict[str, Any]:
    """An approval as stored (status, answered_via, deny_reason…)."""
    import sqlite3

    con = sqlite3.connect(svc.home / "palui.db", timeout=30, isolation_level=None)
    con.row_factory = sqlite3.Row
    try:
        r = con.execute("SELECT * FROM approvals WHERE id = ?", (aid,)).fetchone()
        return dict(r) if r else {}
    finally:
        con.close()


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with FakeTelegram(max_poll_timeout=2) as f:
        yield f
    assert not f.errors, f"the fake Bot API raised: {f.errors!r}"


@pytest.fixture
def telegram_rig(home: Path, fake: FakeTelegram) -> Iterator[Callable[..., TelegramRig]]:
    made: list[TelegramRig] = []

    def make(toml: str = "", *, pair: bool = False, process: bool = False) -> TelegramRig:
        rig = TelegramRig(home, fake, toml, process=process)
        made.append(rig)
        rig.add_channel()
        rig.start()
        if pair:
            rig.pair()
        return rig

    yield make
    for rig in made:
        rig.close(fake.token)


class TelegramConformanceRig(ChannelRig):
    """The Telegram channel for the conformance suite (:class:`support.channel_rig.ChannelRig`): the fake Bot
    API (started here, stopped by :meth:`close`), the person 111 and the stranger 222 in private chats."""

    kind, title = "telegram", "Telegram"
    users = {"person": PERSON, "stranger": STRANGER}
    stranger_id = str(STRANGER)

    def __init__(self, home: Path, request: Any = None, process: bool = False) -> None:
        super().__init__(home, process=process)
        self.fake = FakeTelegram(max_poll_timeout=2).start()
        self.fake.user(PERSON, first_name="Alice", username="alice")
        self.fake.user(STRANGER, first_name="Mallory", username="mallory")

    def close(self) -> None:
        super().close()
        self.fake.stop()
        assert not self.fake.errors, f"the fake Bot API raised: {self.fake.errors!r}"

    def add_channel(self) -> None:
        r = self.cli("channels", "add", "telegram", "--api-base", self.fake.url,
                     env={"PALUI_TELEGRAM_TOKEN": self.fake.token})
        assert r.returncode == 0, r.stderr

    def pair_with(self, code: str, who: str) -> QueuedUpdate:
        return self.say(f"/pair {code}", who)

    def say(self, text: str, who: str = "person") -> QueuedUpdate:
        u = self.users[who]
        return self.fake.push_message(u, u, text)

    def forward(self, text: str) -> QueuedUpdate:
        origin = {"type": "user", "sender_user": self.fake.user(STRANGER), "date": 1}
        return self.fake.push_message(PERSON, PERSON, text, forward_origin=origin)

    def edit(self, handle: QueuedUpdate, text: str) -> QueuedUpdate:
        msg = handle.payload["message"]
        return self.fake.push_update({"edited_message": {**msg, "text": text, "edit_date": msg["date"] + 1}})

    def processed(self, handle: QueuedUpdate) -> str:
        rows = lambda: self.svc.rows("SELECT outcome FROM channel_updates WHERE channel = 'telegram' AND key = ?",  # noqa: E731
                                     (str(handle.update_id),))
        return wait_for(lambda: (rows() or [[None]])[0][0], 30, what=f"update {handle.update_id} recorded")

    def mark(self) -> int:
        return self.fake.mark()

    def seen(self, after: int, who: str = "person") -> list[Shown]:
        return [Shown(visible(c), str(c.params["message_id"] if c.method == "editMessageText"
                                      else c.result["message_id"]), button_data(c),
                      c.method == "editMessageText", c)
                for c in self.fake.calls[after:] if c.ok and c.method in ("sendMessage", "editMessageText")
                and c.params.get("chat_id") == self.users[who]]

    def answer(self, shown: Shown, approve: Answer, who: str = "person") -> QueuedUpdate:
        return self.fake.push_callback(self.users[who], int(shown.ref), shown.buttons[button(approve)],
                                       chat_id=PERSON)

    def forge(self, shown: Shown, approve: bool) -> QueuedUpdate:
        prefix, aid, _fp, yn = shown.buttons[0 if approve else 1].split(":")
        return self.fake.push_callback(PERSON, int(shown.ref), f"{prefix}:{aid}:0123456789abcdef:{yn}")

    def replay(self, handle: QueuedUpdate) -> QueuedUpdate:
        q = handle.payload["callback_query"]
        return self.fake.push_callback(q["from"]["id"], q["message"]["message_id"], q["data"], chat_id=PERSON)

    def told(self, handle: QueuedUpdate) -> str:
        qid = handle.payload["callback_query"]["id"]
        call = self.fake.wait_for(lambda c: c.method == "answerCallbackQuery"
                                  and str(c.params.get("callback_query_id")) == qid, 30, after=handle)
        return str(call.params.get("text") or "")

    def pings(self, shown: Shown) -> list[str]:
        raw = str(shown.raw.params.get("text", ""))
        return ["a user link"] if "tg://user" in raw or "<a " in raw else []

    def down(self) -> None:
        self.fake.stop()

    def up(self) -> None:
        self.fake.start()

    def revoke_token(self) -> None:
        self.fake.token = make_token(self.fake.bot_id)  # @BotFather revoked it; the new one is not Palui's yet
        self.fresh_token = self.fake.token

    def renew_token(self) -> None:
        f = self.home / "new-token"
        f.write_text(self.fresh_token + "\n")
        r = self.cli("channels", "add", "telegram", "--api-base", self.fake.url, "--token-file", str(f))
        assert r.returncode == 0 and "still paired" in r.stdout, r.stdout + r.stderr
