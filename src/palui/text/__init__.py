"""Pure text helpers shared by the front ends and the service.

No I/O anywhere in this package: every function takes strings and returns strings (or tuples of them).
"""
