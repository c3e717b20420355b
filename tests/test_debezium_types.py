"""Debezium's types as its connectors send them, into exact mirror values (issue 51, defects 1,
4, 5 and 7). Every expected value is the database's own, written by hand."""

from __future__ import annotations

import base64
from decimal import Decimal

from debezium_messages import (
    INT32,
    MICRO_TIME,
    STRING,
    VARIABLE_SCALE_DECIMAL,
    change,
    decimal,
    line,
)


def _unscaled(value: int, width: int) -> str:
    """Connect's Base64 of a big-endian two's-complement number of ``width`` bytes."""
    return base64.b64encode(value.to_bytes(width, "big", signed=True)).decode()


def test_numeric_without_a_scale_is_an_exact_decimal(lake):
    """PostgreSQL numeric (VariableScaleDecimal) lands as decimal(38,18); a value needing more
    than 18 fraction digits is dead-lettered, never rounded."""
    columns = {"id": INT32, "amount": VARIABLE_SCALE_DECIMAL}
    values = {
        1: {"scale": 2, "value": "AXDsL1/jGQ=="},  # PostgreSQL: 4056346861166.33
        2: {"scale": 1, "value": _unscaled(-15, 1)},  # -1.5
        3: {"scale": 0, "value": _unscaled(10**19, 9)},
        4: {"scale": 19, "value": _unscaled(1, 1)},  # 1E-19
    }
    lake.add_pipeline("pg", "debezium-json", keys={"items": ["id"]})
    lake.land(
        "pg",
        "000.json",
        [line(change("items", columns, "c", {"id": k, "amount": v})) for k, v in values.items()],
    )

    lake.run("pg")

    assert lake.rows("items") == [
        {"id": 1, "amount": Decimal("4056346861166.330000000000000000")},
        {"id": 2, "amount": Decimal("-1.500000000000000000")},
        {"id": 3, "amount": Decimal("10000000000000000000.000000000000000000")},
    ]
    assert lake.table("items").schema["amount"].dataType.simpleString() == "decimal(38,18)"
    [letter] = lake.dead_letters()
    assert letter["reason"].startswith("column 'amount': value '")
    assert "does not fit decimal(38,18) without rounding" in letter["reason"]


def test_numeric_without_a_scale_as_text_with_to_string(lake):
    """``type_mapping: to-string`` keeps the exact number as its text, whatever its scale (every
    column is text then, the key too)."""
    columns = {"id": INT32, "amount": VARIABLE_SCALE_DECIMAL}
    lake.add_pipeline("pg", "debezium-json", keys={"items": ["id"]}, type_mapping="to-string")
    lake.land(
        "pg",
        "000.json",
        [
            line(
                change("items", columns, "c", {"id": 1, "amount": {"scale": 19, "value": "AQ=="}})
            ),
            line(
                change(
                    "items",
                    columns,
                    "c",
                    {"id": 2, "amount": {"scale": 2, "value": "AXDsL1/jGQ=="}},
                )
            ),
        ],
    )

    lake.run("pg")

    assert lake.rows("items") == [
        {"id": "1", "amount": "0.0000000000000000001"},
        {"id": "2", "amount": "4056346861166.33"},
    ]


def test_connect_decimals_wider_than_eight_bytes(lake):
    """BIGINT UNSIGNED with bigint.unsigned.handling.mode=precise is decimal(20,0): 2^63 and
    2^64 - 1 are 9 bytes; a decimal(38,10) uses up to 16."""
    columns = {"id": INT32, "u": decimal(20, 0), "wide": decimal(38, 10)}
    rows = [
        # MariaDB sent 'AIAAAAAAAAAA' for 9223372036854775808.
        {"id": 1, "u": "AIAAAAAAAAAA", "wide": _unscaled(-(10**37) - 7, 16)},
        {"id": 2, "u": _unscaled(2**64 - 1, 9), "wide": _unscaled(12345678901234567890123, 10)},
    ]
    lake.add_pipeline("mdb", "debezium-json", keys={"big": ["id"]})
    lake.land("mdb", "000.json", [line(change("big", columns, "c", r)) for r in rows])

    lake.run("mdb")

    assert lake.rows("big") == [
        {
            "id": 1,
            "u": Decimal("9223372036854775808"),
            "wide": Decimal("-1000000000000000000000000000.0000000007"),
        },
        {
            "id": 2,
            "u": Decimal("18446744073709551615"),
            "wide": Decimal("1234567890123.4567890123"),
        },
    ]
    assert lake.dead_letters() == []


def test_a_wider_decimal_in_the_batch_of_its_modify(lake):
    """MODIFY amount DECIMAL(16,2) from (12,2): the changes before it are declared (12,2), those
    after it (16,2), and every value is exact in both (defect 5)."""
    lake.add_pipeline("mdb", "debezium-json", keys={"orders": ["id"]})
    narrow = {"id": INT32, "amount": decimal(12, 2)}
    wide = {"id": INT32, "amount": decimal(16, 2)}
    lake.land(
        "mdb",
        "000.json",
        [line(change("orders", narrow, "c", {"id": 1, "amount": _unscaled(5212020874, 5)}))],
    )
    lake.run("mdb")
    lake.land(
        "mdb",
        "001.json",
        [
            line(change("orders", narrow, "c", {"id": 2, "amount": _unscaled(5212020874, 5)})),
            line(change("orders", wide, "c", {"id": 3, "amount": _unscaled(99999999999999, 6)})),
        ],
    )

    lake.run("mdb")

    assert lake.rows("orders") == [
        {"id": 1, "amount": Decimal("52120208.74")},
        {"id": 2, "amount": Decimal("52120208.74")},
        {"id": 3, "amount": Decimal("999999999999.99")},
    ]
    assert lake.dead_letters() == []


def test_times_of_day_land_as_the_database_writes_them(lake):
    """MicroTime (µs since midnight) lands as HH:mm:ss[.ffffff], as PostgreSQL prints a time and
    MariaDB a TIME (a duration: past 24 hours, or negative)."""
    columns = {"id": INT32, "t": MICRO_TIME, "note": STRING}
    times = {
        1: 58700172401,  # 16:18:20.172401
        2: 3723000000,  # 01:02:03
        3: 3020399000000,  # 838:59:59, MariaDB's largest TIME
        4: -1500000,  # -00:00:01.5
        5: 45296100000,  # 12:34:56.1
    }
    lake.add_pipeline("pg", "debezium-json", keys={"slots": ["id"]})
    lake.land(
        "pg",
        "000.json",
        [
            line(change("slots", columns, "c", {"id": k, "t": v, "note": "x"}))
            for k, v in times.items()
        ],
    )

    lake.run("pg")

    assert [(r["id"], r["t"]) for r in lake.rows("slots")] == [
        (1, "16:18:20.172401"),
        (2, "01:02:03"),
        (3, "838:59:59"),
        (4, "-00:00:01.5"),
        (5, "12:34:56.1"),
    ]
