"""A turn's writes in few transactions, and the commits that must survive a power cut synced
(docs/decisions/0189-a-durable-turn-in-few-transactions.md).

Seen on the turn's own SQLite connection (a ``sqlite3`` trace callback, in this process): a one-call turn commits in
five write transactions (the turn row, its first message and its claim; the first step with its usage and the call
marked sent; the call's result with its audit row; the last step with its usage and the end), not the eleven it
took; the claim and the end switch the connection to ``synchronous = FULL`` and back; an answer to an approval too.
A file written beside a commit that was not durable (the audit head) is synced by the next durable one. Power cuts
themselves are not simulated; crashes are (the runner's kill -9 tests, unchanged).
"""

from __future__ import annotations

import os

from support.scripts import call, calls, text, write_script


def traced(svc):
    seen: list[str] = []
    svc.db._connect().set_trace_callback(seen.append)
    return seen


def transactions(seen: list[str]) -> list[list[str]]:
    """The write transactions in ``seen``, each with the statements just before it (its PRAGMAs) and in it."""
    out, current = [], []
    for s in seen:
        current.append(s)
        if s == "COMMIT":
            if any(x.startswith("BEGIN IMMEDIATE") for x in current):
                out.append(current)
            current = []
    return out


async def test_a_one_call_turn_commits_in_five_transactions_its_claim_and_end_durably(svc, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("recall__search_memories", query="milk")), text("No."))
    await svc.turns.send("warm up", model=model)
    seen = traced(svc)
    r = await svc.turns.send("Do I need milk?", model=model)
    svc.db._connect().set_trace_callback(None)
    assert r["status"] == "done" and r["usage"]["steps"] == 2
    tx = transactions(seen)
    assert len(tx) == 5, [t[-3:] for t in tx]
    durable = [t for t in tx if "PRAGMA synchronous = FULL" in t]
    claim, end = tx[0], tx[-1]
    assert durable == [claim, end]
    assert any(s.startswith("INSERT INTO turns") for s in claim) and any("status='running'" in s for s in claim)
    assert any("status = 'done'" in s for s in end) and any(s.startswith("INSERT INTO usage") for s in end)
    # Each switch to FULL is undone after its commit: the next transaction is NORMAL again.
    after = seen[seen.index("COMMIT", seen.index(claim[-1])) + 1:]
    assert after[0] == "PRAGMA synchronous = NORMAL"


async def test_an_answer_is_durable_and_syncs_the_audit_head_written_before_it(svc, tmp_path, monkeypatch):
    from palui.store import audit_chain

    model = write_script(tmp_path / "s.json", calls(call("recall__search_memories", query="milk"),
                                                    call("tasks__delete_task", id=1)), text("Deleted."))
    r = await svc.turns.send("delete task 1", model=model)
    assert r["status"] == "awaiting_approval", r  # a destructive call asks; the read before it was audited
    synced: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    pending = svc.approvals.list("pending")
    assert pending, "the write asks"
    seen = traced(svc)
    svc.approvals.answer(pending[0]["id"], True, "cli")
    svc.db._connect().set_trace_callback(None)
    assert "PRAGMA synchronous = FULL" in seen
    # The audit rows of this turn were committed without a sync; the durable answer syncs the head with them.
    assert str(audit_chain.head_path(svc.db.path)) in synced
