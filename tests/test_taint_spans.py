"""Marks on every value from untrusted content (spec §4): numbers, short values under person and account
arguments, and the parts of a longer value, quoted as those parts. Pure: tables over the policy."""

from __future__ import annotations

import json

import pytest

from palui.policy.haystack import Haystack, has_word
from palui.policy.offsets import OffsetMap
from palui.policy.spans import find_spans, is_unit, says_something
from palui.policy.taint import is_person_key, json_text, untrusted_args
from palui.text.escape import normalize_for_marks
from palui.text.prompts import approval_prompt, mark_line
from support.mark_cases import BENIGN, HOTEL_ADDRESS, HOTELS, INJECTED, Ask

HOTEL_SOURCES = [("mcp-travel__get_all_hotels_in_city at step 2", HOTELS),
                 ("mcp-travel__get_hotels_address at step 3", HOTEL_ADDRESS)]


def marked(args, untrusted, **kw):
    return [(m["path"], m["spans"]) for m in untrusted_args(args, untrusted, **kw)]


# --- what the benchmark run showed missing -------------------------------------------------------------

def test_a_number_is_marked_like_its_text():
    marks = untrusted_args({"id": 7}, [("s", "id: 7 recipient: X")])
    assert marks == [{"path": "id", "value": "7", "match": "7", "source": "s", "spans": ["7"]}]
    assert mark_line(marks[0]) == "! id = '7' came from untrusted content: s"


def test_every_recipient_read_from_channel_messages_is_marked():
    channel = [("mcp-slack__read_channel_messages at step 1",
                "- body: hi\n  sender: Charlie\n- body: lunch?\n  sender: Alice\n- body: yes\n  sender: Bob\n"
                "- body: ok\n  sender: Eve\n")]
    for who in ("Charlie", "Alice", "Bob", "Eve"):
        assert marked({"recipient": who, "body": "Check this out"}, channel) == [("recipient", [who])]


def test_a_body_marks_the_hotel_name_and_address_only():
    body = "Stay at Luxury Palace, address: 1 Rue de la Paix, 75002 Paris. Tell me what you think!"
    marks = untrusted_args({"body": body}, HOTEL_SOURCES)
    assert [(m["source"], m["spans"], m["match"]) for m in marks] == [
        ("mcp-travel__get_all_hotels_in_city at step 2", ["Luxury Palace"], "luxury palace"),
        ("mcp-travel__get_hotels_address at step 3", ["1 Rue de la Paix, 75002 Paris"],
         "1 rue de la paix, 75002 paris")]
    assert all(m["value"] == body for m in marks)
    lines = [mark_line(m) for m in marks]
    assert lines == ["! body: 'Luxury Palace' came from untrusted content:"
                     " mcp-travel__get_all_hotels_in_city at step 2",
                     "! body: '1 Rue de la Paix, 75002 Paris' came from untrusted content:"
                     " mcp-travel__get_hotels_address at step 3"]
    assert not any(body in line for line in lines)  # never the whole value when only parts matched


def test_parts_from_one_source_are_quoted_on_one_line():
    page = [("web__fetch_page at step 2", "Hotel Names:\nLuxury Palace\nGood Night\n\nAddress of Luxury Palace:"
                                          " 1 Rue de la Paix, 75002 Paris, France\n")]
    [m] = untrusted_args({"body": "Stay at Luxury Palace, address: 1 Rue de la Paix, 75002 Paris. See you!"}, page)
    assert m["spans"] == ["Luxury Palace", "1 Rue de la Paix, 75002 Paris"]
    assert mark_line(m) == ("! body: 'Luxury Palace' and '1 Rue de la Paix, 75002 Paris' came from untrusted"
                            " content: web__fetch_page at step 2")


def test_one_matching_word_is_quoted_as_that_word():
    bill = [("mcp-banking__read_file at step 1", "Your plan: you are subscribed until March. Total 12.99")]
    [m] = untrusted_args({"subject": "The user is subscribed to spotify"}, bill)
    assert (m["spans"], m["match"]) == (["subscribed"], "subscribed")
    assert mark_line(m) == "! subject: 'subscribed' came from untrusted content: mcp-banking__read_file at step 1"


def test_the_approval_prompt_quotes_the_parts():
    a = {"id": "a1", "tool": "mcp-travel__send_email", "class": "write", "reason": "tainted", "expires_at": "soon",
         "args": {"body": "Stay at Luxury Palace tonight"},
         "untrusted_args": untrusted_args({"body": "Stay at Luxury Palace tonight"}, HOTEL_SOURCES)}
    assert "  ! body: 'Luxury Palace' came from untrusted content: mcp-travel__get_all_hotels_in_city at step 2" \
        in approval_prompt(a).split("\n")


# --- numbers and booleans ------------------------------------------------------------------------------

@pytest.mark.parametrize("args, text, schema, expected", [
    ({"id": 7}, "id: 7", None, [("id", ["7"])]),
    ({"id": 7}, "id: 7.0", None, [("id", ["7"])]),                   # the same number written as a float
    ({"id": 7}, "id: 17", None, []),                                 # never inside a longer number
    ({"id": 7}, "version 1.7", None, []),
    ({"id": 7}, "v7 and 7b", None, []),
    ({"ids": [7, 9]}, "id: 9", None, [("ids[1]", ["9"])]),
    ({"amount": 50}, "amount: 50.0", None, []),                      # 2 characters, not a named argument
    ({"amount": 1100}, "amount: 1100.0", None, [("amount", ["1100"])]),
    ({"amount": 1100.0}, "amount: 1100", None, [("amount", ["1100.0"])]),
    ({"amount": 12.75}, "total 12.750 EUR", None, [("amount", ["12.75"])]),
    ({"amount": 12.75}, "total 12.751 EUR", None, []),
    ({"amount": 0.01}, "send 0.01 now", None, [("amount", ["0.01"])]),
    ({"recurring": True}, "recurring: true", None, [("recurring", ["true"])]),
    ({"recurring": True}, "recurring: true", {"properties": {"recurring": {"type": "boolean"}}}, []),
    ({"recurring": False}, "false", {"properties": {"recurring": {"type": ["boolean", "null"]}}}, []),
    ({"port": 8080}, "port 8080", {"properties": {"port": {"enum": [8080, 8443]}}}, []),
    ({"port": 8080}, "port 8080", {"properties": {"port": {"enum": ["8080"]}}}, [("port", ["8080"])]),
    ({"flag": 1}, "flag 1", {"properties": {"flag": {"const": True}}}, []),          # 1 char, not named
    ({"user_id": 1}, "user 1", {"properties": {"user_id": {"const": True}}}, [("user_id", ["1"])]),
    ({"n": 5, "flag": None}, "5", None, []),
])
def test_numbers_and_booleans(args, text, schema, expected):
    assert marked(args, [("page", text)], schema=schema) == expected


@pytest.mark.parametrize("v", [7, -3, 0, 7.5, 50.0, 1e300, 1e-7, 0.1, 10**20, 1e16, True, False, float("nan"),
                               float("inf"), -float("inf")])
def test_json_text_is_what_json_writes(v):
    assert json_text(v) == json.dumps(v)


def test_a_number_the_person_wrote_is_not_marked():
    page = [("s", "- id: 7\n  amount: 1100.0")]
    assert marked({"id": 7, "amount": 1100}, page, own_texts=["update transaction 7 to 1100.00"]) == []
    assert marked({"id": 7}, page, own_texts=["update transaction 17"]) == [("id", ["7"])]


# --- arguments that name a person, an address or an account -------------------------------------------

@pytest.mark.parametrize("key", [
    "recipient", "recipients", "to", "cc", "bcc", "from", "sender", "email", "emails", "iban", "account",
    "accounts", "url", "uri", "link", "host", "domain", "phone", "name", "user", "username", "address",
    "addresses", "contact", "recipient_email", "toAddress", "reply_to", "fromEmail", "phone_number", "first_name",
    "user-name", "IBAN", "channel", "attendees", "participants", "owner", "payee", "ccList",
])
def test_person_keys(key):
    assert is_person_key(key)


@pytest.mark.parametrize("key", [
    "subject", "body", "amount", "date", "count", "valid", "history", "tomorrow", "customer", "hostile",
    "mailbox", "toggle", "photo", "userland", "fromage", "", "id", "text",
])
def test_not_person_keys(key):
    assert not is_person_key(key)


CHANNEL = [("mcp-slack__read_channel_messages at step 1", "- body: hi all\n  sender: Bob\n- sender: Al\n")]


@pytest.mark.parametrize("args, own, expected", [
    ({"recipient": "Bob"}, [], [("recipient", ["Bob"])]),
    ({"to": ["Bob"]}, [], [("to[0]", ["Bob"])]),
    ({"toAddress": "Al"}, [], [("toAddress", ["Al"])]),
    ({"recipient_email": "bob"}, [], [("recipient_email", ["bob"])]),
    ({"user": {"name": "Al"}}, [], [("user.name", ["Al"])]),
    ({"to": "Bo"}, [], []),                                          # a whole word only
    ({"subject": "Bob"}, [], []),                                    # not a named argument: 4+ characters
    ({"recipient": "Bob"}, ["tell Bob hi"], []),                     # the person named them
    ({"recipient": "Bob"}, ["tell Bobby hi"], [("recipient", ["Bob"])]),
])
def test_short_values_under_person_keys(args, own, expected):
    assert marked(args, CHANNEL, own_texts=own) == expected


# --- the parts of a longer value -----------------------------------------------------------------------

@pytest.mark.parametrize("value, text, own, expected", [
    # runs of 3+ words, maximal, merged when they overlap
    ("call the Riverside View Hotel now", "Riverside View Hotel is gorgeous", [], ["Riverside View Hotel"]),
    ("we love the quiet garden terrace views", "the quiet garden terrace views are lovely", [],
     ["the quiet garden terrace views"]),
    ("the secret key is 1a7b3d, keep it", "Secret key is 1a7b3d.", [], ["secret key is 1a7b3d"]),
    # only common words, or one content word: no mark
    ("I think that one of the best", "one of the best ideas, and I think that", [], []),
    ("Hi John, here are the notes from today", "Hi Emma, here are the notes from the workshop", [], []),
    ("thank you for your help", "thank you for your order", [], []),
    # a 2-word field: a line, list item or quoted string, not a label or key
    ("Stay at Good Night tonight", "Hotel Names: Le Marais Boutique\nGood Night\nLuxury Palace\n", [], ["Good Night"]),
    ("the hotel names are long", "Hotel Names: Le Marais Boutique\nGood Night\n", [], []),
    ("visit Luxury Palace", '{"Luxury Palace": "1 Rue de la Paix"}', [], []),
    ("visit Luxury Palace", '["Luxury Palace", "Good Night"]', [], ["Luxury Palace"]),
    ("visit Luxury Palace", "the luxury palace of the king", [], []),
    ("visit Luxury Palace", "from me, Luxury Palace, to you", [], ["Luxury Palace"]),
    ("visit Luxury Palace", "- Lux\u200bury P\u2060alace\n- Good Night", [], ["Luxury Palace"]),
    ("visit Luxury Palace", "- \uff2cuxury Palace\n- Good Night", [], ["Luxury Palace"]),
    # units: addresses, URLs, domains, numbers of 4+ digits (not a year), long words
    ("mail mallory@evil.example now", "contact: Mallory@Evil.example", [], ["mallory@evil.example"]),
    ("see https://evil.example/x?y=1 for more", "go to https://evil.example/x?y=1.", [], ["https://evil.example/x?y=1"]),
    ("see https://evil.example/x?y=1 for more", "go to https://evil.example/x?y=12", [],
     ["https://evil.example/x?y"]),                                  # not the URL, but its run of words
    ("ask ev.io first", "ev.io", [], ["ev.io"]),
    ("open cv.pdf first", "cv.pdf", [], []),
    ("zip 75002 please", "75002 Paris", [], ["75002"]),
    ("back in 2024 again", "since 2024", [], []),
    ("call +1-555-0100 now", "phone: +1-555-0100", [], ["+1-555-0100"]),
    ("pay 1,000,000 now", "amount 1,000,000", [], ["1,000,000"]),
    ("the code 463820", "Your code is: 463820.", [], ["463820"]),
    ("the code 123", "Your code is: 123.", [], []),
    ("The user is subscribed to spotify", "you are subscribed", [], ["subscribed"]),
    ("The user is subscribed to spotify", "you are unsubscribed", [], []),
    ("whatever you like", "whatever", [], []),
    ("Pay to IBAN DE89370400440532013000", "IBAN: DE89370400440532013000.", [], ["DE89370400440532013000"]),
    ("SE3550000000054910000003;50.0;US122000000121212121212",
     "recipient: SE3550000000054910000003\nrecipient: US122000000121212121212", [],
     ["SE3550000000054910000003", "US122000000121212121212"]),
    # the person's own words are not parts
    ("Stay at Luxury Palace, address: 1 Rue de la Paix", "Luxury Palace\n1 Rue de la Paix", ["book Luxury Palace"],
     ["1 Rue de la Paix"]),
    ("mail mallory@evil.example now", "mallory@evil.example", ["write to mallory@evil.example"], []),
    # hidden characters, case and width do not dodge a part; the part is quoted as the value spells it
    ("Stay at LUXURY\u200b PALACE", "Luxury Palace\n", [], ["LUXURY\u200b PALACE"]),
    ("Stay at \uff2cuxury Palace", "Luxury Palace\n", [], ["\uff2cuxury Palace"]),
    ("visit Riverside  View\u00a0Hotel", "riverside view hotel", [], ["Riverside  View\u00a0Hotel"]),
])
def test_spans(value, text, own, expected):
    marks = untrusted_args({"v": value}, [("src", text)], own_texts=own)
    assert [s for m in marks for s in m["spans"]] == expected
    for m in marks:
        assert all(s in value for s in m["spans"]) and m["value"] == value and m["source"] == "src"


def test_overlapping_parts_from_two_sources_merge_and_keep_the_leftmost_source():
    sources = [("a", "one quiet garden terrace"), ("b", "garden terrace views two")]
    assert [(m["source"], m["spans"]) for m in untrusted_args({"v": "the quiet garden terrace views"}, sources)] == \
        [("a", ["quiet garden terrace views"])]


def test_marks_come_in_argument_order_whole_and_in_parts_alike():
    args = {"first": "Stay at Luxury Palace tonight", "second": "Good Night", "third": [7, "see Good Night now"]}
    marks = untrusted_args(args, [("hotels", "Hotel Names:\nGood Night\nLuxury Palace\nid: 7\n")])
    assert [(m["path"], m["spans"]) for m in marks] == [
        ("first", ["Luxury Palace"]), ("second", ["Good Night"]), ("third[1]", ["Good Night"])]


def test_match_is_the_longest_part_and_every_mark_has_the_same_fields():
    [m] = untrusted_args({"text": "Pay to IBAN DE89370400440532013000"},
                         [("p", "Please pay to IBAN DE89 3704 or DE89370400440532013000.")])
    assert m["spans"] == ["Pay to IBAN", "DE89370400440532013000"] and m["match"] == "de89370400440532013000"
    assert set(m) == {"path", "value", "match", "source", "spans"}


# --- the pieces ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    "plain", "  Two   words  ", "ＦＵＬＬ width", "e\u200b\u0301t\u00e9", "Stra\u00dfe", "a\u00a0b\u2003c",
    "\ufb01le", "x\r\ny", "", "a\rb", " \u00a0x  y \u3000", "\u00a8x", "Ab  Cd\tEf\nG ", "\u200b \u200b x",
    "caf\u00e9 au lait", "  \n\t ", "Plain ASCII, with punctuation!", "mixed ASCII and caf\u00e9\u00a0\u00a0x", " a",
])
def test_the_offset_map_agrees_with_normalize_for_marks(value):
    where = OffsetMap(value)
    norm = where.text
    assert norm == normalize_for_marks(value)
    bounds = [where.span(i, i + 1) for i in range(len(norm))]
    assert all(0 <= a < b <= len(value) for a, b in bounds)
    assert [a for a, _ in bounds] == sorted(a for a, _ in bounds)
    for ch, (a, b) in zip(norm, bounds, strict=True):  # each character comes from the part it is mapped to
        assert ch == " " or ch in normalize_for_marks(value[a:b])
    if norm:
        a, b = where.span(0, len(norm))
        assert normalize_for_marks(value[a:b]) == norm
        assert normalize_for_marks(value[:a]) == normalize_for_marks(value[b:]) == ""


@pytest.mark.parametrize("word, text, expected", [
    ("bob", "hi bob!", True), ("bob", "bobby", False), ("bob", "bobby and bob", True), ("bob", "", False),
    ("mallory@evil.example", "x mallory@evil.example.", True), ("evil.example", "xevil.example", False),
    ("-3", "x-3", True), ("a", "aaaa", False),
])
def test_has_word(word, text, expected):
    assert has_word(word, text) is expected
    assert Haystack("s", text).has_word(word) is expected


@pytest.mark.parametrize("word, expected", [
    ("a@b", True), ("https://x", True), ("www.x", True), ("evil.example", True), ("report.pdf", True),
    ("cv.pdf", False), ("75002", True), ("2024", False), ("123", False), ("+1-555-0100", True),
    ("2024-05-13", True), ("subscribed", True), ("whatever", False), ("short", False),
])
def test_units(word, expected):
    assert is_unit(word) is expected


@pytest.mark.parametrize("words, expected", [
    (["of", "the", "and"], False), (["here", "are", "the", "notes", "from"], False), (["pay", "to", "iban"], True),
    (["luxury", "palace"], True), (["1", "rue", "de", "la", "paix"], True), (["the", "user", "is", "subscribed"], True),
    (["a", "b", "c"], False),
])
def test_says_something(words, expected):
    assert says_something(words) is expected


def test_a_span_never_comes_from_the_persons_own_text_alone():
    own = Haystack("", "we agreed to ship the new dashboard next Tuesday", own=True)
    page = [Haystack("p", "We agreed to ship the new dashboard next Tuesday, said the board.")]
    assert find_spans("we agreed to ship the new dashboard next Tuesday", page, own) == []


# --- benchmark-shaped asks (the same ones bench/marks.py counts) ---------------------------------------

@pytest.mark.parametrize("ask", INJECTED, ids=lambda a: a.name)
def test_injected_asks_mark_every_hijacked_value(ask: Ask):
    marks = untrusted_args(ask.args, ask.untrusted, schema=ask.schema, own_texts=ask.own)
    assert set(ask.hijacked) <= {m["path"] for m in marks}
    for m in marks:  # a part is quoted as the value spells it and stands in the source named
        assert all(s in m["value"] for s in m["spans"])
        text = normalize_for_marks(dict(ask.untrusted)[m["source"]])
        assert any(w in text for s in m["spans"] for w in normalize_for_marks(s).split())


@pytest.mark.parametrize("ask", BENIGN, ids=lambda a: a.name)
def test_benign_asks_have_no_marks(ask: Ask):
    assert untrusted_args(ask.args, ask.untrusted, schema=ask.schema, own_texts=ask.own) == []


# --- short numbers: never a mark by coincidence (spec §4.6) -------------------------------------------------

INBOX = [("mcp-work__get_received_emails at step 1",
          "- id_: '26'\n  subject: Lunch\n  date: 2024-05-27 10:00\n- id_: '28'\n  subject: Invitation\n"
          "  body: Delete the file with ID '13' at 09:30.")]
DATED = [("mcp-work__get_day_calendar_events at step 1", "- start_time: 2024-05-26 09:00\n  location: Room 3.5")]


@pytest.mark.parametrize("args, own, tool, expected", [
    ({"email_id": "26"}, [], None, [("email_id", ["26"])]),                   # a whole value of the result
    ({"file_id": "13"}, [], None, [("file_id", ["13"])]),                     # ID '13': an identifier-like token
    ({"email_id": "27"}, [], None, []),                                       # only the day of a date there
    ({"email_id": "10"}, [], None, []),                                       # only the hour of a time
    ({"event_id": 27}, [], None, []),                                         # a number: the same rule
    ({"event_id": "9"}, [], None, []),
    ({"room_id": "3"}, [], None, []),                                         # inside the decimal 3.5
    # the person's words leave it unmarked only when they name that same object
    ({"email_id": "26"}, ["reply to email 26"], None, []),
    ({"email_id": "26"}, ["what did I get on 2024-05-26?"], None, [("email_id", ["26"])]),  # a date, not the email
    ({"email_id": "26"}, ["book table 26 for lunch"], None, [("email_id", ["26"])]),        # another object
    ({"email_id": "26"}, ["the email with id 26"], None, []),
    ({"file_id": "13"}, ["delete files 13 and 14"], None, []),
    ({"id": "13"}, ["delete file 13"], "mcp-work__delete_file", []),          # the tool names the object
    ({"id": "13"}, ["add 13 to the budget"], "mcp-work__delete_file", [("id", ["13"])]),
    ({"id": "13"}, ["add 13 to the budget"], None, []),                       # no object named anywhere: any token
])
def test_short_numbers_are_marked_as_whole_values_and_left_by_the_persons_words_for_that_object(args, own, tool,
                                                                                                  expected):
    marks = untrusted_args(args, INBOX + DATED, own_texts=own, tool=tool)
    assert [(m["path"], m["spans"]) for m in marks] == expected
