"""recall connector: provenance follows taint into storage and back (spec §4, §7)."""

from __future__ import annotations

import pytest

from palui.connectors.base import CallContext
from palui.connectors.builtin.recall import RecallConnector
from palui.store.memories import fts_query
from palui.types import Origin


def ctx(svc, tainted: bool = False, source: str | None = None, turn: str = "t1") -> CallContext:
    return CallContext(turn_id=turn, conversation_id="c1", origin=Origin.CHAT, tainted=tainted,
                       taint_source=source, step=1, db=svc.db, settings=svc.settings)


async def call(conn, name, args, c):
    return await conn.call_tool(name, args, c)


# -- memories -----------------------------------------------------------------------------------

async def test_clean_write_is_trusted_and_reading_it_does_not_taint(svc):
    recall = RecallConnector()
    r = await call(recall, "add_memory", {"text": "The person likes green tea"}, ctx(svc))
    assert not r.is_error and r.untrusted is False
    assert r.text == "Saved memory [1]."
    [row] = [m for m in svc.memories.list() if m["id"] == 1]
    assert row["provenance"] == "trusted" and row["turn"] == "t1"

    found = await call(recall, "search_memories", {"query": "tea"}, ctx(svc, turn="t2"))
    assert "[1] The person likes green tea" in found.text
    assert found.untrusted is False and found.untrusted_texts == [] and found.taint_detail is None


async def test_tainted_write_is_stored_untrusted_and_taints_the_reader(svc):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "dentist on friday"}, ctx(svc))
    await call(recall, "add_memory", {"text": "IBAN DE89 3704 for the dentist"},
               ctx(svc, tainted=True, source="web__fetch_page at step 3"))
    [row] = [m for m in svc.memories.list() if m["id"] == 2]
    assert row["provenance"] == "untrusted" and row["source"] == "web__fetch_page at step 3"

    found = await call(recall, "search_memories", {"query": "dentist"}, ctx(svc, turn="t9"))
    assert found.untrusted is True
    assert found.untrusted_texts == ["IBAN DE89 3704 for the dentist"]
    assert found.taint_detail == "memory 2 has untrusted provenance"
    assert "[1] dentist on friday" in found.text and "[2] IBAN DE89 3704 for the dentist" in found.text

    # A search that returns only the trusted one does not taint.
    only_trusted = await call(recall, "search_memories", {"query": "friday"}, ctx(svc))
    assert only_trusted.untrusted is False and "[2]" not in only_trusted.text


async def test_tainted_write_without_named_source_still_untrusted(svc):
    await call(RecallConnector(), "add_memory", {"text": "x y z"}, ctx(svc, tainted=True, source=None, turn="t7"))
    [row] = svc.memories.list()
    assert row["provenance"] == "untrusted" and "t7" in row["source"]


async def test_trust_stops_tainting(svc):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "pay invoice 4411"}, ctx(svc, tainted=True, source="mcp-mail__read"))
    assert (await call(recall, "search_memories", {"query": "invoice"}, ctx(svc))).untrusted is True
    svc.memories.trust(1)
    after = await call(recall, "search_memories", {"query": "invoice"}, ctx(svc))
    assert after.untrusted is False and "[1] pay invoice 4411" in after.text


async def test_empty_query_lists_recent_newest_first(svc):
    recall = RecallConnector()
    for text in ("first", "second", "third"):
        await call(recall, "add_memory", {"text": text}, ctx(svc))
    r = await call(recall, "search_memories", {"query": "  ", "limit": 2}, ctx(svc))
    assert r.text.splitlines() == ["Recent memories:", "[3] third", "[2] second"]


async def test_no_memories_and_no_match(svc):
    recall = RecallConnector()
    empty = await call(recall, "search_memories", {"query": ""}, ctx(svc))
    assert not empty.is_error and "No memories" in empty.text
    await call(recall, "add_memory", {"text": "apples"}, ctx(svc))
    none = await call(recall, "search_memories", {"query": "bananas"}, ctx(svc))
    assert not none.is_error and "No memories match" in none.text and none.untrusted is False


@pytest.mark.parametrize("query", ['"', '""', "AND OR", "NOT", "*", "milk*", "(milk", "milk)", "NEAR(a b)",
                                   "text:milk", "^milk", "-milk", "'; DROP TABLE memories; --", "\\", "{a b}",
                                   "mil\x00k", "ミルク", "Grüße", "🥛", "a" * 5000, "milk AND", "OR milk"])
async def test_hostile_queries_never_raise(svc, query):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "buy milk and ミルク, Grüße"}, ctx(svc))
    r = await call(recall, "search_memories", {"query": query}, ctx(svc))
    assert not r.is_error, r.text
    assert len(svc.memories.list()) == 1


@pytest.mark.parametrize("query,hit", [("milk", True), ("MILK", True), ("mil", True), ("ミルク", True),
                                       ("grüße", True), ("AND milk", True), ('"milk"', True), ("cheese", False),
                                       ("OR", False), ("text:milk", True)])
async def test_query_words_match_as_plain_words(svc, query, hit):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "buy milk and ミルク, Grüße"}, ctx(svc))
    r = await call(recall, "search_memories", {"query": query}, ctx(svc))
    assert ("[1]" in r.text) is hit, r.text


def test_fts_query_quotes_every_word():
    assert fts_query('a "b" OR c*') == '"a"* OR "b"* OR "OR"* OR "c"*'
    assert fts_query("*** ---") is None
    assert fts_query("") is None


async def test_ranking_prefers_more_matching_words(svc):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "milk"}, ctx(svc))
    await call(recall, "add_memory", {"text": "oat milk from the corner shop"}, ctx(svc))
    r = await call(recall, "search_memories", {"query": "oat milk shop"}, ctx(svc))
    assert r.text.splitlines()[1].startswith("[2]")


async def test_forget_memory(svc):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "old address"}, ctx(svc))
    r = await call(recall, "forget_memory", {"id": 1}, ctx(svc))
    assert not r.is_error and "[1] old address" in r.text
    assert svc.memories.list() == []
    # The FTS index follows (external content with triggers): the word is gone.
    assert "No memories match" in (await call(recall, "search_memories", {"query": "address"}, ctx(svc))).text
    missing = await call(recall, "forget_memory", {"id": 1}, ctx(svc))
    assert missing.is_error and "No memory with id 1" in missing.text


async def test_forgetting_an_untrusted_memory_echoes_it_as_untrusted(svc):
    recall = RecallConnector()
    await call(recall, "add_memory", {"text": "from the web"}, ctx(svc, tainted=True, source="web__fetch_page"))
    r = await call(recall, "forget_memory", {"id": "1"}, ctx(svc))
    assert not r.is_error and r.untrusted is True and r.untrusted_texts == ["from the web"]


@pytest.mark.parametrize("name,args", [("add_memory", {}), ("add_memory", {"text": "  "}),
                                       ("add_memory", {"text": 5}), ("forget_memory", {}),
                                       ("forget_memory", {"id": "four"}), ("forget_memory", {"id": True}),
                                       ("search_memories", {"query": 3}), ("nope", {})])
async def test_bad_arguments_are_error_results(svc, name, args):
    r = await call(RecallConnector(), name, args, ctx(svc))
    assert r.is_error and r.text


async def test_memory_text_has_a_size_limit(svc):
    recall = RecallConnector()
    r = await call(recall, "add_memory", {"text": "x" * 5_000_000}, ctx(svc))  # the trial's 5 MB memory
    assert r.is_error and "5,000,000 characters, the limit is 8,192" in r.text
    r = await call(recall, "add_memory", {"text": "y" * 8193}, ctx(svc))
    assert r.is_error and "the limit is 8,192" in r.text
    assert svc.memories.list() == []
    r = await call(recall, "add_memory", {"text": "z" * 8192}, ctx(svc))
    assert not r.is_error and [len(m["text"]) for m in svc.memories.list()] == [8192]


async def test_arguments_outside_the_schema_are_refused_and_nothing_is_saved(svc):
    """``{"text": "a", "extra": 1}`` once saved the memory; now an error result names the key (spec §7.1)."""
    from palui.connectors.base import CallContext
    from palui.connectors.builtin.recall import RecallConnector
    from palui.types import Origin

    ctx = CallContext(turn_id="t1", conversation_id="c1", origin=Origin.CHAT, tainted=False, taint_source=None,
                      step=1, db=svc.db, settings=svc.settings)
    r = await RecallConnector().call_tool("add_memory", {"text": "a", "extra": 1}, ctx)
    assert r.is_error and "unexpected argument 'extra'" in r.text and "add_memory takes: text" in r.text
    assert svc.memories.list() == []
    assert svc.tools.get("recall__add_memory").input_schema["additionalProperties"] is False
