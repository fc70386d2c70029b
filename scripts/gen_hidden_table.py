#!/usr/bin/env python3
"""Generate ``src/palui/text/hidden_table.py``: the code points Palui shows as escapes (spec §4.7).

A code point is *hidden* when its General_Category is Cc (except U+000A LINE FEED and U+0009 TAB),
Cf, Co, Cs, Cn, Zl or Zp, or when it has the Default_Ignorable_Code_Point property.

It reads Unicode's own data files, in the layout of the Unicode Character Database (UCD):

    DIR/extracted/DerivedGeneralCategory.txt   General_Category of every code point (Cn listed too)
    DIR/UnicodeData.txt                        cross-check of the categories above (unlisted = Cn)
    DIR/DerivedCoreProperties.txt              Default_Ignorable_Code_Point

and writes the sorted, merged ``(start, end)`` ranges (inclusive) with the Unicode version read from the
files' headers, the source named with ``--source``, and each file's SHA-256. Run by hand, then commit.
The files come from Debian's ``unicode-data`` package (``/usr/share/unicode``); take the newest suite
that has it (17.0.0 was in sid when this table was made; bookworm has 15.0.0). Without touching the
machine's apt sources: write a one-line sources list for that suite to /tmp/sid.list, then

    O="-o Dir::Etc::SourceList=/tmp/sid.list -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists=/tmp/lists"
    mkdir -p /tmp/lists/partial && apt-get $O update && apt-get $O download unicode-data
    dpkg-deb -x unicode-data_*_all.deb /tmp/ucd
    .venv/bin/python scripts/gen_hidden_table.py --ucd /tmp/ucd/usr/share/unicode \\
        --source "Debian package unicode-data 17.0.0-2 (sid)"

The output is deterministic (no dates), so regenerating from the same files changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "palui" / "text" / "hidden_table.py"
MAX_CP = 0x10FFFF
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
VISIBLE_CONTROLS = frozenset({0x0A, 0x09})  # line feed and tab are layout, shown as they are
_HEADER = re.compile(r"^#\s*(\w+)-(\d+\.\d+\.\d+)\.txt\s*$")


def _version(path: Path) -> str:
    """The version in a UCD file's first line (``# DerivedGeneralCategory-17.0.0.txt``)."""
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    m = _HEADER.match(first)
    if not m:
        raise SystemExit(f"{path}: no version header in its first line: {first!r}")
    return m.group(2)


def _property_lines(path: Path) -> Iterator[tuple[int, int, str]]:
    """``(start, end, value)`` of each data line of a UCD property file (``0600..0605 ; Cf # …``)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        data = line.split("#", 1)[0].strip()
        if not data:
            continue
        fields = [f.strip() for f in data.split(";")]
        cps = fields[0].split("..")
        start, end = int(cps[0], 16), int(cps[-1], 16)
        yield start, end, fields[1]


def categories_from_derived(path: Path) -> tuple[bytearray, list[str]]:
    """A category index per code point, and the category names, from DerivedGeneralCategory.txt
    (which lists every code point, unassigned ones as Cn)."""
    names: list[str] = []
    cat = bytearray(b"\xff" * (MAX_CP + 1))
    for start, end, value in _property_lines(path):
        if value not in names:
            names.append(value)
        cat[start:end + 1] = bytes([names.index(value)]) * (end - start + 1)
    if 0xFF in cat:
        raise SystemExit(f"{path}: code point U+{cat.index(0xFF):04X} has no General_Category")
    return cat, names


def hidden_by_category_from_unicodedata(path: Path) -> bytearray:
    """1 where UnicodeData.txt gives a hidden category; code points it does not list are Cn (hidden)."""
    hidden = bytearray(b"\x01" * (MAX_CP + 1))
    first: int | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        fields = line.split(";")
        cp, name, gc = int(fields[0], 16), fields[1], fields[2]
        if name.endswith(", First>"):
            first = cp
            continue
        start = first if name.endswith(", Last>") and first is not None else cp
        first = None
        hidden[start:cp + 1] = (b"\x01" if gc in HIDDEN_CATEGORIES else b"\x00") * (cp - start + 1)
    return hidden


def default_ignorable(path: Path) -> bytearray:
    """1 for every code point with Default_Ignorable_Code_Point (DerivedCoreProperties.txt)."""
    di = bytearray(MAX_CP + 1)
    for start, end, value in _property_lines(path):
        if value == "Default_Ignorable_Code_Point":
            di[start:end + 1] = b"\x01" * (end - start + 1)
    return di


def ranges(flags: bytearray) -> list[tuple[int, int]]:
    """The sorted, merged inclusive ranges where ``flags`` is 1."""
    out: list[tuple[int, int]] = []
    cp = flags.find(1)
    while cp != -1:
        end = flags.find(0, cp)
        end = MAX_CP + 1 if end == -1 else end
        out.append((cp, end - 1))
        cp = flags.find(1, end)
    return out


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(table: list[tuple[int, int]], *, version: str, source: str, digests: dict[str, str]) -> str:
    lines = [
        '"""Code points shown as escapes (spec §4.7). GENERATED by scripts/gen_hidden_table.py: do not edit.',
        "",
        f"Unicode {version}, from Unicode's data files as shipped by {source}:",
        *(f"    {name}  sha256 {digest}" for name, digest in digests.items()),
        "",
        "Hidden: General_Category Cc (except U+000A, U+0009), Cf, Co, Cs, Cn, Zl, Zp, or Default_Ignorable_Code_Point.",
        "``HIDDEN_RANGES`` are inclusive ``(start, end)`` code points, sorted and merged.",
        '"""',
        "",
        f'UNICODE_VERSION = "{version}"',
        f"SOURCE = {_quoted(source)}",
        "",
        "HIDDEN_RANGES: tuple[tuple[int, int], ...] = (",
        *(f"    (0x{a:04X}, 0x{b:04X})," for a, b in table),
        ")",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ucd", type=Path, default=Path("/usr/share/unicode"),
                    help="directory with the UCD files (default: /usr/share/unicode, Debian's unicode-data)")
    ap.add_argument("--source", required=True, help="where the files came from, recorded in the header")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    files = {
        "extracted/DerivedGeneralCategory.txt": args.ucd / "extracted" / "DerivedGeneralCategory.txt",
        "UnicodeData.txt": args.ucd / "UnicodeData.txt",
        "DerivedCoreProperties.txt": args.ucd / "DerivedCoreProperties.txt",
    }
    for p in files.values():
        if not p.is_file():
            raise SystemExit(f"missing {p}")
    gc_file, ud_file, dcp_file = files.values()
    versions = {_version(gc_file), _version(dcp_file)}
    if len(versions) != 1:
        raise SystemExit(f"the files are of different Unicode versions: {sorted(versions)}")
    version = versions.pop()

    cat, names = categories_from_derived(gc_file)
    hidden_ids = {i for i, n in enumerate(names) if n in HIDDEN_CATEGORIES}
    by_category = bytearray(1 if c in hidden_ids else 0 for c in cat)
    # UnicodeData.txt is the primary source of General_Category; the derived file must agree with it.
    other = hidden_by_category_from_unicodedata(ud_file)
    if by_category != other:
        cp = next(i for i in range(MAX_CP + 1) if by_category[i] != other[i])
        raise SystemExit(f"UnicodeData.txt and DerivedGeneralCategory.txt disagree at U+{cp:04X}")
    for cp in VISIBLE_CONTROLS:
        by_category[cp] = 0

    di = default_ignorable(dcp_file)
    hidden = bytearray(a | b for a, b in zip(by_category, di, strict=True))
    table = ranges(hidden)
    digests = {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in files.items()}
    args.out.write_text(render(table, version=version, source=args.source, digests=digests), encoding="utf-8")
    print(f"{args.out}: Unicode {version}, {len(table)} ranges, {sum(hidden)} code points", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
