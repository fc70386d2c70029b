"""Palui: a self-hosted personal AI agent whose tools are governed (spec §1)."""

__version__ = "0.1.0"
