"""Where Palui keeps its files: ``PALUI_HOME``, or the platform's data and config directories.

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
