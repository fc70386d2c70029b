"""The pure policy: classes, the decision matrix, taint matching, tool budget ranking.

Nothing in this package does I/O or reads a clock.
"""
