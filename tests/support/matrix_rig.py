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

from support.channel_rig import ChannelRig
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


class MatrixRig(ChannelRig):
    """:class:`ChannelRig` with a Matrix channel for ``palui`` (an account registered on ``hs``)."""

    channel = "matrix"

    def __init__(self, home: Path, hs: SynapseServer, toml: str = "", *, process: bool = False) -> None:
        super().__init__(home, toml, process=process)
        self.hs = hs
        self.palui = register(hs, "palui")

    def add_channel(self) -> None:
        r = self.cli("channels", "add", "matrix", "--homeserver", self.hs.url, "--user", self.palui.user_id,
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

    def make(toml: str = "", *, process: bool = False) -> MatrixRig:
        rig = MatrixRig(home, synapse, toml, process=process)
        made.append(rig)
        rig.add_channel()
        rig.start()
        return rig

    yield make
    for rig in made:
        rig.stop()
        logs = rig.logs()
        secret = json.loads((home / "secrets" / "channel-matrix.json").read_text())["access_token"]
        assert secret not in logs and rig.palui.password not in logs, "a Matrix secret leaked into a log"
