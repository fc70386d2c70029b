"""The tool budget fills the room left (spec §6.2): connectors the input matches are taken whole, most
relevant first, then the room left goes to the most relevant tools of those that did not fit whole, and
only then to connectors it does not match; what stays out is said in ``tools_left_out``."""

from __future__ import annotations

from palui.connectors.base import ToolSpec
from palui.policy.budget import Candidate, select, stem, tokens
from support.scripts import text, write_script

TRAVEL = [ToolSpec(name=f"{verb}_{thing}", description=f"{verb.title()} {thing} for a trip: hotels, flights, trains.",
                   input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
                   annotations={"readOnlyHint": True})
          for verb in ("search", "book", "cancel", "compare") for thing in
          ("hotels", "flights", "trains", "cars", "tours", "ferries", "rooms")]


def test_a_large_connector_does_not_crowd_out_the_tool_the_message_names(svc, cli, tmp_path):
    """A 28-tool travel connector on: "remember this: I like quiet hotels" matches travel (hotels) and recall
    (remembering). Travel is taken whole; recall (3 tools) does not fit the 2 slots left, so they go to its most
    relevant tools, and the person's memory is not lost from the turn."""
    assert len(TRAVEL) == 28
    svc.tools.register("mcp-travel", TRAVEL, name="travel", kind="mcp")
    svc.tools.set_enabled([t.name for t in svc.tools.list("mcp-travel")], True)
    svc.db.close()
    model = write_script(tmp_path / "s.json", text("Noted."))
    out = cli.json("run", "remember this: I like quiet hotels", "--model", model, "--json")
    assert out["status"] == "done"
    offered = next(e for e in out["events"] if e["type"] == "step")["tools_offered"]
    assert len(offered) == 30  # the budget is used
    assert "recall__add_memory" in offered
    assert all(t.name in offered for t in svc.tools.list("mcp-travel"))  # the most relevant connector, whole
    [left] = [e for e in out["events"] if e["type"] == "tools_left_out"]
    assert left["reason"] == "left out by budgets.tools (30)"
    enabled = {t.name for t in svc.tools.list() if t.enabled}
    assert sorted(left["tools"]) == sorted(enabled - set(offered))
    assert "recall__search_memories" in left["tools"] or "recall__forget_memory" in left["tools"]


def cands(spec: dict[str, int], words: dict[str, str] | None = None) -> list[Candidate]:
    words = words or {}
    return [Candidate(f"{cid}__t{i}", cid, False, f"{cid} t{i} {words.get(cid, 'thing')}")
            for cid, n in spec.items() for i in range(n)]


def test_connectors_the_input_matches_go_whole_then_the_room_left_is_filled_by_their_tools():
    c = cands({"a": 20, "b": 8, "c": 5, "z": 1}, {"a": "weather", "b": "weather rain", "c": "rain"})
    got = select(c, "rain and weather", 30)
    names = [x.name for x in got]
    assert len(got) == 30
    by = {cid: sum(1 for x in got if x.connector == cid) for cid in "abcz"}
    # b and a match best and fit whole (28); c matches but does not fit: its two most relevant tools fill the room,
    # before z, which the input does not match at all.
    assert by == {"a": 20, "b": 8, "c": 2, "z": 0}, by
    assert names == sorted(names)


def test_connectors_the_input_does_not_match_still_use_the_room_left():
    got = select(cands({"a": 12, "b": 12, "c": 12}), "nothing matches", 30)
    by = {cid: sum(1 for x in got if x.connector == cid) for cid in "abc"}
    assert by == {"a": 12, "b": 12, "c": 6}  # ties by connector id, then tool name
    assert select(cands({"a": 12, "b": 12, "c": 12}), "nothing matches", 30) == got  # deterministic


def test_a_connector_larger_than_the_budget_is_still_cut_by_ranking_its_tools():
    c = [Candidate(f"big__t{i}", "big", False, f"big t{i} {'weather' if i % 10 == 0 else 'other'}") for i in range(40)]
    got = select(c + cands({"small": 3}), "weather", 30)
    assert len(got) == 30
    assert {x.name for x in got} >= {"big__t0", "big__t10", "big__t20", "big__t30"}


def test_plurals_and_ing_forms_rank_as_their_stem():
    assert stem("hotels") == "hotel" and stem("memories") == "memory" and stem("remembering") == "remember"
    assert stem("address") == "address" and stem("status") == "status" and stem("bus") == "bus"
    assert tokens("Remembering saved_memories") == ["remember", "sav", "memory"]


def test_everything_fits_nothing_is_ranked():
    c = cands({"a": 10, "b": 10})
    assert select(c, "x", 30) == sorted(c, key=lambda x: (x.connector, x.name))
