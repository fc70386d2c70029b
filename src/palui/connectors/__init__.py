"""Connectors: sources of tools (SPEC §7). Built-in ones and MCP servers."""
