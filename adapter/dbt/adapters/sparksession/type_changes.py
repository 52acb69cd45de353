"""What to do when a batch brings a column with another type than the table's (a type changed at
the source): nothing when the table's type holds every value of the batch's, an in-place Iceberg
type promotion when Iceberg allows one, or an error naming the column."""

from __future__ import annotations

import re

_INTS = ("tinyint", "smallint", "int", "bigint")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def _decimal(data_type: str) -> tuple[int, int] | None:
    match = _DECIMAL.fullmatch(data_type)
    return (int(match.group(1)), int(match.group(2))) if match else None


def holds(target: str, source: str) -> bool:
    """True when every value of type `source` is stored exactly in a column of type `target`."""
    target, source = target.lower(), source.lower()
    if target == source or target == "string":
        return True
    if target.startswith("array<") and source.startswith("array<"):
        # the element types: an Iceberg table stores a smallint[] as array<int>, say
        return holds(target[6:-1], source[6:-1])
    if source in _INTS and target in _INTS:
        return _INTS.index(source) <= _INTS.index(target)
    if source == "float" and target == "double":
        return True
    t, s = _decimal(target), _decimal(source)
    if t and s:
        return t[1] >= s[1] and t[0] - t[1] >= s[0] - s[1]
    if t and source in _INTS:
        digits = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}[source]
        return t[0] - t[1] >= digits
    return False


def iceberg_promotes(current: str, wanted: str) -> bool:
    """Iceberg's in-place type promotions (format v2): int -> long, float -> double, and a
    decimal's precision widened at the same scale."""
    current, wanted = current.lower(), wanted.lower()
    if (current, wanted) in (("int", "bigint"), ("float", "double")):
        return True
    c, w = _decimal(current), _decimal(wanted)
    return bool(c and w and c[1] == w[1] and w[0] > c[0])


def type_change(target: str, source: str) -> str:
    """`fits` (nothing to do), `promote` (alter the column to `source`), or `incompatible`."""
    if holds(target, source):
        return "fits"
    if iceberg_promotes(target, source):
        return "promote"
    return "incompatible"
