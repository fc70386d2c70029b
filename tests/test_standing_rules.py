"""The pure rules of standing approvals (spec §5.9, ``palui.policy.standing``): contexts, who may have one, the
constraints made from what the person saw, and whether one answers a call. Tables, and a property: a call with a
mark is never answered, whatever the constraints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palui.policy.standing import answers, constraints_for, context_of, describe, refusal_to_make, within_prefix

MARK = {"path": "to", "value": "x", "match": "x", "source": "web__fetch_page at step 1", "spans": ["x"]}


@pytest.mark.parametrize(("origin", "tainted", "client", "context"), [
    ("chat", False, None, "chat"), ("chat", True, None, "tainted chat"), ("job", False, None, "job"),
    ("job", True, None, "job"), ("gateway", True, "coder", "gateway:coder"), ("gateway", True, None, None),
    ("webhook", True, None, None),
])
def test_the_context_of_a_call(origin, tainted, client, context):
    assert context_of(origin, tainted, client) == context


@pytest.mark.parametrize(("cls", "context", "confirmed", "allowed"), [
    ("write", "tainted chat", False, True), ("write", "job", False, True), ("write", "gateway:coder", False, True),
    ("read", "gateway:coder", False, True), ("write", None, True, False),
    ("destructive", "chat", False, False), ("destructive", "chat", True, True),
    ("destructive", "tainted chat", True, True), ("destructive", "job", True, False),
    ("destructive", "gateway:coder", True, False),
])
def test_who_may_have_one(cls, context, confirmed, allowed):
    assert (refusal_to_make(cls, context, confirmed) is None) == allowed


def test_every_argument_is_pinned_unless_widened_and_a_marked_one_never_is():
    args = {"to": "bob@example.com", "body": "hi", "n": 3, "path": "/notes/a.md"}
    assert constraints_for(args, {}, []) == {k: {"pin": v} for k, v in args.items()}
    c = constraints_for(args, {"body": "any", "n": "one-of:3,4", "path": "prefix:/notes/"}, [])
    assert c == {"to": {"pin": "bob@example.com"}, "body": {"any": True}, "n": {"one_of": [3, 4]},
                 "path": {"prefix": "/notes/"}}
    assert describe(c) == "to = 'bob@example.com', body: any, n: one of 3, 4, path: prefix '/notes/'"
    with pytest.raises(ValueError, match="it carried a mark"):
        constraints_for(args, {"to": "any"}, [MARK])
    with pytest.raises(ValueError, match="it carried a mark"):
        constraints_for({"to": ["a", "b"]}, {"to": "any"}, [{**MARK, "path": "to[1]"}])
    for widen, why in (({"cc": "any"}, "no such argument"), ({"n": "one-of:4,5"}, "must list the value you saw"),
                       ({"n": "prefix:3"}, "text argument only"), ({"path": "prefix:/other/"}, "does not start"),
                       ({"body": "everything"}, "a widening is"), ({"n": "one-of:3,x"}, "numbers")):
        with pytest.raises(ValueError, match=why):
            constraints_for(args, widen, [])


@pytest.mark.parametrize(("value", "prefix", "inside"), [
    ("/notes/a.md", "/notes/", True), ("/notes/sub/a.md", "/notes", True), ("/notes", "/notes", True),
    ("/notesother/a", "/notes", False), ("/notes/../secret", "/notes/", False), ("/notes/%2e%2E/x", "/notes/", False),
    ("/notes/..%2fx", "/notes/", False), ("https://ex.com/docs/a", "https://ex.com/docs/", True),
    ("https://ex.com/docs.evil.com/a", "https://ex.com/docs", False), ("/other", "/notes/", False),
])
def test_a_prefix_is_a_path_boundary_never_climbed_out_of(value, prefix, inside):
    assert within_prefix(value, prefix) == inside


def test_a_standing_approval_answers_only_the_calls_it_names():
    c = constraints_for({"to": "bob", "body": "hi", "n": 5}, {"body": "any"}, [])
    assert answers(c, {"to": "bob", "body": "anything else", "n": 5.0}, []) is None  # 5 is 5.0
    assert answers(c, {"to": "alice", "body": "hi", "n": 5}, []) == "to is outside it"
    assert answers(c, {"to": "bob", "body": "hi", "n": True}, []) == "n is outside it"  # true is not 1
    assert answers(c, {"to": "bob", "body": "hi"}, []) is not None  # an argument missing
    assert answers(c, {"to": "bob", "body": "hi", "n": 5, "cc": "eve"}, []) is not None  # one more
    assert answers(c, {"to": "bob", "body": "hi", "n": 5}, [{**MARK, "path": "body"}]) is not None  # a mark


def test_a_rule_of_two_ask_needs_the_address_pinned():
    why = "ask: Rule of Two: fetching an address you did not write (evil.example)"
    wide = constraints_for({"url": "https://evil.example/x", "note": "n"}, {"url": "any"}, [])
    pinned = constraints_for({"url": "https://evil.example/x", "note": "n"}, {"note": "any"}, [])
    args = {"url": "https://evil.example/x", "note": "n"}
    assert answers(wide, args, [], why) is not None and answers(wide, args, []) is None
    assert answers(pinned, {**args, "note": "other"}, [], why) is None
    private = "ask: Rule of Two: sending text from your private stores outside: recall (…)"
    assert answers(pinned, {**args, "note": "other"}, [], private) is not None  # private text: every argument pinned


values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@given(st.dictionaries(st.text(min_size=1, max_size=5), values, min_size=1, max_size=4), st.data())
def test_a_call_with_any_mark_is_never_answered(args, data):
    widen = {k: "any" for k in data.draw(st.lists(st.sampled_from(sorted(args)), unique=True))}
    c = constraints_for(args, widen, [])
    assert answers(c, args, []) is None
    path = data.draw(st.sampled_from(sorted(args)))
    assert answers(c, args, [{**MARK, "path": path}]) is not None
