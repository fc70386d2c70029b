"""Logout: revoke a connector's tokens where the server offers it (RFC 7009), then delete them.

The SDK has no revocation. The revocation endpoint comes from the authorization-server metadata
stored with the tokens; the client authenticates as at the token endpoint (the SDK's
``OAuthContext.prepare_token_auth``: ``client_secret_basic``, ``client_secret_post`` or ``none``).
The connection is checked like every sign-in connection (:mod:`.netcheck`). The local files go
whatever the server answers.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import OAuthClientMetadata

from palui.connectors.mcp.oauth.netcheck import checked_transport
from palui.connectors.mcp.oauth.storage import ConnectorTokenStorage, OAuthFiles


async def revoke_and_forget(secrets_dir: Path, connector_id: str, server_url: str, timeout: float = 10.0) -> str:
    """Revoke the refresh and access tokens of ``connector_id`` and delete them. Returns what happened:
    ``revoked``, ``refused by the server``, ``not offered by the server`` or ``no tokens``."""
    storage = ConnectorTokenStorage(OAuthFiles(secrets_dir), connector_id, server_url)
    stored, discovery = storage.stored, storage.discovery
    info = await storage.get_client_info()
    metadata = discovery.oauth_metadata if discovery else None
    endpoint = str(metadata.revocation_endpoint) if metadata and metadata.revocation_endpoint else None
    outcome = "no tokens"
    if stored is not None:
        outcome = "not offered by the server"
        if endpoint is not None and info is not None:
            ctx = OAuthContext(server_url=server_url, client_metadata=OAuthClientMetadata(redirect_uris=None),
                               storage=storage, redirect_handler=None, callback_handler=None, client_info=info)
            results = []
            async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False,
                                          transport=checked_transport(server_url)) as http:
                for hint, value in (("refresh_token", stored.token.refresh_token),
                                    ("access_token", stored.token.access_token)):
                    if not value:
                        continue
                    data, headers = ctx.prepare_token_auth(
                        {"token": value, "token_type_hint": hint, "client_id": info.client_id},
                        {"Content-Type": "application/x-www-form-urlencoded"})
                    try:
                        response = await http.post(endpoint, data=data, headers=headers)
                        results.append(response.status_code == 200)
                    except httpx2.HTTPError:
                        results.append(False)
            outcome = "revoked" if results and all(results) else "refused by the server"
    storage.drop_tokens()
    return outcome
