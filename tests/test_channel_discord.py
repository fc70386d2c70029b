"""The Discord channel's own promises (spec §8.3; the shared ones are the conformance suite's,
tests/test_channel_conformance.py): discord.py against the fake REST API and gateway
(tests/support/fake_discord.py) in a real ``palui serve``.

Shown here: a dropped gateway connection is resumed by discord.py (RESUME with the session and sequence, never
a new IDENTIFY) and the message sent meanwhile is answered once; a part whose answer was lost and that is sent
again with its nonce (discord.py retries a 5xx itself) is the same message."""

from __future__ import annotations

import pytest

from support.discord_rig import DiscordConformanceRig
from support.live_service import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def rig(home):
    r = DiscordConformanceRig(home)
    try:
        r.add_channel()
        r.start()
        r.pair()
        yield r
    finally:
        r.close()


def test_a_dropped_gateway_is_resumed_and_what_came_meanwhile_is_answered_once(rig: DiscordConformanceRig):
    rig.set_script({"text": "still here"})
    ops = len(rig.fake.gateway_ops)
    rig.fake.drop_gateway()
    said = rig.say("are you there?")  # dispatched while discord.py is away: it waits in the session
    rig.wait_shown(lambda s: s.text == "still here", said["calls_mark"], timeout=60)
    again = rig.fake.gateway_ops[ops:]
    assert again and {op for op, _ in again} == {6}, f"not a resume: {again}"  # op 6 RESUME, never 2 IDENTIFY
    wait_for(lambda: rig.state() == "connected", 30, what="the channel to say it is connected again")
    assert len([s for s in rig.seen(0) if s.text == "still here"]) == 1
    assert rig.svc.count("turns", "origin = 'chat'") == 1


def test_a_part_sent_again_with_its_nonce_is_the_same_message(rig: DiscordConformanceRig):
    """The answer of a send is lost (a 502 after Discord made the message): sent again with the same nonce,
    Discord answers the first message."""
    rig.set_script({"text": "said once"})
    made: list[str] = []
    real = rig.fake._answer

    def lose_the_first_answer(method, path, body, auth):  # Discord makes the message, the answer is lost
        status, result = real(method, path, body, auth)
        if method == "POST" and path.endswith("/messages") and body.get("content") == "said once" and not made:
            made.append(result["id"])
            from support.fake_discord import _Error

            raise _Error(502, "502: Bad Gateway", 0)
        return status, result

    rig.fake._answer = lose_the_first_answer
    mark = rig.mark()
    rig.say("say it once")
    shown = rig.wait_shown(lambda s: s.text == "said once", mark, timeout=60)
    assert made and shown.ref == made[0]
    assert len([m for m in rig.fake.messages.values() if m["content"] == "said once"]) == 1
    assert len([c for c in rig.fake.calls[mark:] if c.method == "POST" and c.body.get("content") == "said once"]) >= 2
