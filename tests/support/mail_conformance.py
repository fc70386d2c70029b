"""The email channel's rig for the channel conformance suite (tests/support/channel_rig.py's interface):
:class:`support.mail_rig.MailRig` (the session's dovecot, aiosmtpd in the test, a real ``palui serve``)
behind the suite's words. Registered as ``RIGS["email"]`` in tests/support/conformance_rigs.py, which exports
the session's dovecot for it.

How email says what the suite asks: a message Palui showed is a mail to the person (its text the body,
decoded; its ref its ``Message-ID``); an "edit" is the outcome mail Palui sends in an approval mail's thread
(``In-Reply-To`` the approval mail: its ref is that mail's); an answer is the person's reply to the approval
mail's own address, a forged one a reply to an address Palui never made, a replay the same reply sent again
as a new mail; what Palui "told" about a mail is its reply in that mail's thread. Mail has no edits and
no mentions; the stranger writes from another domain that passes its own checks.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

from support.channel_rig import Answer, ChannelRig, Shown
from support.mail_rig import PERSON, STRANGER, MailRig, body

FORWARD = "fyi\n\n---------- Forwarded message ---------\nFrom: Mallory <{who}>\nSubject: invoice\n\n{text}\n"


class EmailConformanceRig(ChannelRig):
    """The email channel under the conformance suite (see the module docstring)."""

    kind = "email"
    title = "Email"
    exactly_once = False  # a fixed Message-ID per part: at most the part in flight at a crash is sent again
    edits = False
    stranger_id = STRANGER
    stranger_can_answer = True  # anyone who learnt the reply address can write to it

    def __init__(self, home: Path, request: Any, process: bool = False, toml: str = "") -> None:
        super().__init__(home, toml)
        self.mail = MailRig(home, request.getfixturevalue("dovecot"), toml=toml, process=process)
        self.svc = self.mail.svc

    def close(self) -> None:
        super().close()
        self.mail.close()

    # -- writing to Palui ----------------------------------------------------------------------------------

    def _sender(self, who: str) -> str:
        return PERSON if who == "person" else STRANGER

    def add_channel(self) -> None:
        self.mail.add_channel()

    def start(self) -> EmailConformanceRig:
        super().start()
        cursor = self.svc.rows("SELECT cursor FROM channel_cursors WHERE channel = 'email'")
        self.mail.validity = int(cursor[0][0].split(":")[0])
        return self

    def pair_with(self, code: str, who: str) -> Any:
        return self.mail.say(f"/pair {code}", sender=self._sender(who))

    def say(self, text: str, who: str = "person") -> Any:
        return self.mail.say(text, sender=self._sender(who))

    def forward(self, text: str) -> Any:
        return self.mail.say(FORWARD.format(who=STRANGER, text=text), subject="Fwd: invoice")

    def edit(self, handle: Any, text: str) -> Any:
        raise NotImplementedError("a mail cannot be edited (edits = False)")

    def processed(self, handle: Any) -> str:
        return self.mail.processed(int(handle))

    # -- what Palui showed ------------------------------------------------------------------------------------

    def mark(self) -> int:
        return self.mail.smtp.mark()

    def _shown(self, m: EmailMessage, approvals: set[str]) -> Shown:
        text = body(m).replace("\r\n", "\n")
        replying = str(m.get("In-Reply-To") or "")
        if replying in approvals:  # the outcome of an approval, in its thread: the suite's edit
            return Shown(text, replying, edited=True, raw=m)
        return Shown(text, str(m["Message-ID"]), raw=m)

    def seen(self, after: int, who: str = "person") -> list[Shown]:
        to = self._sender(who)
        with self.mail.smtp.lock:
            sent = list(self.mail.smtp.sent)
        approvals = {str(m["Message-ID"]) for m in sent if str(m["Subject"]).startswith("Approval a-")}
        return [self._shown(m, approvals) for m in sent[after:] if m["To"].addresses[0].addr_spec == to]

    def answer(self, shown: Shown, approve: Answer, who: str = "person") -> Any:
        word = {True: "approve", False: "deny", "always": "always", "denystop": "stop"}[approve]
        return self.mail.reply(shown.raw, word, sender=self._sender(who))

    def forge(self, shown: Shown, approve: bool) -> Any:
        local, _, domain = self.mail.address.partition("@")
        return self.mail.reply(shown.raw, "approve" if approve else "deny", address=f"{local}+a-{'a' * 26}@{domain}")

    def replay(self, handle: Any) -> Any:
        again = self.mail.delivered[int(handle)]
        del again["Message-ID"]
        again["Message-ID"] = make_msgid(domain="example.org")
        return self.mail.deliver(again)

    def told(self, handle: Any) -> str:
        """Palui's reply to that mail: in its thread (``In-Reply-To`` its ``Message-ID``)."""
        mid = str(self.mail.delivered[int(handle)]["Message-ID"])
        return self.wait_shown(lambda s: str(s.raw.get("In-Reply-To") or "") == mid and not s.edited,
                               self.mail.marks[int(handle)]).text

    def pings(self, shown: Shown) -> list[str]:
        m = shown.raw
        return [str(a) for h in ("Cc", "Bcc") for a in (m.get_all(h) or [])] + (
            [] if m["To"].addresses[0].addr_spec == PERSON else [str(m["To"])])

    # -- the platform's faults ------------------------------------------------------------------------------

    def down(self) -> None:
        self.mail.smtp.stop()

    def up(self) -> None:
        self.mail.smtp.start()

    def revoke_token(self) -> None:
        """The provider takes a new password: both servers refuse the old one, and dovecot, restarted, ends
        the session Palui is logged in with."""
        self.new_password = self.mail.password + "-renewed"
        self.mail.dovecot.set_password(self.mail.address, self.new_password)
        self.mail.smtp.password = self.new_password
        self.mail.dovecot.stop()
        self.mail.dovecot.start()

    def renew_token(self) -> None:
        secret = self.home / "email-password"
        secret.write_text(self.new_password)
        r = self.cli(*self.mail.add_args(), "--password-file", str(secret))
        assert r.returncode == 0, r.stderr
