"""Service part: the chat channels the person paired (spec §1 and §8.3).

A channel (Telegram, Matrix, :mod:`palui.channels`) is a front end: it talks to its platform and
calls the service. What must survive a restart lives here, in the ``list`` tables (migration
15): each channel's kind, settings and state, the person it is paired with, the one-time pairing
code, and the senders that were ignored. Secrets (the bot token, the Matrix access token) are in
``<secrets dir>/channel-<name>.json`` (mode 0600), never in the database.

Pairing (docs/decisions/0056-pairing-codes.md): ``pair_code`` makes a code of 8 characters from a
32-letter alphabet, valid 10 minutes, void after 5 wrong tries; only its SHA-256 is stored. The
first account that sends ``/pair CODE`` in a private chat becomes the person on that channel, and
the person is told on the inbox and every channel.

What happens in a channel (updates recorded once, chats, sent messages) is
:mod:`palui.service.channel_updates`; ``/status`` asks this part for its lines (:meth:`ChannelsPart.status_lines`).
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import re
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.config import Settings
from palui.errors import NotFound, UsageError
from palui.service.clock import Clock
from palui.service.notifier import Notifier
from palui.store import outbox
from palui.store.db import Database
from palui.text.display import named
from palui.text.secret_compare import same_secret

if TYPE_CHECKING:
    import sqlite3

    from palui.results import ChannelLine, ChatChannel, PairCode

KINDS = ("telegram", "matrix", "slack", "discord", "email")
#: A channel's name: also its ``answered_via`` word (:data:`palui.service.approvals.VIA`).
NAME = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
#: Crockford's base32: 32 letters and digits, without I, L, O and U (no 1/I, 0/O confusion).
PAIR_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PAIR_LENGTH = 8
PAIR_SECONDS = 600.0
PAIR_TRIES = 5
STRANGER_LOG_SECONDS = 86400.0
INVITE_KEEP_SECONDS = 7 * 86400.0  # an invite waits this long for a pairing code
INVITES_KEPT = 20  # the newest invites kept per channel (a flood of invites cannot grow the table)
TITLES = {"telegram": "Telegram", "matrix": "Matrix", "slack": "Slack", "discord": "Discord",
          "email": "Email"}
#: What a kind's credentials are called when the platform refuses them.
CREDENTIAL = {"telegram": "bot token", "matrix": "access token", "slack": "tokens", "discord": "bot token",
              "email": "password"}
#: The config key that names a channel's account: a new secret must be for the same one.
ACCOUNT = {"telegram": "bot_id", "matrix": "user_id", "slack": "bot_user_id", "discord": "bot_id",
           "email": "address"}

log = logging.getLogger("palui.channels")


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat() if t else None


def _code_hash(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


class ChannelsPart:
    """Adding, listing, pairing and removing chat channels; their state for ``/status``.

    Args:
        db, settings, notifier, clock: the service's shared collaborators (secrets files live in
            ``settings.secrets_dir``; a pairing is told on the person's channel).
    """

    def __init__(self, db: Database, settings: Settings, notifier: Notifier, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.notifier = notifier
        self.clock = clock

    # -- the list -----------------------------------------------------------------------------------

    def add(self, kind: str, name: str | None, secret: dict[str, str],
            config: dict[str, Any]) -> ChatChannel:
        """Store a new channel (unpaired) and its secrets (0600 file). ``name`` defaults to ``kind``.
        Returns :meth:`get`. Raises UsageError (unknown kind, bad or taken name)."""
        if kind not in KINDS:
            raise UsageError(f"unknown channel kind {kind!r} (one of: {', '.join(KINDS)})")
        name = name or kind
        if not NAME.match(name):
            raise UsageError(f"bad channel name {name!r}: lower-case letters, digits and -, starting with a letter")
        if name in ("cli", "web", "api"):
            raise UsageError(f"{name!r} names a front end; choose another channel name")
        if self.db.one("SELECT 1 FROM channels WHERE name = ?", (name,)):
            raise UsageError(f"a channel named {name!r} exists (palui channels remove {name}, or --name)")
        from palui.connectors.mcp.config import write_secrets  # here: `palui status` reads channels only
        write_secrets(self.settings.secrets_dir, f"channel-{name}", secret)
        with self.db.write() as c:
            c.execute("INSERT INTO channels (name, kind, config_json, state, state_at, created_at)"
                      " VALUES (?,?,?,?,?,?)",
                      (name, kind, json.dumps(config, sort_keys=True, allow_nan=False), "unpaired", self.clock.now(),
                       self.clock.now()))
        return self.get(name)

    def _row(self, name: str) -> sqlite3.Row:
        r = self.db.one("SELECT * FROM channels WHERE name = ?", (name,))
        if r is None:
            raise NotFound(f"unknown channel {named(name)} (see: palui channels list)")
        return r

    def get(self, name: str) -> ChatChannel:
        """``{"name","kind","state","person","person_id","person_chat","paired_at","allow_groups","config",
        "pairing","last_failure","last_failure_at","state_at","waiting"}`` (times ISO 8601 UTC; ``pairing``: a
        code is live; ``state_at``: when the service running the channel last changed its state; ``waiting``:
        deliveries pending in its outbox). Raises NotFound."""
        r = self._row(name)
        code = self.db.one("SELECT expires_at, tries_left FROM channel_pairing WHERE channel = ?", (name,))
        return {
            "name": r["name"], "kind": r["kind"], "state": r["state"], "person": r["person_name"],
            "person_id": r["person_id"], "person_chat": r["person_chat"], "paired_at": _iso(r["paired_at"]),
            "allow_groups": bool(r["allow_groups"]), "config": json.loads(r["config_json"]),
            "pairing": bool(code and code["expires_at"] > self.clock.now() and code["tries_left"] > 0),
            "last_failure": r["last_failure"], "last_failure_at": _iso(r["last_failure_at"]),
            "state_at": _iso(r["state_at"]), "waiting": outbox.pending_count(self.db, name),
        }

    def list(self) -> list[ChatChannel]:
        """Every channel, by name (see :meth:`get`)."""
        return [self.get(r["name"]) for r in self.db.all("SELECT name FROM channels ORDER BY name")]

    def remove(self, name: str) -> ChatChannel:
        """Forget a channel: its row, pairing, processed updates, chats, sent messages, outbox and secrets file.
        A running service stops it within a few seconds. Raises NotFound."""
        ch = self.get(name)
        with self.db.write() as c:
            for table in ("channel_pairing", "channel_updates", "channel_cursors", "channel_chats",
                          "channel_messages", "channel_strangers", "channel_invites", "mail_answer_addresses",
                          "mail_threads"):
                c.execute(f"DELETE FROM {table} WHERE channel = ?", (name,))
            outbox.forget_channel(c, name)
            c.execute("DELETE FROM channels WHERE name = ?", (name,))
        from palui.connectors.mcp.config import delete_secrets  # here: `palui status` reads channels only
        delete_secrets(self.settings.secrets_dir, f"channel-{name}")
        return ch

    def renew_secret(self, name: str, secret: dict[str, str], config: dict[str, Any]) -> ChatChannel:
        """A new secret (a bot token revoked and made again, a new Matrix access token) for the channel
        ``name``, keeping its pairing, chats and outbox; ``config`` (as ``add`` takes it) is merged
        into the stored settings. A running service restarts the channel with it within a few seconds.
        Raises NotFound, UsageError when the secret is for another account (another bot or Matrix user:
        that is a new channel)."""
        ch = self.get(name)
        key = ACCOUNT.get(ch["kind"], "")
        old, new = ch["config"].get(key), config.get(key)
        if old is not None and new is not None and str(old) != str(new):
            raise UsageError(f"channel {name!r} is {self._account(ch['kind'], ch['config'])}; this secret is "
                             f"{self._account(ch['kind'], config)}'s: to use another account, palui channels remove "
                             f"{name}, then add it (or add it with another --name)")
        from palui.connectors.mcp.config import write_secrets  # here: `palui status` reads channels only
        write_secrets(self.settings.secrets_dir, f"channel-{name}", secret)
        self._update_config(name, **config, secret_at=self.clock.now())
        with self.db.write() as c:
            c.execute("UPDATE channels SET state = ?, state_at = ?, refused_at = NULL WHERE name = ?",
                      ("connected" if ch["person_id"] else "unpaired", self.clock.now(), name))
        return self.get(name)

    @staticmethod
    def _account(kind: str, config: dict[str, Any]) -> str:
        if kind in ("telegram", "discord"):
            return f"@{config.get('bot_username') or config.get('bot_id')}"
        if kind == "slack":
            return f"@{config.get('bot_name') or config.get('bot_user_id')}"
        return str(config.get("user_id") or config.get("address") or "another account")

    def secrets(self, name: str) -> dict[str, Any]:
        """The channel's secrets (``token`` for Telegram; ``access_token`` for Matrix). Raises NotFound."""
        self._row(name)
        from palui.connectors.mcp.config import read_secrets  # here: `palui status` reads channels only
        return read_secrets(self.settings.secrets_dir, f"channel-{name}")

    def set_groups(self, name: str, allow: bool) -> ChatChannel:
        """Allow (or refuse again) group chats and rooms with other members; in them only the person's
        messages start turns, and other members' messages are untrusted content. Raises NotFound."""
        self._row(name)
        with self.db.write() as c:
            c.execute("UPDATE channels SET allow_groups = ? WHERE name = ?", (int(allow), name))
        return self.get(name)

    def _update_config(self, name: str, **values: Any) -> None:
        """Merge ``values`` into the channel's stored settings (not secrets). Raises NotFound."""
        r = self._row(name)
        config = {**json.loads(r["config_json"]), **values}
        with self.db.write() as c:
            c.execute("UPDATE channels SET config_json = ? WHERE name = ?",
                      (json.dumps(config, sort_keys=True, allow_nan=False), name))

    # -- state -------------------------------------------------------------------------------------

    def set_state(self, name: str, state: str) -> None:
        """The channel's state as its running loop sees it: ``connected``, ``unpaired``, ``error: …``
        (already redacted). Unknown names are ignored (the channel was just removed)."""
        with self.db.write() as c:
            c.execute("UPDATE channels SET state = ?, state_at = ? WHERE name = ? AND state IS NOT ?",
                      (state, self.clock.now(), name, state))

    def set_failure(self, name: str, text: str | None) -> None:
        """Record (or clear, with None) the last delivery failure, redacted; ``/status`` shows it."""
        with self.db.write() as c:
            c.execute("UPDATE channels SET last_failure = ?, last_failure_at = ? WHERE name = ?",
                      (text, self.clock.now() if text else None, name))

    def set_refused(self, name: str, refused: bool) -> bool:
        """The platform refuses the channel's credentials (``refused``), or takes them again. The first
        refusal tells the person once, on the inbox and every paired channel (the refused one's item waits
        with the rest of its outbox), what to do; nothing in the outbox is dropped meanwhile (spec §8.3).
        Returns whether this changed anything. Unknown names are ignored (the channel was just removed)."""
        with self.db.write() as c:
            r = c.execute("SELECT kind, refused_at FROM channels WHERE name = ?", (name,)).fetchone()
            if r is None or refused == (r["refused_at"] is not None):
                return False
            c.execute("UPDATE channels SET refused_at = ? WHERE name = ?", (self.clock.now() if refused else None,
                                                                            name))
            if refused:
                kind = r["kind"]
                title = TITLES.get(kind, kind) + ("" if name == kind else f" ({name})")
                waiting = c.execute("SELECT COUNT(*) FROM channel_outbox WHERE channel = ? AND state = 'pending'",
                                    (name,)).fetchone()[0]
                self.notifier("notice", f"{title}: the platform rejected Palui's {CREDENTIAL.get(kind, 'token')}; "
                                        f"deliveries to it wait ({waiting} now) until you give a new one: palui "
                                        f"channels add {kind} --name {name} … (the pairing is kept).")
        return True

    def status_lines(self) -> builtins.list[ChannelLine]:
        """The channels as ``/status`` shows them (:meth:`palui.service.status.StatusPart.get`):
        ``[{"name","kind","state","person","last_failure"}]``, by name."""
        return [{"name": c["name"], "kind": c["kind"], "state": c["state"], "person": c["person"],
                 "last_failure": c["last_failure"]} for c in self.list()]

    # -- pairing -----------------------------------------------------------------------------------

    def pair_code(self, name: str) -> PairCode:
        """A new one-time pairing code (replacing any live one): ``{"code","expires_at","paired_with"}``.
        On a paired channel the first right ``/pair CODE`` replaces the person (re-pairing is explicit:
        only this command makes a code). Raises NotFound."""
        ch = self.get(name)
        code = "".join(secrets.choice(PAIR_ALPHABET) for _ in range(PAIR_LENGTH))
        expires = self.clock.now() + PAIR_SECONDS
        with self.db.write() as c:
            c.execute("INSERT INTO channel_pairing (channel, code_hash, expires_at, tries_left) VALUES (?,?,?,?)"
                      " ON CONFLICT (channel) DO UPDATE SET code_hash = excluded.code_hash,"
                      " expires_at = excluded.expires_at, tries_left = excluded.tries_left",
                      (name, _code_hash(code), expires, PAIR_TRIES))
        return {"code": code, "expires_at": _iso(expires), "paired_with": ch["person"]}

    def pairing_open(self, name: str) -> bool:
        """Is a pairing code live (Matrix accepts invites from anyone only then)?"""
        r = self.db.one("SELECT expires_at, tries_left FROM channel_pairing WHERE channel = ?", (name,))
        return bool(r and r["expires_at"] > self.clock.now() and r["tries_left"] > 0)

    def try_pair(self, name: str, code: str, person_id: str, person_name: str, chat: str) -> bool:
        """``/pair CODE`` from ``person_id`` in the private chat ``chat``. True when the code is right:
        the sender becomes the person and is told everywhere. A wrong code counts a try (the fifth
        voids the code, and the person is told once who tried) and returns False: the caller sends no
        reply."""
        with self.db.write() as c:
            r = c.execute("SELECT * FROM channel_pairing WHERE channel = ?", (name,)).fetchone()
            if r is None or r["expires_at"] <= self.clock.now() or r["tries_left"] <= 0:
                return False
            kind = c.execute("SELECT kind FROM channels WHERE name = ?", (name,)).fetchone()["kind"]
            title = TITLES.get(kind, kind) + ("" if name == kind else f" ({name})")
            if not same_secret(r["code_hash"], _code_hash(code)):
                self._wrong_try(c, name, title, person_id, json.loads(r["wrong_json"] or "{}"), r["tries_left"] - 1)
                return False
            c.execute("DELETE FROM channel_pairing WHERE channel = ?", (name,))
            c.execute("UPDATE channels SET person_id = ?, person_name = ?, person_chat = ?, paired_at = ?,"
                      " state = 'connected', state_at = ? WHERE name = ?",
                      (person_id, person_name, chat, self.clock.now(), self.clock.now(), name))
            self.notifier("notice", f"{title} paired with {person_name} ({person_id}).")
        return True

    def _wrong_try(self, c: sqlite3.Connection, name: str, title: str, sender: str, wrong: dict[str, int],
                   left: int) -> None:
        """A wrong ``/pair`` code from ``sender``: counted per sender and logged; the try that voids the code
        tells the person once who tried, since the chat itself never answers a wrong code (spec §8.3)."""
        wrong[sender] = wrong.get(sender, 0) + 1
        c.execute("UPDATE channel_pairing SET tries_left = ?, wrong_json = ? WHERE channel = ?",
                  (left, json.dumps(wrong, sort_keys=True, allow_nan=False), name))
        log.warning("%s: a wrong pairing code from %s (%d tries left)", name, sender, left)
        if left > 0:
            return
        total = sum(wrong.values())
        who = (f"from {next(iter(wrong))}" if len(wrong) == 1 else
               "(" + ", ".join(f"{n} from {s}" for s, n in sorted(wrong.items(), key=lambda i: -i[1])) + ")")
        self.notifier("notice", f"{title}: {total} wrong pairing codes {who}: the code is void, make a new one "
                                f"(palui channels pair {name}).")

    def note_stranger(self, name: str, sender: str) -> bool:
        """A sender who is not the person wrote: True when it should be logged now (at most once a day
        per sender, spec §8.3)."""
        now = self.clock.now()
        with self.db.write() as c:
            r = c.execute("SELECT logged_at FROM channel_strangers WHERE channel = ? AND sender = ?",
                          (name, sender)).fetchone()
            if r is not None and now - r["logged_at"] < STRANGER_LOG_SECONDS:
                return False
            c.execute("INSERT INTO channel_strangers (channel, sender, logged_at) VALUES (?,?,?) ON CONFLICT"
                      " (channel, sender) DO UPDATE SET logged_at = excluded.logged_at", (name, sender, now))
        return True

    # -- invites waiting for a pairing code (Matrix) ----------------------------------------------

    def hold_invite(self, name: str, room_id: str, inviter: str | None) -> bool:
        """An invite that arrived while no pairing code was live, kept so that it is joined once one is
        (the person often invites Palui before making the code). Only the newest few of the last week are
        kept. Returns True when it is new."""
        now = self.clock.now()
        with self.db.write() as c:
            fresh = c.execute("INSERT OR IGNORE INTO channel_invites (channel, room_id, inviter, invited_at)"
                              " VALUES (?,?,?,?)", (name, room_id, inviter, now)).rowcount == 1
            c.execute("DELETE FROM channel_invites WHERE channel = ? AND (invited_at < ? OR room_id NOT IN (SELECT"
                      " room_id FROM channel_invites WHERE channel = ? ORDER BY invited_at DESC LIMIT ?))",
                      (name, now - INVITE_KEEP_SECONDS, name, INVITES_KEPT))
        return fresh

    def held_invites(self, name: str) -> builtins.list[str]:
        """The rooms whose invites wait for a pairing code, oldest first."""
        return [r[0] for r in self.db.all("SELECT room_id FROM channel_invites WHERE channel = ? AND invited_at >= ?"
                                          " ORDER BY invited_at", (name, self.clock.now() - INVITE_KEEP_SECONDS))]

    def drop_invite(self, name: str, room_id: str) -> None:
        """Forget a held invite (joined, or gone)."""
        with self.db.write() as c:
            c.execute("DELETE FROM channel_invites WHERE channel = ? AND room_id = ?", (name, room_id))
