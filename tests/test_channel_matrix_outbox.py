"""The durable outbox and a Matrix channel that recovers (spec §8.3), against a real Synapse on 127.0.0.1
(a real ``palui serve``; the person is a nio client in the test).

Shown here: an approval message on its way when the homeserver stops answering and ``palui serve`` is
killed with SIGKILL arrives exactly once after the restart (its transaction id makes the send again the
same event) and a reaction on it answers; an invite made before the pairing code is joined once the
code is made; receiving resumes after the homeserver was down, and the sync's backoff never waits
long enough to miss the 5 s.
"""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace

import pytest

from support.live_service import wait_for
from support.matrix_rig import MatrixRig, Peer

pytestmark = pytest.mark.slow

FORGET = {"tool_calls": [{"tool": "recall__forget_memory", "args": {"id": 1}}]}


@pytest.fixture
def rig(matrix_rig) -> MatrixRig:
    return matrix_rig()



def _asks(person: Peer, room: str, palui: str, aid: str, start: int) -> list:
    return [e for r, e in person.events[start:] if r == room and getattr(e, "sender", "") == palui
            and (getattr(e, "body", "") or "").startswith(f"Approval {aid}:")]


async def test_an_approval_on_its_way_at_a_kill_arrives_exactly_once(matrix_rig, people, synapse):
    rig = matrix_rig(process=True)  # killed with SIGKILL
    person = await people("person")
    palui = rig.palui.user_id
    room = await rig.pair(person)
    rig.set_script(FORGET, {"text": "forgotten"})
    mark = person.mark()
    synapse.proc.send_signal(signal.SIGSTOP)  # the homeserver takes the request and does not answer
    try:
        r = rig.svc.post("/api/turns", {"message": "forget memory 1"})
        aid = r["pending_approvals"][0]["id"]
        wait_for(lambda: rig.svc.count("channel_outbox_parts", "kind = 'approval' AND tried = 1 AND ref IS NULL"),
                 20, what="the approval message to be on its way")
        assert rig.svc.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        synapse.proc.send_signal(signal.SIGCONT)
    rig.start()
    ask = await person.palui_said(room, lambda b: b.startswith(f"Approval {aid}:"), palui, timeout=30, start=mark)
    wait_for(lambda: rig.svc.count("channel_messages", "ref = ? AND state = 'shown'", (ask.event_id,)), 15,
             what="Palui to record the approval message it sent")
    for _ in range(3):  # a duplicate would have arrived by now: the send after the restart is done
        await person.sync(1000)
    assert len(_asks(person, room, palui, aid, mark)) == 1
    await person.react(room, ask.event_id, "\u2705")
    wait_for(lambda: rig.svc.rows("SELECT status, answered_via FROM approvals WHERE id = ?", (aid,))[0]
             == ("approved", "matrix"), 15, what="the reaction to approve")
    rig.svc.wait_turn(r["turn"], ("done",))


async def test_a_part_whose_answer_was_lost_goes_again_under_its_own_transaction_id(home, synapse, people):
    """The homeserver stores the event and dies before answering: nio's own retries meet "connection refused",
    and the part goes again, when the homeserver is back, under the transaction id it had: shown once."""
    from support.fault_proxy import FaultProxy

    with FaultProxy(synapse.port) as proxy:
        rig = MatrixRig(home, synapse, homeserver=proxy.url)
        rig.add_channel()
        rig.start()
        try:
            person = await people("person")
            palui = rig.palui.user_id
            room = await rig.pair(person)
            rig.set_script({"text": "said once"})
            proxy.lose_answer_to(b"/send/m.room.message/palui-")
            mark = person.mark()
            await person.send(room, "say it once")
            wait_for(proxy.tripped.is_set, 30, what="the answer's send to reach the homeserver and lose its answer")
            wait_for(lambda: rig.svc.rows("SELECT last_failure FROM channels")[0][0], 30,
                     what="the outbox to see the send fail")
            proxy.up()
            await person.palui_said(room, lambda b: b == "said once", palui, timeout=60, start=mark)
            wait_for(lambda: rig.svc.count("channel_outbox", "state = 'pending'") == 0, 30, what="the outbox to empty")
            for _ in range(3):  # a second event would have reached the person by now
                await person.sync(1000)
            shown = [e for r, e in person.events[mark:] if r == room and getattr(e, "sender", "") == palui
                     and getattr(e, "body", "") == "said once"]
            assert len(shown) == 1, f"the answer was shown {len(shown)} times"
        finally:
            rig.svc.stop()


async def test_an_invite_made_before_the_pairing_code_is_joined_when_the_code_is_made(rig: MatrixRig, people):
    person = await people("person")
    palui = rig.palui.user_id
    room = await person.room(palui)  # the person invites Palui first
    wait_for(lambda: rig.svc.count("channel_invites", "room_id = ?", (room,)), 20, what="the invite to be held")
    time.sleep(1.5)
    assert not rig.joined(room)  # no code is live: not joined
    code = rig.code()
    wait_for(lambda: rig.joined(room), 15, what="Palui to join the room once a code is live")
    mark = person.mark()
    await person.send(room, f"/pair {code}")
    said = await person.palui_said(room, lambda b: "paired with" in b, palui, start=mark)
    assert said.body == f"Matrix paired with {person.user.user_id} ({person.user.user_id})."
    assert rig.svc.count("channel_invites") == 0


async def test_receiving_resumes_after_the_homeserver_was_down(rig: MatrixRig, people, synapse):
    person = await people("person")
    palui = rig.palui.user_id
    room = await rig.pair(person)
    synapse.stop()
    try:
        wait_for(lambda: "unreachable" in rig.state(), 30, what="the channel to say the homeserver is away")
        time.sleep(12)  # long enough for a backoff without a low cap to grow past 8 s
    finally:
        synapse.start()
    back = time.monotonic()
    rig.set_script({"text": "back again"})
    mark = person.mark()
    await person.send(room, "are you there?")
    await person.palui_said(room, lambda b: b == "back again", palui, timeout=60, start=mark)
    print(f"answered {time.monotonic() - back:.1f} s after the homeserver answered again")


async def test_the_sync_backoff_stays_under_five_seconds(monkeypatch):
    """While the homeserver is unreachable the sync is tried again at least every 3.6 s (3 s with 20 %
    jitter), so receiving resumes within 5 s of its first answer (spec §8.3); the clock is not waited on."""
    import asyncio

    import aiohttp

    from palui.channels import matrix

    waits: list[float] = []

    class Down:
        async def sync(self, *a, **k):
            raise aiohttp.ClientConnectionError("connection refused")

        async def close(self):
            pass

    # the two parts the sync loop calls
    svc = SimpleNamespace(channel_updates=SimpleNamespace(cursor=lambda name: "s1"),
                          channels=SimpleNamespace(set_state=lambda name, state: None))
    channel = matrix.MatrixChannel.__new__(matrix.MatrixChannel)
    channel.svc, channel.name, channel.client, channel.poll_ms = svc, "matrix", Down(), 30_000
    channel.redact = lambda text: text
    channel._last_state, channel._refused = "", False
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) >= 30:
            raise asyncio.CancelledError
        await real_sleep(0)

    monkeypatch.setattr(matrix.asyncio, "sleep", sleep)
    with pytest.raises(asyncio.CancelledError):
        await channel.run()
    monkeypatch.undo()
    assert len(waits) == 30 and max(waits) <= 3.6 and waits[-1] >= 2.4
