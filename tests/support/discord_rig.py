"""The Discord channel for the conformance suite (:class:`support.channel_rig.ChannelRig`): the fake REST API
and gateway (tests/support/fake_discord.py) on 127.0.0.1, the person and a stranger in their DMs with the
bot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.channel_rig import Answer, ChannelRig, Shown, button
from support.fake_discord import Call, FakeDiscord, pings, visible
from support.live_service import wait_for

PERSON, STRANGER = "2000000000000000001", "2000000000000000002"


class DiscordConformanceRig(ChannelRig):
    kind, title = "discord", "Discord"
    exactly_once = True  # within a few minutes: the nonce
    users = {"person": PERSON, "stranger": STRANGER}
    stranger_id = STRANGER
    forward_source = "forwarded from someone (a message forwarded from another chat"

    def __init__(self, home: Path, request: Any = None, process: bool = False) -> None:
        super().__init__(home, process=process)
        self.fake = FakeDiscord().start()
        self.fake.user(PERSON, "alice")
        self.fake.user(STRANGER, "mallory")

    def close(self) -> None:
        super().close()
        self.fake.close()
        assert not self.fake.errors, f"the fake Discord raised: {self.fake.errors!r}"

    def add_channel(self) -> None:
        r = self.cli("channels", "add", "discord", "--api-base", self.fake.url,
                     env={"PALUI_DISCORD_TOKEN": self.fake.token})
        assert r.returncode == 0, r.stderr

    def start(self) -> ChannelRig:
        super().start()
        wait_for(lambda: self.fake.gateway_ops, 60, what="discord.py to identify on the gateway")
        return self

    def pair_with(self, code: str, who: str) -> dict[str, Any]:
        return self.say(f"/pair {code}", who)

    def say(self, text: str, who: str = "person") -> dict[str, Any]:
        return self.fake.say(self.users[who], text)

    def forward(self, text: str) -> dict[str, Any]:
        return self.fake.forward(PERSON, text)

    def edit(self, handle: dict[str, Any], text: str) -> dict[str, Any]:
        return self.fake.edit(handle, text)

    def _key(self, handle: dict[str, Any]) -> str:
        if handle.get("type") == 3:
            return f"press:{handle['id']}"
        if handle.get("edited_timestamp"):
            return f"edit:{handle['id']}:{handle['edited_timestamp']}"
        return f"msg:{handle['id']}"

    def processed(self, handle: dict[str, Any]) -> str:
        key = self._key(handle)
        rows = lambda: self.svc.rows("SELECT outcome FROM channel_updates WHERE channel = 'discord' AND key = ?",  # noqa: E731
                                     (key,))
        return wait_for(lambda: (rows() or [[None]])[0][0], 30, what=f"{key} recorded")

    def mark(self) -> int:
        return self.fake.mark()

    def seen(self, after: int, who: str = "person") -> list[Shown]:
        dm = self.fake.dm(self.users[who])
        return [Shown(visible(str(c.body.get("content") or "")), str(c.result["id"]), _buttons(c),
                      c.method == "PATCH", c)
                for c in self.fake.calls[after:] if c.ok and c.path.startswith(f"/channels/{dm}/messages")
                and c.method in ("POST", "PATCH")]

    def answer(self, shown: Shown, approve: Answer, who: str = "person") -> dict[str, Any]:
        return self.fake.press(self.users[who], shown.ref, shown.buttons[button(approve)])

    def forge(self, shown: Shown, approve: bool) -> dict[str, Any]:
        prefix, aid, _fp, yn = shown.buttons[0 if approve else 1].split(":")
        return self.fake.press(PERSON, shown.ref, f"{prefix}:{aid}:0123456789abcdef:{yn}")

    def replay(self, handle: dict[str, Any]) -> dict[str, Any]:
        return self.fake.press(handle["user"]["id"], handle["message"]["id"], handle["data"]["custom_id"])

    def told(self, handle: dict[str, Any]) -> str:
        path = f"/interactions/{handle['id']}/"
        call = self.fake.wait_for(lambda c: c.path.startswith(path), 30, after=handle["calls_mark"])
        assert call.ok and (call.body.get("data") or {}).get("flags") == 64, call  # ephemeral
        return visible(str(call.body["data"].get("content") or ""))

    def pings(self, shown: Shown) -> list[str]:
        return pings(shown.raw.body)

    def down(self) -> None:
        self.fake.stop()

    def up(self) -> None:
        self.fake.start()

    def revoke_token(self) -> None:
        self.fake.revoke()

    def renew_token(self) -> None:
        f = self.home / "new-token"
        f.write_text(self.fake.token + "\n")
        r = self.cli("channels", "add", "discord", "--api-base", self.fake.url, "--token-file", str(f))
        assert r.returncode == 0 and "still paired" in r.stdout, r.stdout + r.stderr


def _buttons(c: Call) -> list[str]:
    return [b["custom_id"] for row in c.body.get("components") or [] for b in row.get("components") or []]
