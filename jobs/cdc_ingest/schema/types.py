"""Which column type changes Iceberg can make without losing values."""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def widens(old: str, new: str) -> bool:
    """Whether a column of Spark type ``old`` can become ``new`` (Iceberg's type promotions).

    int to bigint, float to double, and a decimal's precision going up with the same scale.
    """
    if (old, new) in (("int", "bigint"), ("float", "double")):
        return True
    a, b = _DECIMAL.match(old), _DECIMAL.match(new)
    return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) >= int(a.group(1)))
