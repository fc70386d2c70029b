"""Pure text helpers shared by the front ends and the service (no I/O anywhere in this package).

- :mod:`.escape`: the one escaper of hidden characters (bidi, zero-width, TAG, controls…), spec §4;
- :mod:`.commands`: chat commands (``/stop``, ``/approve ID``…), parsed the same on every front end;
- :mod:`.prompts`: the approval request as told on the person's channel;
- :mod:`.review`: diffs of a tool's pending definition change;
- :mod:`.mcp_config`: an MCP server's configuration, ``KEY=VALUE`` pairs, URL redaction;
- :mod:`.loopback`: whether an address or URL is this machine.

Front ends may import this package, :mod:`palui.types`, :mod:`palui.errors` and the
service API, nothing else of Palui (docs/architecture.md; ``tests/test_architecture.py``).
"""
