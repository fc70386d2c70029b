"""Email test rig: a real IMAP server (Debian's dovecot, one per test session), an SMTP server in the test
process (aiosmtpd), and a real ``palui serve`` whose email channel was added through the CLI.

- **dovecot** runs on 127.0.0.1 from a throw-away configuration (no system config, no root: when the tests
  run as root it runs as ``nobody``), with a passwd-file of users added per test (each test its own mailbox).
  ``.ci/run`` installs it (``dovecot-imapd``); without it the email tests are skipped with the reason, except
  under CI, where they fail.
- **The receiving side** is the test: :meth:`MailRig.deliver` puts a mail into Palui's mailbox with IMAP
  ``APPEND``, after adding the ``Authentication-Results`` header the receiving server would write on top
  (authserv-id :data:`AUTHSERV`; ``auth="pass"`` for the person's own mail, ``"fail"``/``"none"`` for a forged
  one). A test may add headers of its own above or below it (a forged header of another id).
- **Sending**: Palui's SMTP server is an aiosmtpd ``Controller`` on 127.0.0.1 that checks Palui's login
  and records every mail (:attr:`MailRig.sent`); it can refuse logins or stop (an outage).
"""

from __future__ import annotations

import email
import email.policy
import imaplib
import itertools
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import format_datetime, localtime, make_msgid
from pathlib import Path
from typing import Any

import pytest

from support import tcp
from support.inprocess import palui
from support.live_service import LiveService, wait_for

AUTHSERV = "mx.test.example"
PERSON = "alice@example.org"
STRANGER = "mallory@evil.example"
_numbers = itertools.count(1)


def free_port() -> int:
    return tcp.free_port()


def dovecot_binary() -> str | None:
    return shutil.which("dovecot") or (os.path.exists("/usr/sbin/dovecot") and "/usr/sbin/dovecot") or None


class Dovecot:
    """One dovecot on 127.0.0.1:``port`` with a throw-away config in ``root`` (see the module docstring)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="palui-dovecot-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        as_root = os.geteuid() == 0
        user = pwd.getpwnam("nobody") if as_root else pwd.getpwuid(os.geteuid())
        self.uid, self.gid, self.user = user.pw_uid, user.pw_gid, user.pw_name
        import grp

        self.group = grp.getgrgid(self.gid).gr_name
        for d in ("run", "state", "mail"):
            (self.root / d).mkdir()
        (self.root / "passwd").write_text("")
        (self.root / "dovecot.conf").write_text(self._config())
        if as_root:
            for p in [self.root, *self.root.rglob("*")]:
                os.chown(p, self.uid, self.gid)
        os.chmod(self.root, 0o700)

    def _config(self) -> str:
        r = self.root
        return f"""
protocols = imap
listen = 127.0.0.1
base_dir = {r}/run
state_dir = {r}/state
log_path = {r}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {self.user}
default_internal_group = {self.group}
default_login_user = {self.user}
first_valid_uid = 1
mail_location = maildir:{r}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {r}/passwd
}}
userdb {{
  driver = static
  args = uid={self.uid} gid={self.gid} home={r}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service stats {{
  chroot =
}}
"""

    def start(self) -> Dovecot:
        binary = dovecot_binary()
        assert binary
        kwargs: dict[str, Any] = {"user": self.uid, "group": self.gid, "extra_groups": []} if os.geteuid() == 0 else {}
        self.proc = subprocess.Popen([binary, "-F", "-c", str(self.root / "dovecot.conf")], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, **kwargs)

        def answers() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"dovecot exited: {self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    return s.recv(100).startswith(b"* OK")
            except OSError:
                return False

        wait_for(answers, 30, what="dovecot to answer")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def log(self) -> str:
        try:
            return (self.root / "dovecot.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def add_user(self, name: str, password: str) -> None:
        """Add ``name`` or give it a new password (dovecot reads the file again when it changes)."""
        lines = [x for x in (self.root / "passwd").read_text().splitlines() if not x.startswith(f"{name}:")]
        tmp = self.root / "passwd.tmp"
        tmp.write_text("".join(f"{x}\n" for x in [*lines, f"{name}:{{PLAIN}}{password}::::::"]))
        if os.geteuid() == 0:
            os.chown(tmp, self.uid, self.gid)
        # dovecot reads the file again when its mtime changes, in whole seconds: two changes within one second
        # would look like one, so each change moves the mtime a second past the last
        self._mtime = max(time.time(), getattr(self, "_mtime", 0.0) + 1.0)
        os.utime(tmp, (self._mtime, self._mtime))
        os.replace(tmp, self.root / "passwd")
        if self.proc is not None:  # it also looks at most once a second: wait until the new password works
            wait_for(lambda: self._logs_in(name, password), 30, what="dovecot to read its users again")

    def _logs_in(self, user: str, password: str) -> bool:
        try:
            m = imaplib.IMAP4("127.0.0.1", self.port, timeout=30)
        except OSError:
            return False
        try:
            m.login(user, password)
            return True
        except imaplib.IMAP4.error:
            return False
        finally:
            m.shutdown()

    def set_password(self, user: str, password: str) -> None:
        self.add_user(user, password)

    def append(self, user: str, password: str, raw: bytes) -> int:
        """APPEND a mail to ``user``'s INBOX; its UID."""
        m = imaplib.IMAP4("127.0.0.1", self.port, timeout=30)
        try:
            m.login(user, password)
            typ, data = m.append("INBOX", None, None, raw)
            assert typ == "OK", data
            text = data[0].decode() if data and data[0] else ""
            return int(text.split("APPENDUID ")[1].split()[1].rstrip("]"))
        finally:
            m.logout()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def dovecot():
    if dovecot_binary() is None:
        message = "dovecot is not installed (apt-get install dovecot-imapd, as .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    d = Dovecot().start()
    yield d
    d.cleanup()


class SMTPServer:
    """aiosmtpd on 127.0.0.1 in this process: checks the login, records each mail (:attr:`sent`)."""

    def __init__(self, login: str, password: str) -> None:
        self.port = free_port()
        self.login, self.password = login, password
        self.sent: list[EmailMessage] = []
        self.refuse_login = False
        self.lock = threading.Lock()
        self.controller: Any = None

    def start(self) -> SMTPServer:
        """Listen (again, after :meth:`stop`) on :attr:`port`."""
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        server = self

        class Handler:
            async def handle_DATA(self, srv, session, envelope):  # noqa: N802 - aiosmtpd's hook name
                msg = email.message_from_bytes(envelope.original_content or envelope.content,
                                               policy=email.policy.default)
                msg["X-Envelope-To"] = ", ".join(envelope.rcpt_tos)
                with server.lock:
                    server.sent.append(msg)
                return "250 OK"

        def authenticate(srv, session, envelope, mechanism, auth_data):
            ok = (not server.refuse_login and auth_data.login.decode() == server.login
                  and auth_data.password.decode() == server.password)
            return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535 itself

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, authenticator=authenticate,
                                     auth_required=True, auth_require_tls=False)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def mark(self) -> int:
        with self.lock:
            return len(self.sent)

    def wait_for(self, pred: Callable[[EmailMessage], bool], timeout: float = 20, after: int = 0) -> EmailMessage:
        def found():
            with self.lock:
                return next((m for m in self.sent[after:] if pred(m)), None)
        return wait_for(found, timeout, what="a mail from Palui")


def body(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    return part.get_content() if part is not None else ""


class MailRig:
    """``palui serve`` with an email channel for a fresh mailbox on the session's dovecot."""

    def __init__(self, home: Path, dovecot: Dovecot, toml: str = "", process: bool = False) -> None:
        self.home = home
        self.dovecot = dovecot
        n = next(_numbers)
        self.address = f"palui-{n}-{os.getpid()}@palui.example"
        self.password = f"pw-{n}-{os.getpid()}"
        dovecot.add_user(self.address, self.password)
        self.smtp = SMTPServer(self.address, self.password).start()
        self.script = home / "script.json"
        self.set_script({"text": "ok"})
        (home / "palui.toml").write_text(f'model = "script:{self.script}"\n{toml}', encoding="utf-8")
        self.svc = LiveService(home, process=process)
        self.validity = 0
        self.marks: dict[int, int] = {}
        self.delivered: dict[int, EmailMessage] = {}

    def set_script(self, *steps: dict[str, Any]) -> None:
        tmp = self.script.with_suffix(".tmp")
        tmp.write_text(json.dumps({"steps": list(steps)}), encoding="utf-8")
        os.replace(tmp, self.script)

    def cli(self, *args: str, env: dict[str, str] | None = None, process: bool = False
            ) -> subprocess.CompletedProcess:
        return palui(self.home, *args, env=env, timeout=60, process=process)

    def add_args(self) -> list[str]:
        return ["channels", "add", "email", "--address", self.address, "--imap-host", "127.0.0.1", "--imap-port",
                str(self.dovecot.port), "--imap-security", "none", "--smtp-host", "127.0.0.1", "--smtp-port",
                str(self.smtp.port), "--smtp-security", "none", "--authserv-id", AUTHSERV]

    def add_channel(self, password: str | None = None) -> subprocess.CompletedProcess:
        r = self.cli(*self.add_args(), env={"PALUI_EMAIL_PASSWORD": password or self.password})
        assert r.returncode == 0, r.stderr
        assert self.password not in r.stdout + r.stderr
        return r

    def start(self) -> MailRig:
        self.svc.start()
        wait_for(lambda: self.state() in ("unpaired", "connected"), 30, what="the email channel to connect")
        cursor = self.svc.rows("SELECT cursor FROM channel_cursors WHERE channel = 'email'")
        self.validity = int(cursor[0][0].split(":")[0])
        return self

    def stop(self) -> None:
        self.svc.stop()

    def close(self) -> None:
        self.smtp.stop()

    def state(self) -> str:
        rows = self.svc.rows("SELECT state FROM channels WHERE name = 'email'")
        return rows[0][0] if rows else ""

    # -- the person's side ------------------------------------------------------------------------------

    def mail(self, text: str, *, sender: str = PERSON, auth: str = "pass", subject: str = "hello Palui",
             to: str | None = None, in_reply_to: str | None = None, references: str | None = None,
             above: tuple[str, ...] = (), below: tuple[str, ...] = (), html: str | None = None,
             headers: dict[str, str] | None = None, message_id: str | None = None) -> EmailMessage:
        """A mail as the receiving server would store it: ``above`` headers, then the receiving server's own
        ``Authentication-Results`` (``auth``: pass, fail, none, or "" for no header at all), then ``below``."""
        msg = EmailMessage(policy=email.policy.SMTP)
        for h in above:
            name, _, value = h.partition(": ")
            msg[name] = value
        domain = sender.rpartition("@")[2]
        if auth == "pass":
            msg["Authentication-Results"] = (f"{AUTHSERV}; dkim=pass header.d={domain} header.s=s1; "
                                             f"spf=pass smtp.mailfrom={sender}; dmarc=pass header.from={domain}")
        elif auth:
            msg["Authentication-Results"] = (f"{AUTHSERV}; dkim={auth} header.d={domain}; spf=pass "
                                             f"smtp.mailfrom={sender}; dmarc={auth} header.from={domain}")
        for h in below:
            name, _, value = h.partition(": ")
            msg[name] = value
        msg["From"] = sender
        msg["To"] = to or self.address
        msg["Subject"] = subject
        msg["Date"] = format_datetime(localtime())
        msg["Message-ID"] = message_id or make_msgid(domain=domain)
        if in_reply_to:
            msg["In-Reply-To"] = in_reply_to
            msg["References"] = references or in_reply_to
        for k, v in (headers or {}).items():
            msg[k] = v
        if html is not None and not text:
            msg.set_content(html, subtype="html")
        else:
            msg.set_content(text)
            if html is not None:
                msg.add_alternative(html, subtype="html")
        return msg

    def deliver(self, msg: EmailMessage) -> int:
        """Put ``msg`` into Palui's mailbox (the receiving server's delivery); its UID. What Palui had sent by
        then is remembered with it (:attr:`marks`), and the mail itself (:attr:`delivered`)."""
        mark = self.smtp.mark()
        uid = self.dovecot.append(self.address, self.password, msg.as_bytes())
        self.marks[uid], self.delivered[uid] = mark, msg
        return uid

    def say(self, text: str, **kw: Any) -> int:
        return self.deliver(self.mail(text, **kw))

    def reply(self, to: EmailMessage, text: str, *, sender: str = PERSON, auth: str = "pass",
              address: str | None = None) -> int:
        """The person's reply to a mail of Palui's: to its Reply-To (else From), its text quoted under ours."""
        quoted = "\n".join("> " + line for line in body(to).splitlines())
        text = f"{text}\n\nOn {to['Date']}, Palui <{self.address}> wrote:\n{quoted}\n"
        reply_to = address or str(to.get("Reply-To") or to["From"])
        subject = str(to["Subject"])
        msg = self.mail(text, sender=sender, auth=auth, subject=subject if subject.startswith("Re:") else
                        f"Re: {subject}", to=reply_to, in_reply_to=str(to["Message-ID"]))
        return self.deliver(msg)

    def processed(self, uid: int, timeout: float = 20) -> str:
        """Wait until the service recorded the mail; its outcome."""
        key = f"uid:{self.validity}:{uid}"

        def outcome():
            rows = self.svc.rows("SELECT outcome FROM channel_updates WHERE channel = 'email' AND key = ?", (key,))
            return rows[0][0] if rows else None
        return wait_for(outcome, timeout, what=f"mail {key} to be recorded")

    def pair(self) -> None:
        r = self.cli("channels", "pair", "email")
        assert r.returncode == 0, r.stderr
        code = r.stdout.split("pairing code: ")[1].split()[0]
        mark = self.smtp.mark()
        self.say(f"/pair {code}")
        self.smtp.wait_for(lambda m: "paired with" in body(m), after=mark)

    def last_turn(self) -> dict[str, Any]:
        tid = self.svc.rows("SELECT id FROM turns ORDER BY rowid DESC LIMIT 1")[0][0]
        return self.svc.turn(tid)
