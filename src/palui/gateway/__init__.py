"""The gateway: Palui's governed tools offered to other MCP clients (spec §8.6, docs/gateway.md).

A front end like the CLI and the server: it reaches Palui only through the service's door. ``http``
serves ``/mcp`` on ``palui serve`` (built at its first request by ``lazy``); ``bridge`` is
``palui gateway --client NAME``, a stdio server that relays to it; ``tools`` turns the service's answers into
the SDK's types.
"""

#: Where the app's guard puts the calling client's name: ``scope["state"][CLIENT_KEY]``.
CLIENT_KEY = "palui_gateway_client"
