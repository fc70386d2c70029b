"""``python -m palui``: the command line (:mod:`palui.cli`)."""

from palui.cli import main

main()
