"""The chat channels' durable outbox without a platform (spec §8.3): which items a message on the person's
channel writes (paired channels only, an answer to its chats), that they commit with the event, and the
worker's rules through a channel whose platform half is a recorder: parts rendered once and marked sent
one by one (a failure after part 1 never sends part 1 again), a part on its way at a crash sent again as
it was (same text, same key), an approval no longer pending sent as its outcome, a refused delivery given
up and the failure cleared by the next success, the edit of an answered approval, retention, and the
result shapes (``palui.results``) of what the door hands the worker.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pydantic
import pytest

from palui import results
from palui.channels.base import Channel, Retry
from palui.channels.redaction import Redactor
from palui.text.status import status_lines
from support.scripts import call, calls, text, write_script


def valid(t: Any, value: Any) -> Any:
    pydantic.TypeAdapter(t).validate_python(value, strict=True)
    pydantic.TypeAdapter(t).validate_json(json.dumps(value), strict=True)
    return value


class Recorder(Channel):
    """A channel whose platform half records what it sends; ``fail`` holds exceptions raised by the next
    sends, in order (None: that send goes through)."""

    kind = "telegram"
    title = "Telegram"
    text_limit = 100
    how_to_answer = "Press (or /approve {id})."

    def __init__(self, svc, name: str = "telegram") -> None:
        super().__init__(svc, name, Redactor())
        self.sent: list[dict[str, Any]] = []
        self.edits: list[tuple[str, str]] = []
        self.fail: list[BaseException | None] = []
        self.ids = iter(range(1000, 10**6))

    async def run(self) -> None:
        await asyncio.Event().wait()

    async def send_message(self, chat: str, part) -> str:
        if self.fail and (e := self.fail.pop(0)) is not None:
            raise e
        ref = str(next(self.ids))
        self.sent.append({"chat": chat, "text": part["text"], "key": part["key"], "kind": part["kind"],
                          "buttons": part["approval_id"], "ref": ref})
        return ref

    async def edit(self, chat: str, ref: str, part) -> str:
        self.edits.append((ref, part["text"]))
        return ref


def paired(svc, name: str = "telegram", kind: str = "telegram", person: str = "111") -> None:
    svc.channels.add(kind, name, {"token": "t"}, {})
    assert svc.channels.try_pair(name, svc.channels.pair_code(name)["code"], person, "@alice", person)


async def drain(ch: Recorder, svc, timeout: float = 120.0, until=None) -> None:
    """Run the worker until the channel's outbox has nothing pending (or until ``until()`` holds); ``timeout``
    is a hang guard."""
    done = until or (lambda: svc.outbox.next(ch.name) is None)
    task = asyncio.create_task(ch.deliver_loop())
    try:
        for _ in range(int(timeout / 0.02)):
            if done():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the worker did not get there: {svc.outbox.next(ch.name)}")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_message_writes_items_for_paired_channels_and_an_answer_for_its_chats(svc):
    paired(svc)
    svc.channels.add("matrix", None, {"access_token": "x"}, {"user_id": "@p:x"})  # added, never paired
    svc.notifier("job", "Job result: done")
    items = svc.db.all("SELECT channel, chat_id, kind, text FROM channel_outbox ORDER BY id")
    assert [tuple(r) for r in items][-1] == ("telegram", "111", "job", "Job result: done")
    assert not svc.db.all("SELECT 1 FROM channel_outbox WHERE channel = 'matrix'")
    conv = svc.channel_updates.conversation("telegram", "111")
    svc.notifier("answer", "Answer: hi", turn_id="t-1", conversation_id=conv)
    svc.notifier("answer", "Answer: elsewhere", turn_id="t-2", conversation_id="c-terminal")
    answers = svc.db.all("SELECT chat_id, subject FROM channel_outbox WHERE kind = 'answer'")
    assert [tuple(r) for r in answers] == [("111", "t-1")]


def test_the_items_commit_with_the_event_and_the_channels_hear_of_it_after_the_commit(svc):
    paired(svc)
    heard = []
    svc.notifier.subscribe(lambda n: heard.append((n.kind, svc.db.one("SELECT COUNT(*) FROM channel_outbox")[0])))
    before = svc.db.one("SELECT COUNT(*) FROM channel_outbox")[0]
    with pytest.raises(RuntimeError):
        with svc.db.write():
            svc.notifier("job", "never told: its event rolled back")
            raise RuntimeError("the event failed")
    assert svc.db.one("SELECT COUNT(*) FROM channel_outbox")[0] == before and heard == []
    assert not [m for m in svc.notifier.inbox() if "never told" in m["text"]]
    with svc.db.write():
        svc.notifier("job", "told once stored")
        assert heard == []  # not before the commit
    assert heard == [("job", before + 1)]


async def test_a_failure_after_part_one_sends_only_the_rest(svc):
    paired(svc)
    ch = Recorder(svc)
    body = "\n".join(f"line {i:02d} " + "x" * 30 for i in range(8))  # 8 lines of 40: four parts of 100
    svc.notifier("job", body)
    ch.fail = [None, Retry("unreachable"), Retry("unreachable")]
    await drain(ch, svc)
    assert "".join(s["text"] for s in ch.sent[1:]) == body  # the pairing notice went first
    texts = [s["text"] for s in ch.sent[1:]]
    assert len(texts) == len(set(texts)) == 4 and all(len(t) <= 100 for t in texts)
    assert svc.channels.get("telegram")["last_failure"] is None  # cleared by the success


async def test_a_part_on_its_way_at_a_crash_goes_again_as_it_was(svc):
    paired(svc)
    ch = Recorder(svc)
    await drain(ch, svc)
    svc.notifier("job", "short one")
    item = svc.outbox.next("telegram")
    rendered = svc.outbox.render(item["id"], [{"kind": "job", "text": "as rendered before the crash"}])
    part = rendered["parts"][0]
    svc.outbox.trying(part["id"])  # the process died here, the request perhaps delivered
    again = Recorder(svc)  # the next palui serve
    await drain(again, svc)
    assert [(s["text"], s["key"]) for s in again.sent] == [("as rendered before the crash", part["key"])]
    valid(results.OutboxItem, rendered)


async def test_an_approval_no_longer_pending_is_sent_as_its_outcome_never_as_an_ask(svc, tmp_path):
    paired(svc)
    ch = Recorder(svc)
    await drain(ch, svc)
    ch.sent.clear()  # the pairing notice
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("ok"))
    r = await svc.turns.send("forget memory 1", model=model)
    aid = r["pending_approvals"][0]["id"]
    svc.approvals.answer(aid, True, via="cli")
    await drain(ch, svc)
    assert [(s["text"], s["buttons"]) for s in ch.sent] == [
        (f"Approval {aid} (recall__forget_memory): approved in the terminal.", None)]


async def test_arguments_sent_then_the_approval_answered_the_rest_is_its_outcome(svc, tmp_path):
    paired(svc)
    ch = Recorder(svc)
    await drain(ch, svc)
    ch.sent.clear()  # the pairing notice
    model = write_script(tmp_path / "s.json", calls(call("tasks__create_task", title="t", notes="n " * 200)),
                         text("ok"))
    svc.tools.set_class("tasks__create_task", "destructive")
    r = await svc.turns.send("make it", model=model)
    aid = r["pending_approvals"][0]["id"]
    ch.fail = [None, Retry("unreachable")]  # the first argument message goes, the second fails
    await drain(ch, svc, until=lambda: not ch.fail)  # both sends were tried (not a time: a slow machine waits)
    assert svc.outbox.next(ch.name) is not None  # the failed part is still to send
    assert len(ch.sent) == 1 and ch.sent[0]["text"].startswith(f"Arguments of approval {aid} (part 1 of ")
    svc.approvals.answer(aid, False, via="web")
    await drain(ch, svc)
    assert [s["text"] for s in ch.sent[1:]] == [f"Approval {aid} (tasks__create_task): denied on the web page."]
    assert not [s for s in ch.sent if s["buttons"]]


async def test_a_pending_approval_is_shown_with_buttons_and_edited_when_answered_elsewhere(svc, tmp_path):
    paired(svc)
    ch = Recorder(svc)
    await drain(ch, svc)
    ch.sent.clear()  # the pairing notice
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("ok"))
    r = await svc.turns.send("forget memory 1", model=model)
    aid = r["pending_approvals"][0]["id"]
    await drain(ch, svc)
    [ask] = [s for s in ch.sent if s["buttons"] == aid]
    assert svc.outbox.sent_message("telegram", "111", ask["ref"])["state"] == "shown"
    lines = status_lines(svc.status.get())
    assert lines[lines.index("pending approvals: 1") + 1].startswith(f"  {aid}: recall__forget_memory, expires ")
    svc.approvals.answer(aid, False, via="cli")
    await ch.refresh_approvals()
    await drain(ch, svc)
    assert ch.edits == [(ask["ref"], f"Approval {aid} (recall__forget_memory): denied in the terminal.")]
    assert svc.outbox.sent_message("telegram", "111", ask["ref"])["state"] == "closed"


async def test_a_refused_delivery_is_given_up_and_shown_until_the_next_success(svc):
    paired(svc)
    ch = Recorder(svc)
    await drain(ch, svc)
    ch.reply("111", "refused by the platform")
    ch.fail = [ValueError("Bad Request: chat not found")]
    await drain(ch, svc)
    assert svc.channels.get("telegram")["last_failure"] == "reply: ValueError: Bad Request: chat not found"
    assert svc.db.one("SELECT state FROM channel_outbox ORDER BY id DESC LIMIT 1")["state"] == "failed"
    ch.reply("111", "this one goes")
    await drain(ch, svc)
    assert ch.sent[-1]["text"] == "this one goes" and svc.channels.get("telegram")["last_failure"] is None


def test_old_items_are_pruned_like_the_inbox_and_a_removed_channel_takes_its_items(svc):
    paired(svc)
    svc.notifier("job", "old")
    assert svc.outbox.prune(now=svc._clock.now() + 91 * 86400) >= 2
    assert svc.db.one("SELECT COUNT(*) FROM channel_outbox")[0] == 0
    svc.notifier("job", "kept until removed")
    svc.channels.remove("telegram")
    assert svc.db.one("SELECT COUNT(*) FROM channel_outbox")[0] == 0
    assert svc.db.one("SELECT COUNT(*) FROM channel_outbox_parts")[0] == 0


def test_a_new_secret_keeps_the_pairing_and_another_account_is_refused(svc):
    from palui.errors import UsageError

    svc.channels.add("telegram", None, {"token": "1:a"}, {"bot_id": 1, "bot_username": "palui_bot"})
    assert svc.channels.try_pair("telegram", svc.channels.pair_code("telegram")["code"], "111", "@alice", "111")
    ch = svc.channels.renew_secret("telegram", {"token": "1:b"}, {"bot_id": 1, "bot_username": "palui_bot"})
    assert ch["person"] == "@alice" and svc.channels.secrets("telegram") == {"token": "1:b"}
    with pytest.raises(UsageError, match="@palui_bot; this secret is @other_bot's"):
        svc.channels.renew_secret("telegram", {"token": "2:c"}, {"bot_id": 2, "bot_username": "other_bot"})
    assert svc.channels.secrets("telegram") == {"token": "1:b"}


def test_the_result_shapes_of_the_outbox_and_status(svc):
    paired(svc)
    item = svc.outbox.next("telegram")
    valid(results.OutboxItem, item)
    valid(results.ChatChannel, svc.channels.get("telegram"))
    valid(results.Status, svc.status.get())
