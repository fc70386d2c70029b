"""The person's denials are their decisions, not a loop (spec §5.5, §6.3), through the CLI with scripted turns.

A denial feeds the model the person's reason and the turn goes on: it neither counts in the error streak
nor makes a repeated call; the same call again is refused as "denied before" without asking; more than
``budgets.denials`` (8) denials end the turn's tool use, and the model answers in a last step without tools.
"""

from __future__ import annotations

import json

from support.scripts import call, calls, text, write_script

ANSWER = "The networking event on May 26th has Ana, Ben and Chen invited."
NEVER = "the model was asked again"


class Turn:
    """One scripted turn started with ``palui run --json``, denied with ``palui approvals deny --json``:
    ``out`` is the last result printed, ``events`` every event the runs printed, in order."""

    def __init__(self, cli, tmp_path, *steps, env=None) -> None:
        self.cli, self.env = cli, env
        model = write_script(tmp_path / "s.json", *steps)
        self.out = json.loads(cli("run", "--json", "--model", model, "who else is invited?", env=env).stdout)
        self.events = list(self.out["events"])

    def deny(self, reason: str | None = None) -> dict:
        """Deny the turn's one pending approval; the turn goes on in that process."""
        [a] = self.out["pending_approvals"]
        r = self.cli("approvals", "deny", a["id"], *(["--reason", reason] if reason else []), "--json", env=self.env)
        self.out = json.loads(r.stdout)
        self.events += self.out["events"]
        return self.out

    def results(self) -> list[str]:
        return [e["result"] for e in self.events if e["type"] == "tool_call"]


def outcomes(cli, turn) -> list[str]:
    return [r["outcome"] for r in cli.json("audit", "--json", "--turn", turn)]


def test_four_denied_writes_then_a_lookup_end_done_with_the_answer(cli, tmp_path):
    writes = [calls(call("recall__forget_memory", id=900 + i)) for i in range(4)]  # destructive: asks in chat
    t = Turn(cli, tmp_path, *writes, calls(call("recall__search_memories", query="networking event")),
             text(ANSWER), text(NEVER))
    for _ in range(4):
        assert t.out["status"] == "awaiting_approval", t.out
        t.deny()
    assert t.out["status"] == "done" and t.out["answer"] == ANSWER, t.out
    assert t.out["budget"] is None
    assert outcomes(cli, t.out["turn"]) == ["asked", "denied"] * 4 + ["ok"]
    assert t.results()[:4] == ["The person denied this action."] * 4


def test_a_call_denied_before_is_refused_without_asking_and_the_turn_goes_on(cli, tmp_path):
    send = call("recall__forget_memory", id=10000)
    t = Turn(cli, tmp_path, calls(send), calls(send), calls(send),
             calls(call("recall__search_memories", query="transfers")), text(ANSWER), text(NEVER))
    t.deny(reason="not from this account")
    assert t.out["status"] == "done" and t.out["answer"] == ANSWER, t.out
    assert outcomes(cli, t.out["turn"]) == ["asked", "denied", "denied before", "denied before", "ok"]
    results = t.results()
    assert results[0] == "The person denied this action: not from this account"
    for again in results[1:3]:
        assert again.startswith("The person denied this same call earlier in this turn: not from this account.")
        assert "It was not asked again" in again
    assert len(cli.json("approvals", "list", "--all", "--json")) == 1  # asked once
    shown = [e for e in t.events if e["type"] == "tool_call"]
    assert [bool(e.get("denied")) for e in shown] == [True, True, True, False]


def test_two_identical_calls_in_one_response_and_a_third_are_asked_once(cli, tmp_path):
    send = call("recall__forget_memory", id=10000)
    t = Turn(cli, tmp_path, calls(send, send), calls(send), text(ANSWER), text(NEVER))
    t.deny()
    assert t.out["status"] == "done" and t.out["answer"] == ANSWER, t.out
    assert outcomes(cli, t.out["turn"]) == ["asked", "denied", "denied before", "denied before"]


def test_calls_denied_before_still_end_a_streak_of_refusals(cli, tmp_path):
    """A model that keeps making a call the person refused is looping: Palui's refusals count in the
    error streak (the person's own denial does not)."""
    send = call("recall__forget_memory", id=1)
    t = Turn(cli, tmp_path, *[calls(send)] * 5, text(ANSWER), text(NEVER))
    t.deny()
    assert t.out["status"] == "budget", t.out
    assert t.out["budget"] == ("budgets.error_streak: 4 calls in a row were refused or failed "
                               "(the last: recall__forget_memory)")
    assert t.out["answer"] == ANSWER  # from the last step, without tools
    assert outcomes(cli, t.out["turn"]) == ["asked", "denied"] + ["denied before"] * 4


def test_nine_denials_end_the_tool_use_and_the_model_answers_without_tools(cli, tmp_path):
    writes = [calls(call("recall__forget_memory", id=i)) for i in range(1, 10)]
    t = Turn(cli, tmp_path, *writes, text(ANSWER), text(NEVER))
    for n in range(1, 10):
        assert t.out["status"] == "awaiting_approval", (n, t.out)  # after eight denials the turn still asks
        t.deny()
    assert t.out["status"] == "budget", t.out
    assert t.out["budget"] == "budgets.denials: the person denied 9 calls in this turn, more than 8"
    assert t.out["answer"] == ANSWER
    # The answer came from a 10th step offered no tools, told why; the model was not asked again.
    assert t.out["usage"]["steps"] == 10
    last = [e for e in t.events if e["type"] == "step"][-1]
    assert last["step"] == 10 and last["tools_offered"] == []
    assert [e["reason"] for e in t.events if e["type"] == "last_step"] == [t.out["budget"]]
    assert outcomes(cli, t.out["turn"]) == ["asked", "denied"] * 9


def test_the_denials_budget_is_configurable_and_zero_turns_it_off(cli, tmp_path):
    writes = [calls(call("recall__forget_memory", id=i)) for i in range(1, 4)]
    t = Turn(cli, tmp_path, *writes, text(ANSWER), text(NEVER), env={"PALUI_BUDGETS__DENIALS": "2"})
    for _ in range(3):
        t.deny()
    assert t.out["status"] == "budget" and t.out["budget"].startswith("budgets.denials: the person denied 3 calls")
    assert t.out["answer"] == ANSWER
    inbox = cli.json("inbox", "--json")
    assert inbox[-1]["text"].endswith(f"{ANSWER}\n[stopped: {t.out['budget']}]")

    t = Turn(cli, tmp_path, *writes, text(ANSWER), env={"PALUI_BUDGETS__DENIALS": "0"})
    for _ in range(3):
        t.deny()
    assert t.out["status"] == "done" and t.out["answer"] == ANSWER
