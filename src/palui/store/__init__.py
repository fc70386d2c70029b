"""SQLite storage: one file, WAL, numbered migrations, one write path (spec §10)."""

from palui.store.db import Database

__all__ = ["Database"]
