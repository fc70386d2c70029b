"""Connectors: sources of tools (spec §7). Built-in ones and MCP servers."""
