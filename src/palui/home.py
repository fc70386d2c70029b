"""Where Palui keeps its files: ``PALUI_HOME``, or the platform's data and config directories, and whether
Palui can write there.

Apart from :mod:`palui.config` so that a command that only needs the paths (the CLI's log file,
``palui service``) does not import the configuration schema (start cost: docs/decisions/0085-a-light-cli-start.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def paths(env: Mapping[str, str] | None = None) -> tuple[Path, Path, Path]:
    """(home, data_dir, config_file) for this environment (``env`` defaults to ``os.environ``)."""
    home = (os.environ if env is None else env).get("PALUI_HOME")
    if home:
        h = Path(home).expanduser().resolve()
        return h, h, h / "palui.toml"
    import platformdirs  # only without PALUI_HOME (every command pays for its imports)

    cfg = Path(platformdirs.user_config_dir("palui"))
    data = Path(platformdirs.user_data_dir("palui"))
    return data, data, cfg / "palui.toml"


def prepare_data_dir(data_dir: Path, db_file: str = "palui.db", env: Mapping[str, str] | None = None) -> None:
    """Create ``data_dir`` if it is missing and make sure Palui can write its database ``db_file`` there
    (the file is created, empty, when it does not exist yet: SQLite would do the same a moment later).

    Raises ConfigError in one line naming ``PALUI_HOME`` (or the platform's data directory) and what is
    wrong, instead of the ``FileExistsError`` or ``sqlite3.OperationalError`` a file, ``/proc/1`` or a
    read-only place would raise deeper down (spec §10.1).
    """
    from palui.errors import ConfigError

    home = (os.environ if env is None else env).get("PALUI_HOME")
    where = f"PALUI_HOME={home}" if home else f"the data directory {data_dir}"
    fix = ("point PALUI_HOME at a directory Palui may create or write" if home else
           "make it a directory you can write, or set PALUI_HOME to one")
    unusable = f"{where} is not a directory Palui can use"
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{unusable}: it exists and is not a directory; {fix}") from None
    except OSError as e:
        raise ConfigError(f"{unusable}: cannot create it ({e.strerror}); {fix}") from None
    try:
        os.close(os.open(data_dir / db_file, os.O_RDWR | os.O_CREAT, 0o600))
    except OSError as e:
        raise ConfigError(f"{unusable}: cannot write {db_file} there ({e.strerror}); {fix}") from None
