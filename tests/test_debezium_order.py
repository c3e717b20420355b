"""Debezium's order: the initial snapshot first, then the source's time and its connector's
position (MySQL's binlog file and position, PostgreSQL's LSN, Oracle's SCN, SQL Server's event
serial number), whatever order the changes were landed in. Each message's ``source`` carries the
fields a connector sends besides (version, connector, gtid, query, Postgres' ``sequence``…), which
the job does not read."""

from __future__ import annotations

import json

TIME = 1_700_000_000_000


def change(op: str, key: int, v: str, **source: object) -> str:
    """A Debezium change of ``shop.orders`` whose source holds ``source`` over a MySQL source."""
    fields = {
        "version": "2.5.0.Final",
        "connector": "mysql",
        "name": "dbserver1",
        "ts_ms": TIME,
        "snapshot": "false",
        "db": "shop",
        "sequence": None,
        "table": "orders",
        "server_id": 223344,
        "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23",
        "file": "mysql-bin.000003",
        "pos": 154,
        "row": 0,
        "thread": 7,
        "query": None,
    }
    fields.update(source)
    before = {"id": key, "v": "before"} if op != "c" else None
    return json.dumps(
        {
            "before": before,
            "after": {"id": key, "v": v},
            "source": fields,
            "op": op,
            "ts_ms": TIME + 100,
            "transaction": None,
        }
    )


def test_debezium_orders_by_snapshot_then_source_time_then_connector_position(lake):
    lake.add_pipeline("shop", "debezium-json", keys={"orders": ["id"]})
    landed = [
        # The initial snapshot is older than the stream, whatever its read time (a boolean
        # from Debezium 1.x, a string since).
        change("u", 1, "newest", ts_ms=TIME - 50_000),
        change("r", 1, "old", ts_ms=TIME, snapshot="last"),
        change("r", 7, "old", ts_ms=TIME, snapshot=True),
        change("u", 7, "newest", ts_ms=TIME - 50_000),
        # The same time: the later binlog file wins, then the later position, then the row.
        change("u", 2, "newest", file="mysql-bin.000004", pos=10),
        change("c", 2, "old", file="mysql-bin.000003", pos=900),
        change("u", 3, "newest", pos=500),
        change("c", 3, "old", pos=400),
        change("u", 4, "newest", pos=400, row=1),
        change("c", 4, "old", pos=400, row=0),
        # PostgreSQL: the LSN (the sequence, a JSON array in a string, is not read).
        change("u", 5, "newest", connector="postgresql", lsn=24023128, sequence='["1","2"]'),
        change("c", 5, "old", connector="postgresql", lsn=24023000, sequence='["1","1"]'),
        # Oracle: the SCN, sent as a string, compared as a number ("9000" sorts before "800"
        # as text).
        change("u", 6, "newest", connector="oracle", scn="9000"),
        change("c", 6, "old", connector="oracle", scn="800"),
        # SQL Server: the event serial number within one change's LSN.
        change("u", 8, "newest", connector="sqlserver", event_serial_no=2),
        change("c", 8, "old", connector="sqlserver", event_serial_no=1),
    ]
    lake.land("shop", "orders.json", landed)
    summary = lake.run("shop")
    assert (summary.lines, summary.dead_lettered) == (16, 0)
    assert summary.tables["orders"].superseded == 8
    rows = {r["id"]: r["v"] for r in lake.rows("orders", "id", "v")}
    assert rows == {key: "newest" for key in range(1, 9)}
