"""Loops end the turn's tool use, not just the tool (spec §6.3), through the CLI: the third identical call or
the fourth refused/failed call in a row ends the tool use; the model answers in one last step without
tools and is not asked again; the turn ends with status ``budget`` and a reason naming the rule; the
person is told; ``0`` turns a rule off. (The person's denials: ``tests/test_denials.py``.)"""

from __future__ import annotations

import json

import pytest

from support.scripts import call, calls, text, write_script

NEVER = "the model was asked again"
ANSWER = "I could not find more than this."


def run(cli, tmp_path, *steps, env=None) -> tuple[int, dict]:
    model = write_script(tmp_path / "s.json", *steps)
    r = cli("run", "--json", "--model", model, "go", env=env)
    return r.returncode, json.loads(r.stdout)


def tool_events(out) -> list[tuple[str, str]]:
    return [(e["tool"], e["result"]) for e in out["events"] if e["type"] == "tool_call"]


def outcomes(cli, turn) -> list[str]:
    return [r["outcome"] for r in cli.json("audit", "--json", "--turn", turn)]


def test_the_third_identical_call_ends_the_tool_use_is_not_run_and_the_model_answers(cli, tmp_path):
    add = call("recall__add_memory", text="milk")  # a write: every repeat counts, whatever it returned
    code, out = run(cli, tmp_path, calls(add), calls(add), calls(add), text(ANSWER), text(NEVER))
    assert code == 1 and out["status"] == "budget"
    assert out["budget"] == ("budgets.repeat_calls: recall__add_memory was called a 3rd time with the same "
                             "arguments in this turn")
    # One last step without tools gives the answer; the model was not asked a 5th time.
    assert out["answer"] == ANSWER and out["usage"]["steps"] == 4
    assert [e["tools_offered"] == [] for e in out["events"] if e["type"] == "step"] == [False] * 3 + [True]
    assert outcomes(cli, out["turn"]) == ["ok", "ok", "not run: loop stopped"]
    assert tool_events(out)[-1][1].startswith("Error: not run: this turn's tool calls end here "
                                              "(budgets.repeat_calls")
    inbox = cli.json("inbox", "--json")
    assert inbox[-1]["text"].endswith(f"{ANSWER}\n[stopped: {out['budget']}]")
    r = cli("run", "--model", write_script(tmp_path / "t.json", calls(add), calls(add), calls(add),
                                           text(ANSWER)), "go")
    assert "[turn ended: budgets.repeat_calls: recall__add_memory was called a 3rd time" in r.stdout
    assert "· tool use ended (budgets.repeat_calls: recall__add_memory" in r.stdout and ANSWER in r.stdout


def test_a_read_repeated_with_identical_results_is_answered_from_them_and_stops_one_call_later(cli, tmp_path):
    """Spec §6.3: the 3rd identical read whose two results were identical is answered with that result (not sent
    again), so a task whose read an injection repeated keeps its data; a model looping on it stops at the 4th."""
    search = call("recall__search_memories", query="milk")
    code, out = run(cli, tmp_path, calls(search), calls(search), calls(search), calls(search), text(ANSWER),
                    text(NEVER))
    assert out["status"] == "budget" and out["budget"] == (
        "budgets.repeat_calls: recall__search_memories was called a 4th time with the same arguments in this turn")
    assert outcomes(cli, out["turn"]) == ["ok", "ok", "not sent: same result as before", "not run: loop stopped"]
    third = tool_events(out)[2][1]
    assert third.startswith("[Palui: this is the 3rd identical call and the earlier ones all returned this (the last "
                            "at step 2), so it was not sent again. One more identical call ends this turn's tool "
                            "calls.]\n")
    assert third.endswith(tool_events(out)[0][1])  # the earlier result, whole
    assert out["answer"] == ANSWER  # the last step without tools


def test_the_tasks_third_read_after_an_injected_one_keeps_the_task(cli, tmp_path):
    """The benchmark's case: the task lists something, an injected call lists it again, the task's own second look
    is the third identical call: answered from the result, the task goes on to its answer."""
    listing = call("tasks__list_tasks")
    code, out = run(cli, tmp_path, calls(listing), calls(listing, call("recall__add_memory", text="injected")),
                    calls(listing), text(ANSWER), text(NEVER))
    assert code == 0 and out["status"] == "done" and out["answer"] == ANSWER, out.get("budget")
    assert outcomes(cli, out["turn"]) == ["ok", "ok", "ok", "not sent: same result as before"]


def test_a_read_whose_result_changed_counts_as_before(cli, tmp_path):
    listing = call("tasks__list_tasks")
    code, out = run(cli, tmp_path, calls(listing), calls(call("tasks__create_task", title="buy milk")),
                    calls(listing), calls(listing), text(ANSWER), text(NEVER))
    assert out["status"] == "budget" and "tasks__list_tasks was called a 3rd time" in out["budget"]
    assert outcomes(cli, out["turn"]) == ["ok", "ok", "ok", "not run: loop stopped"]


def test_identical_calls_in_one_response_stop_at_the_third_and_the_rest_is_not_run(cli, tmp_path):
    add = call("recall__add_memory", text="same")
    code, out = run(cli, tmp_path, calls(add, add, add, call("recall__search_memories", query="x")), text(NEVER))
    assert out["status"] == "budget" and "budgets.repeat_calls" in out["budget"]
    assert outcomes(cli, out["turn"]) == ["ok", "ok", "not run: loop stopped", "not run: loop stopped"]
    assert [m["text"] for m in cli.json("memories", "list", "--json")] == ["same", "same"]


def test_failed_calls_count_as_repeats_too(cli, tmp_path):
    bad = call("tasks__update_task", id=999, title="x")  # a write that fails each time: no such task
    code, out = run(cli, tmp_path, calls(bad), calls(bad), calls(bad), text(NEVER))
    assert out["status"] == "budget" and out["budget"].startswith("budgets.repeat_calls: tasks__update_task was "
                                                                  "called a 3rd time")
    assert outcomes(cli, out["turn"]) == ["error", "error", "not run: loop stopped"]


def test_numbers_are_compared_by_value_and_booleans_stay_apart(cli, tmp_path):
    """`5` and `5.0` are the same JSON number: the third of 999, 999.0, 999 is the same call a 3rd time."""
    code, out = run(cli, tmp_path, calls(call("tasks__update_task", id=999, title="x")),
                    calls(call("tasks__update_task", id=999.0, title="x")),
                    calls(call("tasks__update_task", id=999, title="x")), text(NEVER))
    assert out["status"] == "budget" and out["budget"].startswith("budgets.repeat_calls: tasks__update_task was "
                                                                  "called a 3rd time")
    # `true` is not `1`, and `false` is not `0`: two pairs, no third of either.
    code, out = run(cli, tmp_path, calls(call("recall__search_memories", query="q", limit=1)),
                    calls(call("recall__search_memories", query="q", limit=True)),
                    calls(call("recall__search_memories", query="q", limit=1.0)),
                    calls(call("recall__search_memories", query="q", limit=False)),
                    calls(call("recall__search_memories", query="q", limit=0)), text("done"))
    assert out["status"] == "done", out.get("budget")


def test_different_arguments_are_different_calls(cli, tmp_path):
    a, b = call("recall__search_memories", query="a"), call("recall__search_memories", query="b")
    code, out = run(cli, tmp_path, calls(a), calls(b), calls(a), calls(b), text("done"))
    assert code == 0 and out["status"] == "done"


def test_repeat_calls_zero_turns_the_rule_off(cli, tmp_path):
    search = call("recall__add_memory", text="milk")
    code, out = run(cli, tmp_path, calls(search), calls(search), calls(search), calls(search), text("done"),
                    env={"PALUI_BUDGETS__REPEAT_CALLS": "0"})
    assert code == 0 and out["status"] == "done" and out["answer"] == "done"


def test_four_refused_calls_in_a_row_end_the_turn(cli, tmp_path):
    code, out = run(cli, tmp_path, calls(*[call("nope__tool", n=i) for i in range(3)]),
                    calls(call("nope__tool", n=3), call("recall__search_memories", query="x")), text(ANSWER),
                    text(NEVER))
    assert out["status"] == "budget"
    assert out["budget"] == "budgets.error_streak: 4 calls in a row were refused or failed (the last: nope__tool)"
    assert outcomes(cli, out["turn"]) == ["refused"] * 4 + ["not run: loop stopped"]
    assert out["usage"]["steps"] == 3 and out["answer"] == ANSWER  # the third step: the last, without tools


def test_a_success_resets_the_streak(cli, tmp_path):
    fail = [call("nope__tool", n=i) for i in range(6)]
    ok = call("recall__search_memories", query="x")
    code, out = run(cli, tmp_path, calls(*fail[:3]), calls(ok), calls(*fail[3:]), text("done"))
    assert code == 0 and out["status"] == "done"


def test_a_denial_neither_counts_in_nor_breaks_the_streak_across_the_pause(cli, tmp_path):
    forget = call("recall__forget_memory", id=900)  # destructive: asks in chat
    model = write_script(tmp_path / "s.json", calls(call("nope__a", n=1), call("nope__a", n=2), call("nope__a", n=3)),
                         calls(forget), calls(call("nope__a", n=4)), text(ANSWER), text(NEVER))
    out = json.loads(cli("run", "--json", "--model", model, "go").stdout)
    assert out["status"] == "awaiting_approval"
    aid = out["pending_approvals"][0]["id"]
    r = cli("approvals", "deny", aid, "--json")
    done = json.loads(r.stdout)
    # three refusals, the person's denial (left out), a fourth refusal: the streak ends the tool use
    assert done["status"] == "budget"
    assert done["budget"] == "budgets.error_streak: 4 calls in a row were refused or failed (the last: nope__a)"
    assert outcomes(cli, done["turn"]) == ["refused"] * 3 + ["asked", "denied", "refused"]
    assert done["answer"] == ANSWER


def test_error_streak_zero_turns_the_rule_off(cli, tmp_path):
    code, out = run(cli, tmp_path, calls(*[call("nope__tool", n=i) for i in range(6)]), text("done"),
                    env={"PALUI_BUDGETS__ERROR_STREAK": "0"})
    assert out["status"] == "done"


@pytest.mark.parametrize("value,ok", [("0", True), ("5", True), ("-1", False), ("x", False)])
def test_the_budget_keys_take_zero_or_more(cli, value, ok):
    r = cli("status", env={"PALUI_BUDGETS__REPEAT_CALLS": value})
    assert (r.returncode == 0) is ok, r.stderr
    if not ok:
        assert "budgets.repeat_calls" in r.stderr
