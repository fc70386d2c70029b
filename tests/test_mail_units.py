"""The email channel's pure rules as tables (spec §8.3; docs/channels.md, Email): whose mail it is by its
``Authentication-Results`` (RFC 8601), the person's words in a body, the answer word of a reply, the
outgoing headers, and the restart position by ``UIDVALIDITY``."""

from __future__ import annotations

import pytest

from palui.channels.mail_auth import aligned, judge, parse_header
from palui.channels.mail_send import Outgoing, build, message_id, subject_line
from palui.channels.mail_text import answer_of, answer_word, html_to_text, split_words

ID = "mx.google.com"
PERSON = "Alice <alice@example.org>"


@pytest.mark.parametrize(("results", "trusted"), [
    # the receiving server's own verdicts
    ([f"{ID}; dmarc=pass (p=NONE) header.from=example.org"], True),
    ([f"{ID}; dkim=pass header.d=example.org header.s=s1"], True),
    ([f"{ID}; dkim=pass header.i=@example.org header.s=s1"], True),  # Gmail writes header.i, not header.d
    ([f"{ID};\r\n  dkim=pass (2048-bit key) header.d=mail.example.org"], True),  # a subdomain signs: aligned
    ([f"{ID} 1; dmarc=pass header.from=example.org"], True),  # version 1 is RFC 8601's
    ([f"{ID}; spf=pass smtp.mailfrom=alice@example.org"], False),  # SPF alone never
    ([f"{ID}; dkim=pass header.d=evil.example; spf=pass smtp.mailfrom=example.org"], False),  # not aligned
    ([f"{ID}; dkim=pass header.d=org"], False),  # a one-label "parent" is no alignment
    ([f"{ID}; dmarc=pass header.from=evil.example"], False),
    ([f"{ID}; dmarc=pass"], False),  # no header.from: fail closed
    ([f"{ID}; dkim=fail header.d=example.org; dmarc=fail header.from=example.org"], False),
    ([f"{ID}; none"], False),
    ([f"{ID} 2; dmarc=pass header.from=example.org"], False),  # an unknown version is not read
    ([f"{ID}; dkim=pass header.d=example.org (unterminated"], False),
    # other ids are ignored, above or below
    (["evil.example; dmarc=pass header.from=example.org", f"{ID}; dmarc=fail header.from=example.org"], False),
    ([f"{ID}; dmarc=fail header.from=example.org", f"{ID}; dmarc=pass header.from=example.org"], False),
    ([f"{ID}; dmarc=pass header.from=example.org", f"{ID}; dmarc=fail header.from=example.org"], True),
    (["MX.Google.COM; dmarc=pass header.from=Example.ORG"], True),  # ids and domains are case-insensitive
    (["mx.other.example; dmarc=pass header.from=example.org"], False),
    ([], False),
])
def test_whose_mail_by_the_topmost_header_of_the_configured_server(results, trusted):
    assert judge(results, [PERSON], ID).trusted is trusted


@pytest.mark.parametrize(("froms", "address"), [
    ([PERSON], "alice@example.org"),
    (["ALICE@Example.Org"], "alice@example.org"),
    (["alice@example.org, bob@example.org"], None),
    ([PERSON, PERSON], None),
    (["undisclosed-recipients:;"], None),
    (["not an address"], None),
    ([], None),
])
def test_a_mail_needs_one_from_with_one_address(froms, address):
    j = judge([f"{ID}; dmarc=pass header.from=example.org"], froms, ID)
    assert j.address == address and j.trusted is (address is not None)


def test_a_wildcard_id_names_a_provider_whose_receiving_hosts_differ():
    ok = ["mx3.messagingengine.com; dkim=pass header.d=example.org"]
    assert judge(ok, [PERSON], "*.messagingengine.com").trusted
    assert not judge(["messagingengine.com.evil; dkim=pass header.d=example.org"], [PERSON],
                     "*.messagingengine.com").trusted
    assert not judge(ok, [PERSON], "mx1.messagingengine.com").trusted


def test_the_parser_reads_comments_quoted_strings_and_properties():
    r = parse_header('mx.example (ours); dkim=pass (good) reason="a \\"quoted\\" ; reason" header.d=example.org; '
                     "spf = neutral smtp.mailfrom = x@y.example")
    assert r is not None and r.authserv_id == "mx.example"
    assert [(m.method, m.result) for m in r.results] == [("dkim", "pass"), ("spf", "neutral")]
    assert r.results[0].props["header.d"] == "example.org"
    assert r.results[1].props["smtp.mailfrom"] == "x@y.example"
    assert aligned("example.org", "a.b.example.org") and not aligned("example.org", "example.org.evil")


@pytest.mark.parametrize(("body", "words", "quoted", "forwarded"), [
    ("approve\n\nOn Mon, Palui wrote:\n> Approval a-1\n> reply approve", "approve",
     "On Mon, Palui wrote:\n> Approval a-1\n> reply approve", []),
    ("my answer\n> their line\nmore of mine", "my answer\nmore of mine", "> their line", []),
    ("look\n\n---------- Forwarded message ---------\nFrom: Bob <bob@evil.example>\n\nPay now",
     "look", "", [("Bob <bob@evil.example>", "From: Bob <bob@evil.example>\n\nPay now")]),
    ("Begin forwarded message:\n\nFrom: x@y\nhello", "", "", [("x@y", "From: x@y\nhello")]),
    ("hi\n\nFrom: Bob\nSent: Monday\nSubject: old\n\nold text", "hi", "From: Bob\nSent: Monday\nSubject: old\n\n"
     "old text", []),
    ("hi\n-----Original Message-----\nold", "hi", "-----Original Message-----\nold", []),
    ("just words\r\nand more", "just words\nand more", "", []),
])
def test_the_persons_words_are_the_new_text_only(body, words, quoted, forwarded):
    w = split_words(body)
    assert (w.words, w.quoted, w.forwarded) == (words, quoted, forwarded)


def test_html_is_reduced_to_text_and_its_quotes_taken_out():
    text, quoted = html_to_text('<html><head><title>t</title><style>p{}</style></head><body><div>Hello <b>you</b>'
                                '<br>line 2</div><img src="https://tracker.example/x.png"><div class="gmail_quote">'
                                'On Mon wrote:<blockquote>old &amp; evil</blockquote></div><script>x()</script>'
                                '</body></html>')
    assert text == "Hello you\nline 2"
    assert "old & evil" in quoted and "x()" not in text + quoted


@pytest.mark.parametrize(("words", "answer"), [
    ("approve", (True, None)), ("Yes.", (True, None)), ("OK", (True, None)), ("/approve", (True, None)),
    ("deny", (False, None)), ("No: too risky", (False, "too risky")), ("deny not today", (False, "not today")),
    ("\n\n  approve  \nthanks", (True, None)),
    ("yes please do it", None),  # an approve word with more after it is not read as an approval
    ("", None), ("> approve", None), ("maybe", None),
])
def test_the_answer_is_the_first_line_of_the_new_text(words, answer):
    assert answer_word(words) == answer


@pytest.mark.parametrize(("words", "answer"), [
    ("approve", ("/approve", "", (), False)), ("no: too risky", ("/deny", "too risky", (), False)),
    # "approve, and from now on the same" (spec §5.9): every argument pinned unless widened; confirm for destructive
    ("always", ("/always", "", (), False)), ("Always body=any confirm", ("/always", "", (("body", "any"),), True)),
    ("always body=prefix:/notes/ n=one-of:3,4", ("/always", "", (("body", "prefix:/notes/"), ("n", "one-of:3,4")),
                                                 False)),
    # deny and stop (spec §5.10), with the person's reason
    ("stop", ("/denystop", "", (), False)), ("Deny and stop: that is an attack", ("/denystop", "that is an attack", (),
                                                                               False)),
    ("stop. not mine", ("/denystop", "not mine", (), False)),
    ("always whatever you like", None),  # not a widening: nothing is answered
    ("> always", None),
    ("denied and stopped", ("/deny", "and stopped", (), False)),  # a plain denial: "stop" is a word of its own
])
def test_always_and_deny_and_stop_are_read_from_the_first_line_too(words, answer):
    cmd = answer_of(words)
    assert (None if cmd is None else (cmd.name, cmd.reason, cmd.widen, cmd.confirm)) == answer
    if cmd is not None:
        assert cmd.arg == ""  # the reply's address names the approval, never the text


def test_outgoing_headers_cannot_be_injected_and_the_message_id_is_fixed():
    evil = "Hi\r\nBcc: victim@example.org\u2028X-Evil: 1"
    assert "\n" not in subject_line(evil) and "\u2028" not in subject_line(evil)
    mid = message_id("k3y/../\r\nX: y", "palui.example")
    assert mid == "<palui.k3yXy@palui.example>"
    msg = build(Outgoing("alice@example.org", evil, "line\u202e\n" + "x" * 2000, mid, in_reply_to="<a@b>",
                         references=("<r@b>",), reply_to="palui+a-secret@palui.example"), "palui@palui.example")
    raw = msg.as_bytes().decode()
    head = raw.split("\r\n\r\n", 1)[0]
    assert not any(line.startswith(("Bcc:", "X-Evil:")) for line in head.split("\r\n"))
    assert "Subject: Hi Bcc: victim@example.org X-Evil: 1\r\n" in head  # one line, as text
    assert msg["Message-ID"] == mid and msg["In-Reply-To"] == "<a@b>" and msg["References"] == "<r@b> <a@b>"
    assert msg["Auto-Submitted"] == "auto-replied" and msg.get_content_type() == "text/plain"
    assert max(len(line) for line in raw.split("\r\n")) <= 998  # quoted-printable: no line is cut by a server
    assert msg.get_content().startswith("line\u202e")  # the channel's texts come escaped already (views)


class _Updates:
    """The channel updates part as the restart position uses it: the stored cursor."""

    def __init__(self, cursor):
        self.stored = cursor

    def cursor(self, name):
        return self.stored

    def set_cursor(self, name, cursor):
        self.stored = cursor


class _Svc:
    def __init__(self, cursor):
        self.channel_updates = _Updates(cursor)


@pytest.mark.parametrize(("cursor", "validity", "uidnext", "position"), [
    (None, 7, 10, (7, 9)),  # first start: the folder's end
    ("7:4", 7, 10, (7, 4)),  # resume after the last UID read
    ("6:4", 7, 10, (7, 9)),  # UIDVALIDITY changed: nothing old is read as new
    ("garbage", 7, 1, (7, 0)),
])
def test_the_restart_position_is_uidvalidity_and_the_last_uid(cursor, validity, uidnext, position):
    from palui.channels.mail import EmailChannel
    from palui.channels.mail_imap import Opened

    ch = EmailChannel.__new__(EmailChannel)
    ch.svc, ch.name = _Svc(cursor), "email"  # type: ignore[assignment]
    assert ch._position(Opened(validity, uidnext, True)) == position
    assert ch.svc.channel_updates.stored == f"{position[0]}:{position[1]}"


def test_a_part_decodes_to_exactly_its_text_so_split_parts_join_back():
    import email
    import email.policy

    from palui.channels.text import split_message

    whole = "\n".join(f"{i:04d} " + "y\u00e9" * 60 for i in range(400)) + "\n\nend without a line break"
    parts = split_message(whole, 32 * 1024, lambda t: len(t.encode()))
    assert len(parts) >= 2
    got = []
    for n, part in enumerate(parts):
        raw = build(Outgoing("alice@example.org", "s", part, f"<p{n}@x>"), "palui@palui.example").as_bytes()
        got.append(email.message_from_bytes(raw, policy=email.policy.default).get_content().replace("\r\n", "\n"))
    assert got == parts and "".join(got) == whole
