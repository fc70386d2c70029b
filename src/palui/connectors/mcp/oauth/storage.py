"""Where OAuth secrets live: per-item files of mode 0600 under ``<secrets dir>/oauth/`` (spec §10).

- ``clients/<issuer hash>.json`` — the client registrations (dynamic registration or a Client ID
  Metadata Document) made at one **issuer**, shared by every connector of that authorization server
  (more than one when a later sign-in needed another redirect URI: each connector's tokens name
  the client they were issued to);
- ``clients/<connector id>.pre.json`` — a pre-registered client the person gave one connector
  (``--client-id``; the secret from a prompt or a file; ``--redirect-uri`` when it fixes one);
- ``loopback/<connector id>.json`` — the port of the connector's last loopback sign-in: the next one
  listens there again, so its redirect URI is the one its registration holds (spec §7.9);
  ``loopback/last.json`` the home's last one, where a connector's first sign-in listens;
- ``tokens/<connector id>.<resource hash>.json`` — one connector's tokens for one ``resource``
  (RFC 8707), tagged with the issuer that issued them, with the time they arrived (the SDK keeps
  only the relative ``expires_in``) and the metadata discovered for them (so a new process can
  refresh at the right token endpoint); ``locks/<connector id>.<resource hash>.lock`` serialises
  refreshes across processes (:meth:`ConnectorTokenStorage.refresh_lock`).

A token is only ever handed to the connector it was issued for: the file is named after it.
Nothing of these files goes into the database, a log line or an error message.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from mcp.shared.auth_utils import resource_url_from_server_url
from pydantic import ValidationError

from palui.connectors.mcp.config import write_secrets
from palui.connectors.mcp.oauth.redact import RefreshUnavailable, remember_secret

log = logging.getLogger(__name__)

LOCK_WAIT_SECONDS = 60.0  # at most this long for another process's refresh (a token request has its own timeout)


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        log.warning("unreadable OAuth file %s: ignored", path.name)
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    write_secrets(path.parent, path.name.removesuffix(".json"), data)


@dataclass
class StoredTokens:
    """A connector's tokens as stored: the SDK's token, when it arrived (epoch s) and who issued it."""

    token: OAuthToken
    received_at: float
    issuer: str | None
    resource: str
    client_id: str | None = None

    @property
    def expires_at(self) -> float | None:
        return None if self.token.expires_in is None else self.received_at + float(self.token.expires_in)

    @property
    def lifetime(self) -> float | None:
        return None if self.token.expires_in is None else float(self.token.expires_in)


@dataclass
class Discovery:
    """What the SDK discovered for a connector's tokens (kept so that a new process refreshes at the
    right token endpoint, not at ``{MCP origin}/token``)."""

    auth_server_url: str | None
    oauth_metadata: OAuthMetadata | None
    protected_resource_metadata: ProtectedResourceMetadata | None


class OAuthFiles:
    """The OAuth files of one ``PALUI_HOME`` (``root`` = ``<secrets dir>/oauth``)."""

    def __init__(self, secrets_dir: Path) -> None:
        self.root = secrets_dir / "oauth"

    # -- registrations --------------------------------------------------------------------------

    def _client_path(self, issuer: str) -> Path:
        return self.root / "clients" / f"{_h(issuer)}.json"

    def _pre_path(self, connector_id: str) -> Path:
        return self.root / "clients" / f"{connector_id}.pre.json"

    def registrations(self, issuer: str) -> list[OAuthClientInformationFull]:
        """The client registrations made at ``issuer``, oldest first (unreadable ones left out)."""
        data = _read(self._client_path(issuer))
        if not data or data.get("issuer") != issuer or not isinstance(data.get("registrations"), list):
            return []
        return [c for c in (_client(raw) for raw in data["registrations"]) if c is not None]

    def registration(self, issuer: str, client_id: str | None = None) -> OAuthClientInformationFull | None:
        """The registration at ``issuer`` with ``client_id`` (None: the newest), or None."""
        found = [c for c in self.registrations(issuer) if client_id is None or c.client_id == client_id]
        return found[-1] if found else None

    def save_registration(self, issuer: str, info: OAuthClientInformationFull) -> None:
        kept = [c for c in self.registrations(issuer) if c.client_id != info.client_id]
        _write(self._client_path(issuer), {"issuer": issuer, "registrations": [
            c.model_dump(mode="json") for c in [*kept, info]]})
        if info.client_secret:
            remember_secret(info.client_secret)

    def pre_registered(self, connector_id: str) -> OAuthClientInformationFull | None:
        data = _read(self._pre_path(connector_id))
        return _client(data.get("client_info")) if data else None

    def save_pre_registered(self, connector_id: str, info: OAuthClientInformationFull) -> None:
        _write(self._pre_path(connector_id), {"client_info": info.model_dump(mode="json")})

    # -- tokens ---------------------------------------------------------------------------------------

    def _token_path(self, connector_id: str, resource: str) -> Path:
        return self.root / "tokens" / f"{connector_id}.{_h(resource)}.json"

    def tokens(self, connector_id: str, resource: str) -> tuple[StoredTokens | None, Discovery | None]:
        data = _read(self._token_path(connector_id, resource))
        if not data or data.get("connector") != connector_id:
            return None, None
        stored = None
        try:
            if data.get("token"):
                stored = StoredTokens(OAuthToken.model_validate(data["token"]), float(data["received_at"]),
                                      data.get("issuer"), resource, data.get("client_id"))
                remember_secret(stored.token.access_token)
                if stored.token.refresh_token:
                    remember_secret(stored.token.refresh_token)
            found = data.get("discovery") or {}
            discovery = Discovery(
                found.get("auth_server_url"),
                OAuthMetadata.model_validate(found["oauth_metadata"]) if found.get("oauth_metadata") else None,
                ProtectedResourceMetadata.model_validate(found["prm"]) if found.get("prm") else None,
            ) if found else None
        except (ValidationError, KeyError, TypeError, ValueError):
            log.warning("damaged OAuth token file of %s: ignored", connector_id)
            return None, None
        return stored, discovery

    def save_tokens(self, connector_id: str, resource: str, stored: StoredTokens | None,
                    discovery: Discovery | None) -> None:
        if stored is not None:
            remember_secret(stored.token.access_token)
            if stored.token.refresh_token:
                remember_secret(stored.token.refresh_token)
        d = None
        if discovery is not None:
            d = {"auth_server_url": discovery.auth_server_url,
                 "oauth_metadata": discovery.oauth_metadata.model_dump(mode="json") if discovery.oauth_metadata
                 else None,
                 "prm": discovery.protected_resource_metadata.model_dump(mode="json")
                 if discovery.protected_resource_metadata else None}
        _write(self._token_path(connector_id, resource), {
            "connector": connector_id, "resource": resource,
            "issuer": stored.issuer if stored else None, "received_at": stored.received_at if stored else None,
            "client_id": stored.client_id if stored else None,
            "token": stored.token.model_dump(mode="json") if stored else None, "discovery": d})

    def drop_tokens(self, connector_id: str) -> None:
        """Delete every token file of ``connector_id`` (all resources)."""
        folder = self.root / "tokens"
        if folder.is_dir():
            for p in folder.glob(f"{connector_id}.*.json"):
                p.unlink(missing_ok=True)

    def forget_connector(self, connector_id: str) -> None:
        """A removed connector: its tokens, its pre-registered client and its loopback port go (issuer
        registrations stay)."""
        self.drop_tokens(connector_id)
        self._pre_path(connector_id).unlink(missing_ok=True)
        self._port_path(connector_id).unlink(missing_ok=True)
        folder = self.root / "locks"
        if folder.is_dir():
            for p in folder.glob(f"{connector_id}.*.lock"):
                p.unlink(missing_ok=True)

    # -- the loopback port ----------------------------------------------------------------------------

    def _port_path(self, connector_id: str) -> Path:
        return self.root / "loopback" / f"{connector_id}.json"

    def loopback_port(self, connector_id: str) -> int:
        """The port of the connector's last loopback sign-in, else of this home's last one (so a second
        connector of an authorization server can use the registration the first made); 0: any free port."""
        for path in (self._port_path(connector_id), self.root / "loopback" / "last.json"):
            port = (_read(path) or {}).get("port")
            if isinstance(port, int) and 0 < port < 65536:
                return port
        return 0

    def save_loopback_port(self, connector_id: str, port: int) -> None:
        _write(self._port_path(connector_id), {"port": port})
        _write(self.root / "loopback" / "last.json", {"port": port})


def _client(raw: Any) -> OAuthClientInformationFull | None:
    if not isinstance(raw, dict):
        return None
    try:
        info = OAuthClientInformationFull.model_validate(raw)
    except ValidationError:
        return None
    if info.client_secret:
        remember_secret(info.client_secret)
    return info


class ConnectorTokenStorage:
    """The SDK's ``TokenStorage`` for one connector and its ``resource`` (``mcp.client.auth``).

    ``get_client_info`` gives the pre-registered client, else the registration of the issuer that
    issued the stored tokens. The provider (:mod:`palui.connectors.mcp.oauth.provider`) finds a
    shared registration by issuer once discovery named it (:meth:`shared_registration`), records the
    discovery (:meth:`set_discovery`) and says which issuer new tokens come from (``issuer_now``).
    """

    def __init__(self, files: OAuthFiles, connector_id: str, server_url: str) -> None:
        self.files = files
        self.connector_id = connector_id
        self.resource = resource_url_from_server_url(server_url)
        parts = urlsplit(server_url)
        self.origin = f"{parts.scheme}://{parts.netloc}"  # the issuer of the 2025-03-26 path (no metadata)
        self.stored, self.discovery = files.tokens(connector_id, self.resource)
        self.issuer_now: str | None = None  # set by the provider from what it discovered
        self.client_id_now: str | None = None  # the client the next tokens are issued to

    # -- the SDK's protocol ----------------------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        if self.stored is None:
            return None
        tok = self.stored.token
        if self.stored.expires_at is not None:  # what is left, so anything the SDK computes from it is right
            tok = tok.model_copy(update={"expires_in": max(0, int(self.stored.expires_at - time.time()))})
        return tok

    async def set_tokens(self, tokens: OAuthToken) -> None:
        issuer = self.issuer_now or (self.stored.issuer if self.stored else None) or self.origin
        client_id = self.client_id_now or (self.stored.client_id if self.stored else None)
        self.stored = StoredTokens(tokens.model_copy(), time.time(), issuer, self.resource, client_id)
        self.files.save_tokens(self.connector_id, self.resource, self.stored, self.discovery)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        pre = self.files.pre_registered(self.connector_id)
        if pre is not None:
            return pre
        issuer = (self.stored.issuer if self.stored else None) or (
            str(self.discovery.oauth_metadata.issuer) if self.discovery and self.discovery.oauth_metadata else None)
        if not issuer:
            return None
        return self.files.registration(issuer, self.stored.client_id if self.stored else None)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.files.pre_registered(self.connector_id) is not None:
            return  # the person's own client stays what they gave
        self.files.save_registration(client_info.issuer or self.issuer_now or self.origin, client_info)

    # -- Palui's additions -------------------------------------------------------------------------------

    def shared_registration(self, issuer: str, redirect_uri: str) -> OAuthClientInformationFull | None:
        """A registration made at ``issuer`` (by any connector) that allows ``redirect_uri``, newest first."""
        for info in reversed(self.files.registrations(issuer)):
            if redirect_allowed(info, redirect_uri):
                return info
        return None

    def reload(self) -> StoredTokens | None:
        """Read the token file again (another process may have refreshed, signed in or dropped them)."""
        self.stored, found = self.files.tokens(self.connector_id, self.resource)
        if found is not None:
            self.discovery = found
        return self.stored

    @contextlib.asynccontextmanager
    async def refresh_lock(self) -> AsyncIterator[None]:
        """Hold the connector's refresh lock (an exclusive ``flock`` on a file beside its tokens), so that
        one process at a time refreshes: with rotating refresh tokens, a second refresh with the same
        refresh token would be refused. Raises RefreshUnavailable after :data:`LOCK_WAIT_SECONDS`."""
        import anyio

        path = self.files.root / "locks" / self.files._token_path(self.connector_id, self.resource).with_suffix(
            ".lock").name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            waited = 0.0
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if waited >= LOCK_WAIT_SECONDS:
                        raise RefreshUnavailable("another Palui process is refreshing this sign-in and did not "
                                                 f"finish within {LOCK_WAIT_SECONDS:.0f} s") from None
                    await anyio.sleep(0.05)
                    waited += 0.05
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def set_discovery(self, discovery: Discovery) -> None:
        self.discovery = discovery
        self.files.save_tokens(self.connector_id, self.resource, self.stored, discovery)

    def drop_tokens(self) -> None:
        """The issuer changed (or the person signed out): this connector's tokens are gone."""
        self.stored, self.discovery = None, None
        self.files.drop_tokens(self.connector_id)


def redirect_allowed(info: OAuthClientInformationFull, redirect_uri: str) -> bool:
    """``redirect_uri`` is one the registration lists, exactly. RFC 8252 §7.3 asks authorization servers
    to accept any port for a loopback redirect, but some (the ``mcp`` SDK's own) compare exactly: a
    registration made for another port is not used, a new one is made (spec §7.9)."""
    return redirect_uri in [str(u) for u in info.redirect_uris or []]
