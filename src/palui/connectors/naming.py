"""Connector ids and model-visible tool names (spec §7).

Pure functions; the caller passes the names already taken, and stores the result
so the mapping stays stable across restarts.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection

from palui.errors import NamingError

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_NAME = 64
_HASH_LEN = 8


def slugify(name: str) -> str:
    """Lower-case ``[a-z0-9-]`` slug of a connector name, no ``__``, no leading/trailing ``-``.

    Accented Latin letters keep their base letter (``Über`` -> ``uber``); other
    characters become ``-``. At most 40 characters.
    """
    # NFKD splits "Ü" into "U" + a combining mark, which the ASCII encode drops.
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.strip().lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)
    return slug[:40].strip("-")


MAX_CONNECTOR_NAME = 200  # characters of a connector's display name


def connector_id(name: str, taken: Collection[str]) -> str:
    """A new MCP connector id ``mcp-<slug>``, made unique with ``-2``, ``-3``… (spec §7).

    Raises NamingError when the name has no usable characters, or is longer than
    ``MAX_CONNECTOR_NAME`` characters (a display name is shown in every list and sheet).
    """
    if len(name) > MAX_CONNECTOR_NAME:
        raise NamingError(f"a connector name is at most {MAX_CONNECTOR_NAME} characters (this one has {len(name)})")
    slug = slugify(name)
    if not slug:
        raise NamingError(f"connector name {name!r} has no letters or digits to make an id from")
    base = f"mcp-{slug}"
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def short_hash(connector: str, raw_tool: str) -> str:
    """A stable short hash of (connector id, raw tool name). Any string hashes, a lone surrogate too
    (``surrogatepass``): naming never fails on a name, whatever it holds."""
    return hashlib.sha256(f"{connector}\x00{raw_tool}".encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def visible_name(connector: str, raw_tool: str, taken: Collection[str]) -> str:
    """The model-visible name ``<connectorId>__<tool>`` within ``^[A-Za-z0-9_-]{1,64}$``.

    Invalid characters become ``_``. A name that is too long, or that collides with
    one in ``taken`` (names of *other* tools), is shortened and suffixed with a
    stable short hash of (connector id, raw tool name). Raises NamingError if even
    that collides (practically impossible).
    """
    tool = re.sub(r"[^A-Za-z0-9_-]", "_", raw_tool) or "_"
    name = f"{connector}__{tool}"
    if len(name) <= MAX_NAME and name not in taken:
        return name
    suffix = "_" + short_hash(connector, raw_tool)
    candidate = name[: MAX_NAME - len(suffix)] + suffix
    if candidate in taken:
        raise NamingError(f"cannot give tool {raw_tool!r} of {connector} a unique name")
    return candidate
