"""Parts of the one service API, one concept per module, combined in :mod:`palui.service`."""
