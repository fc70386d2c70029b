"""The Matrix tests' rig: a real Synapse (one for the run), the person and others as nio clients in the
test, and ``palui serve`` (in the test process; ``process=True`` for a child, where a test kills it) whose
Matrix channel was added through the CLI.

The fixtures (every test module has them through ``tests/conftest.py``): ``synapse``, the homeserver;
``people``, an async factory of registered, synced :class:`Peer` s (closed at the end); ``matrix_rig(toml="",
process=False)``, which adds the channel and starts the service, and at the end stops it and checks that
neither its access token nor its password is in its logs.

Synapse runs from its own venv (tests/support/install_synapse.sh, which ``.ci/run`` calls). Not
installed: the Matrix tests are skipped with the reason — except under CI (``CI`` set), where
they fail, so a CI that forgot to install it cannot pass by skipping.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nio import AsyncClient, AsyncClientConfig, RoomCreateError, RoomPreset, RoomSendResponse, SyncResponse

from support.channel_rig import Answer, ChannelRig, Shown, button
from support.live_service import wait_for
from support.served_channel import ServedChannel
from support.synapse_fixture import MatrixUser, SynapseError, SynapseServer, synapse_python
from support.waiting import guard

_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory):
    if not synapse_python().exists():
        message = (f"Synapse is not installed at {synapse_python()}: run bash tests/support/install_synapse.sh "
                   "(or set SYNAPSE_PYTHON)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    hs = SynapseServer.create(tmp_path_factory.mktemp("synapse"))
    try:
        hs.start()
    except SynapseError as e:
        pytest.fail(str(e))
    yield hs
    hs.stop()


def register(hs: SynapseServer, name: str) -> MatrixUser:
    local = f"{name}-{next(_numbers)}-{os.getpid()}"
    return hs.register(local, f"pw-{local}", displayname=name)


class Peer:
    """A human's Matrix client, synced on demand (no background task: the test may block)."""

    def __init__(self, hs: SynapseServer, user: MatrixUser) -> None:
        self.user = user
        self.client = AsyncClient(hs.url, user.user_id,
                                  config=AsyncClientConfig(encryption_enabled=False, store_sync_tokens=False,
                                                           max_timeouts=3))
        self.client.restore_login(user.user_id, user.device_id, user.access_token)
        self.events: list[tuple[str, Any]] = []
        self.since: str | None = None

    async def start(self) -> Peer:
        first = await self.client.sync(timeout=0)
        assert isinstance(first, SyncResponse), first
        self.since = first.next_batch
        return self

    async def sync(self, timeout_ms: int = 500) -> None:
        resp = await self.client.sync(timeout=timeout_ms, since=self.since)
        if isinstance(resp, SyncResponse):
            self.since = resp.next_batch
            for room_id, info in resp.rooms.join.items():
                self.events += [(room_id, e) for e in info.timeline.events]

    async def wait_for(self, pred: Callable[[str, Any], bool], timeout: float = 20.0, start: int = 0) -> Any:
        import time

        timeout = guard(timeout)  # a guard against a hang (support/waiting.py)
        end = time.monotonic() + timeout
        seen = start
        while True:
            for room, e in self.events[seen:]:
                if pred(room, e):
                    return e
            seen = len(self.events)
            if time.monotonic() > end:
                raise AssertionError(f"no matching event within {timeout} s; saw: "
                                     f"{[getattr(e, 'body', type(e).__name__) for _, e in self.events[start:]]}")
            await self.sync(1000)

    def mark(self) -> int:
        return len(self.events)

    async def palui_said(self, room: str, pred: Callable[[str], bool], palui: str, timeout: float = 20.0,
                         start: int = 0) -> Any:
        return await self.wait_for(lambda r, e: r == room and getattr(e, "sender", "") == palui
                                   and pred(getattr(e, "body", "") or ""), timeout, start)

    async def send(self, room: str, body: str, **extra: Any) -> str:
        resp = await self.client.room_send(room, "m.room.message", {"msgtype": "m.text", "body": body, **extra})
        assert isinstance(resp, RoomSendResponse), resp
        return str(resp.event_id)

    async def reply(self, room: str, event_id: str, quoted_sender: str, quoted: str, body: str) -> str:
        """A reply with the (deprecated, still sent by clients) quote fallback in the body."""
        fallback = f"> <{quoted_sender}> {quoted}\n\n{body}"
        return await self.send(room, fallback, **{"m.relates_to": {"m.in_reply_to": {"event_id": event_id}}})

    async def react(self, room: str, event_id: str, key: str) -> str:
        resp = await self.client.room_send(room, "m.reaction", {
            "m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}})
        assert isinstance(resp, RoomSendResponse), resp
        return str(resp.event_id)

    async def room(self, *invite: str, encrypted: bool = False) -> str:
        state = [{"type": "m.room.encryption", "state_key": "",
                  "content": {"algorithm": "m.megolm.v1.aes-sha2"}}] if encrypted else []
        resp = await self.client.room_create(is_direct=len(invite) == 1, preset=RoomPreset.trusted_private_chat,
                                             invite=list(invite), initial_state=state)
        assert not isinstance(resp, RoomCreateError), resp
        return str(resp.room_id)

    async def join(self, room: str) -> None:
        await self.client.join(room)

    async def close(self) -> None:
        await self.client.close()


class MatrixRig(ServedChannel):
    """:class:`ServedChannel` with a Matrix channel for ``palui`` (an account registered on ``hs``)."""

    kind = "matrix"

    def __init__(self, home: Path, hs: SynapseServer, toml: str = "", *, homeserver: str | None = None,
                 process: bool = False) -> None:
        super().__init__(home, toml, process=process)
        self.hs = hs
        self.homeserver = homeserver or hs.url  # another URL: a fault proxy in front of the homeserver
        self.palui = register(hs, "palui")

    def add_channel(self) -> None:
        r = self.cli("channels", "add", "matrix", "--homeserver", self.homeserver, "--user", self.palui.user_id,
                     env={"PALUI_MATRIX_PASSWORD": self.palui.password})
        assert r.returncode == 0, r.stderr
        assert self.palui.password not in r.stdout + r.stderr

    def joined(self, room: str) -> bool:
        """Palui's account is in ``room`` (asked of the homeserver)."""
        try:
            r = self.hs.client_api("GET", "/_matrix/client/v3/joined_rooms", self.palui.access_token)
        except SynapseError:
            return False
        return room in r.get("joined_rooms", [])

    def code(self) -> str:
        r = self.cli("channels", "pair", "matrix")
        assert r.returncode == 0, r.stderr
        return r.stdout.split("pairing code: ")[1].split()[0]

    async def pair(self, person: Peer) -> str:
        """The person invites Palui to a direct chat and sends /pair CODE there. Returns the room."""
        code = self.code()
        room = await person.room(self.palui.user_id)
        mark = person.mark()
        await person.send(room, f"/pair {code}")
        await person.palui_said(room, lambda b: "paired with" in b, self.palui.user_id, start=mark)
        return room


@pytest.fixture
async def people(synapse: SynapseServer):
    made: list[Peer] = []

    async def make(name: str) -> Peer:
        p = await Peer(synapse, register(synapse, name)).start()
        made.append(p)
        return p

    yield make
    for p in made:
        await p.close()


@pytest.fixture
def matrix_rig(home: Path, synapse: SynapseServer) -> Iterator[Callable[..., MatrixRig]]:
    made: list[MatrixRig] = []

    def make(toml: str = "", *, homeserver: str | None = None, process: bool = False) -> MatrixRig:
        rig = MatrixRig(home, synapse, toml, homeserver=homeserver, process=process)
        made.append(rig)
        rig.add_channel()
        rig.start()
        return rig

    yield make
    for rig in made:
        rig.close(rig.palui.password)


class _Loop:
    """An event loop in a thread, for nio clients driven from a synchronous test."""

    def __init__(self) -> None:
        import asyncio
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="matrix-peers", daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 300) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class MatrixConformanceRig(ChannelRig):
    """The Matrix channel for the conformance suite (:class:`support.channel_rig.ChannelRig`): the session's
    Synapse behind a :class:`~support.fault_proxy.FaultProxy` (an outage refuses connections without stopping
    Synapse for the other tests), the person and a stranger as nio clients. A forward is a reply to the
    stranger's message in a room of the three (groups allowed for it): Matrix marks no forwards."""

    kind, title = "matrix", "Matrix"
    exactly_once = True
    marks_forwards = False
    stranger_can_answer = False  # a private room has no one else in it

    def __init__(self, home: Path, request: Any, process: bool = False) -> None:
        from support.fault_proxy import FaultProxy

        super().__init__(home, process=process)
        self.hs: SynapseServer = request.getfixturevalue("synapse")
        self.proxy = FaultProxy(self.hs.port).start()
        self.palui = register(self.hs, "palui")
        self.loop = _Loop()
        self.peers = {who: self.loop.run(Peer(self.hs, register(self.hs, who)).start())
                      for who in ("person", "stranger")}
        self.stranger_id = self.peers["stranger"].user.user_id
        self.rooms: dict[str, str] = {}  # who -> the private room with Palui
        self.group: str | None = None

    def close(self) -> None:
        super().close()
        for p in self.peers.values():
            self.loop.run(p.close())
        self.loop.close()
        self.proxy.stop()

    def add_channel(self, homeserver: str | None = None) -> None:
        r = self.cli("channels", "add", "matrix", "--homeserver", self.proxy.url, "--user", self.palui.user_id,
                     env={"PALUI_MATRIX_PASSWORD": self.palui.password})
        assert r.returncode == 0, r.stderr

    def _room(self, who: str) -> str:
        if who not in self.rooms:
            self.rooms[who] = self.loop.run(self.peers[who].room(self.palui.user_id))
        return self.rooms[who]

    def pair_with(self, code: str, who: str) -> str:
        return self.say(f"/pair {code}", who)

    def say(self, text: str, who: str = "person") -> str:
        return self.loop.run(self.peers[who].send(self._room(who), text))

    def forward(self, text: str) -> str:
        person, stranger = self.peers["person"], self.peers["stranger"]
        if self.group is None:
            assert self.cli("channels", "groups", "matrix", "on").returncode == 0
            self.group = self.loop.run(person.room(self.palui.user_id, stranger.user.user_id))
            self.loop.run(stranger.join(self.group))
            wait_for(lambda: self.group in self.hs.client_api("GET", "/_matrix/client/v3/joined_rooms",
                                                                 self._token()).get("joined_rooms", []),
                     30, what="Palui to join the room of three")
        theirs = self.loop.run(stranger.send(self.group, text))
        return self.loop.run(person.reply(self.group, theirs, stranger.user.user_id, text, "what about this?"))

    def edit(self, handle: str, text: str) -> str:
        room = self._room("person")
        return self.loop.run(self.peers["person"].send(room, f"* {text}", **{
            "m.new_content": {"msgtype": "m.text", "body": text},
            "m.relates_to": {"rel_type": "m.replace", "event_id": handle}}))

    def processed(self, handle: str) -> str:
        rows = lambda: self.svc.rows("SELECT outcome FROM channel_updates WHERE channel = 'matrix' AND key = ?",  # noqa: E731
                                     (handle,))
        return wait_for(lambda: (rows() or [[None]])[0][0], 30, what=f"event {handle} recorded")

    def mark(self) -> int:
        return self.loop.run(self._synced("person"))

    async def _synced(self, who: str) -> int:
        await self.peers[who].sync(0)
        return self.peers[who].mark()

    def seen(self, after: int, who: str = "person") -> list[Shown]:
        peer = self.peers[who]
        self.loop.run(peer.sync(200))
        out = []
        for room, e in peer.events[after:]:
            if who != "person" and room != self.rooms.get(who):
                continue  # the stranger's own private room only (in the room of three Palui answers the person)
            content = getattr(e, "source", {}).get("content", {})
            if getattr(e, "sender", "") != self.palui.user_id or "body" not in content:
                continue
            rel = content.get("m.relates_to") or {}
            if rel.get("rel_type") == "m.replace":
                out.append(Shown(content.get("m.new_content", {}).get("body", ""), rel.get("event_id", ""), [],
                                 True, e))
            else:
                out.append(Shown(content["body"], e.event_id, [], False, e))
        return out

    def answer(self, shown: Shown, approve: Answer, who: str = "person") -> tuple[str, int]:
        mark = self.mark()
        key = ("\u2705", "\u274c", "\U0001f501", "\U0001f6d1")[button(approve)]
        return self.loop.run(self.peers[who].react(self._room(who), shown.ref, key)), mark

    def forge(self, shown: Shown, approve: bool) -> tuple[str, int]:
        mark = self.mark()
        word = "/approve" if approve else "/deny"
        return self.say(f"{word} a-00000000000000000000000000000000"), mark

    def replay(self, handle: tuple[str, int]) -> tuple[str, int]:
        """A reply ``/approve`` to the approval message reacted to: the same answer, as a new event (Synapse
        refuses a second identical reaction)."""
        room = self._room("person")
        got = self.loop.run(self.peers["person"].client.room_get_event(room, handle[0]))
        target = got.event.source["content"]["m.relates_to"]["event_id"]
        approve = got.event.source["content"]["m.relates_to"]["key"].startswith("\u2705")
        mark = self.mark()
        word = "/approve" if approve else "/deny"
        return self.loop.run(self.peers["person"].reply(room, target, self.palui.user_id, "Approval", word)), mark

    def told(self, handle: tuple[str, int]) -> str:
        words = ("Approved", "Denied", "Refused", "already", "unknown", "no approval", "not ")
        return self.wait_shown(lambda s: not s.edited and any(w in s.text for w in words), handle[1]).text

    def pings(self, shown: Shown) -> list[str]:
        content = shown.raw.source["content"]
        if content.get("m.mentions") == {} and (not shown.edited or content["m.new_content"].get("m.mentions") == {}):
            return []
        import re

        return re.findall(r"@room|@[\w.=-]+:[\w.:-]+", content.get("body", ""))

    def down(self) -> None:
        self.proxy.down()

    def up(self) -> None:
        self.proxy.up()

    def _token(self) -> str:
        return json.loads((self.home / "secrets" / "channel-matrix.json").read_text())["access_token"]

    def revoke_token(self) -> None:
        self.hs.client_api("POST", "/_matrix/client/v3/logout", self._token(), {})

    def renew_token(self) -> None:
        f = self.home / "new-password"
        f.write_text(self.palui.password)
        r = self.cli("channels", "add", "matrix", "--homeserver", self.proxy.url, "--user", self.palui.user_id,
                     "--password-file", str(f))
        assert r.returncode == 0 and "still paired" in r.stdout, r.stdout + r.stderr
