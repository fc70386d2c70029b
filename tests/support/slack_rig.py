"""The Slack channel for the conformance suite (:class:`support.channel_rig.ChannelRig`): the fake Web API and
Socket Mode (tests/support/fake_slack.py) on 127.0.0.1, the person ``U0ALICE`` and the stranger ``U0MALLORY``
in their DMs with the app. Commands go as the app's slash command (``/palui stop``), as a person types them
(Slack takes a message starting with ``/`` as a slash command)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.channel_rig import Answer, ChannelRig, Shown, button
from support.fake_slack import Call, FakeSlack, pings, visible
from support.live_service import wait_for

PERSON, STRANGER = "U0ALICE", "U0MALLORY"


class SlackConformanceRig(ChannelRig):
    kind, title = "slack", "Slack"
    users = {"person": PERSON, "stranger": STRANGER}
    stranger_id = STRANGER

    def __init__(self, home: Path, request: Any = None, process: bool = False) -> None:
        super().__init__(home, process=process)
        self.fake = FakeSlack().start()
        self.fake.user(PERSON, "alice")
        self.fake.user(STRANGER, "mallory")
        self._stand_ins: dict[str, dict[str, Any]] = {}

    def close(self) -> None:
        super().close()
        self.fake.close()
        assert not self.fake.errors, f"the fake Slack raised: {self.fake.errors!r}"

    def add_channel(self) -> None:
        r = self.cli("channels", "add", "slack", "--api-base", self.fake.url,
                     env={"PALUI_SLACK_BOT_TOKEN": self.fake.bot_token, "PALUI_SLACK_APP_TOKEN": self.fake.app_token})
        assert r.returncode == 0, r.stderr

    def pair_with(self, code: str, who: str) -> dict[str, Any]:
        return self.say(f"/pair {code}", who)

    def say(self, text: str, who: str = "person") -> dict[str, Any]:
        if text.startswith("/"):
            return self.fake.slash(self.users[who], text[1:])
        return self.fake.message(self.users[who], text)

    def forward(self, text: str) -> dict[str, Any]:
        return self.fake.share(PERSON, text, STRANGER)

    def edit(self, handle: dict[str, Any], text: str) -> dict[str, Any]:
        if handle["type"] == "slash_commands":  # a command is no message: edit a message of the person's
            if handle["envelope_id"] not in self._stand_ins:
                self._stand_ins[handle["envelope_id"]] = self.fake.message(PERSON, "a message to edit")
                self.processed(self._stand_ins[handle["envelope_id"]])
            handle = self._stand_ins[handle["envelope_id"]]
        return self.fake.edit(handle, text)

    def _key(self, handle: dict[str, Any]) -> str:
        p = handle["payload"]
        if handle["type"] == "slash_commands":
            return f"cmd:{p['trigger_id']}"
        if handle["type"] == "interactive":
            return f"press:{p['actions'][0]['action_ts']}:{p['user']['id']}"
        return f"msg:{p['event']['channel']}:{p['event']['ts']}"

    def processed(self, handle: dict[str, Any]) -> str:
        key = self._key(handle)
        rows = lambda: self.svc.rows("SELECT outcome FROM channel_updates WHERE channel = 'slack' AND key = ?",  # noqa: E731
                                     (key,))
        return wait_for(lambda: (rows() or [[None]])[0][0], 30, what=f"{key} recorded")

    def mark(self) -> int:
        return self.fake.mark()

    def seen(self, after: int, who: str = "person") -> list[Shown]:
        dm = self.fake.dm(self.users[who])
        return [Shown(visible(c.params), str(c.params.get("ts") or c.result.get("ts")), _buttons(c),
                      c.method == "chat.update", c)
                for c in self.fake.calls[after:] if c.ok and c.method in ("chat.postMessage", "chat.update")
                and c.params.get("channel") == dm]

    def answer(self, shown: Shown, approve: Answer, who: str = "person") -> dict[str, Any]:
        return self.fake.press(self.users[who], self.fake.dm(PERSON), shown.ref, shown.buttons[button(approve)])

    def forge(self, shown: Shown, approve: bool) -> dict[str, Any]:
        prefix, aid, _fp, yn = shown.buttons[0 if approve else 1].split(":")
        return self.fake.press(PERSON, self.fake.dm(PERSON), shown.ref, f"{prefix}:{aid}:0123456789abcdef:{yn}")

    def replay(self, handle: dict[str, Any]) -> dict[str, Any]:
        p = handle["payload"]
        return self.fake.press(p["user"]["id"], p["container"]["channel_id"], p["container"]["message_ts"],
                               p["actions"][0]["value"])

    def told(self, handle: dict[str, Any]) -> str:
        user = handle["payload"]["user"]["id"]
        call = self.fake.wait_for(lambda c: c.method == "chat.postEphemeral" and c.ok and c.params.get("user") == user,
                                  30, after=handle["calls_mark"])
        return visible(call.params)

    def pings(self, shown: Shown) -> list[str]:
        return pings(shown.raw.params)

    def down(self) -> None:
        self.fake.stop()

    def up(self) -> None:
        self.fake.start()

    def revoke_token(self) -> None:
        self.fake.revoke()

    def renew_token(self) -> None:
        bot, app = self.home / "bot-token", self.home / "app-token"
        bot.write_text(self.fake.bot_token + "\n")
        app.write_text(self.fake.app_token + "\n")
        r = self.cli("channels", "add", "slack", "--api-base", self.fake.url, "--token-file", str(bot),
                     "--app-token-file", str(app))
        assert r.returncode == 0 and "still paired" in r.stdout, r.stdout + r.stderr


def _buttons(c: Call) -> list[str]:
    return [e["value"] for b in c.params.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]]
