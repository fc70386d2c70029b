"""The discovery files of ``palui serve`` (``serve.json``, the access token, the lock): home-level
data kept in :mod:`palui.discovery`, below the service, which reads them too; re-exported here for
the server and the CLI."""

from palui.discovery import (
    LOOPBACK,
    ServiceInfo,
    clear_info,
    ensure_token,
    find_service,
    info_path,
    read_token,
    served_here,
    take_lock,
    token_path,
    write_info,
)

__all__ = ["LOOPBACK", "ServiceInfo", "clear_info", "ensure_token", "find_service", "info_path", "read_token",
           "served_here", "take_lock", "token_path", "write_info"]
