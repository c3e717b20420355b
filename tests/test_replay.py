"""Replays (replay_from/replay_to) and rebuilds (rebuild_tables) on real Iceberg tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cdc_ingest.landing.landed_time import LandedRange
from cdc_ingest.run.replays import ReplayRefused
from formats_under_test import keyless_blob_insert
from test_run_options import dele, ins, upd

CLI = str(Path(sys.executable).parent / "cdc-ingest")
KEYS = {"keys": {"orders": ["id"], "customers": ["id"]}}
DAY = 86400


def at(day: int) -> datetime:
    """Midnight UTC of 2026-11-<day>."""
    return datetime(2026, 11, day, tzinfo=UTC)


def land_on(lake: Any, name: str, day: int, lines: list[Any], pipeline: str = "shop") -> Path:
    """Land a file whose object time (mtime) is noon UTC of 2026-11-<day>."""
    path = lake.land(pipeline, name, lines)
    noon = at(day).timestamp() + DAY / 2
    os.utime(path, (noon, noon))
    return path


def run(lake: Any, pipeline: str = "shop", **options: Any) -> Any:
    return lake.run(pipeline, **options)


def replay(lake: Any, start: int | None, end: int | None, pipeline: str = "shop") -> Any:
    landed = LandedRange(at(start) if start else None, at(end) if end else None)
    return run(lake, pipeline, landed=landed)


def with_order(lake: Any, table: str) -> list[tuple[Any, ...]]:
    """Every row, source columns and ``_cdc_order``, sorted: what "the same table" compares."""
    df = lake.table(table)
    cols = [c for c in df.columns if not c.startswith("_cdc_")] + ["_cdc_order"]
    return sorted((tuple(r) for r in df.select(*cols).collect()), key=repr)


def checkpoint_rows(lake: Any, batch_id: int) -> list[tuple[str, str | None]]:
    rows = lake.table("_cdc_checkpoints").where(f"batch_id = {batch_id}").collect()
    return sorted((r["status"], r["file"]) for r in rows)


@pytest.fixture
def shop(lake: Any) -> Any:
    """Three daily files; day 2 updates order 1 with the same source time as its insert."""
    lake.add_pipeline("shop", "debezium-json", **KEYS)
    land_on(lake, "a.json", 20, [ins("orders", 1000, id=1, amount=10), "not json"])
    land_on(lake, "b.json", 21, [upd("orders", 1000, {"id": 1}, id=1, amount=11)])
    land_on(lake, "c.json", 22, [ins("customers", 3000, id=7, name="ann")])
    assert lake.run("shop").batch_id == 1
    return lake


def test_replay_selects_exactly_the_files_landed_in_the_range(shop: Any) -> None:
    uri = {n: (shop.landing("shop") / n).as_uri() for n in ("a.json", "b.json", "c.json")}

    summary = replay(shop, 21, 22)

    assert summary.batch_id == 2 and summary.files == [uri["b.json"]]
    assert summary.replay["of_batches"] == {uri["b.json"]: 1}
    assert checkpoint_rows(shop, 2) == [
        ("committed", None),
        ("planned", uri["b.json"]),
        ("replayed", uri["b.json"]),
    ]
    [row] = shop.table("_cdc_batches").where("batch_id = 2").collect()
    assert row["files"] == [uri["b.json"]] and not row["partial"]
    assert json.loads(row["summary"])["replay"]["mode"] == "replay"
    # Open ends, and a range with no file: an empty run records nothing.
    assert replay(shop, None, 21).files == [uri["a.json"]]
    assert replay(shop, 22, None).files == [uri["c.json"]]
    assert replay(shop, 1, 2).batch_id is None
    # The replayed files are still applied once, by batch 1, for the next ordinary run.
    assert shop.run("shop").batch_id is None


def test_replay_after_a_later_update_does_not_roll_the_table_back(shop: Any) -> None:
    before = with_order(shop, "orders")
    assert shop.rows("orders") == [{"id": 1, "amount": 11}]

    summary = replay(shop, 20, 21)  # a.json: the insert, as old by source time as the update

    assert summary.tables["orders"].older == 1 and summary.tables["orders"].updated == 0
    assert with_order(shop, "orders") == before


def test_replay_restores_lost_rows_and_doubles_no_dead_letter(shop: Any) -> None:
    shop.spark.sql(f"DELETE FROM {shop.catalog}.ods.customers WHERE id = 7")
    letters = shop.dead_letters()
    assert [(d["file"].rsplit("/", 1)[1], d["line"]) for d in letters] == [("a.json", 2)]

    summary = replay(shop, None, None)

    assert summary.tables["customers"].inserted == 1
    assert shop.rows("customers") == [{"id": 7, "name": "ann"}]
    assert summary.dead_lettered == 1 and shop.dead_letters() == letters


def test_replay_creates_no_table(shop: Any) -> None:
    shop.spark.sql(f"DROP TABLE {shop.catalog}.ods.customers")

    summary = replay(shop, 22, 23)

    assert summary.skipped_tables == {
        "customers": "does not exist: a replay creates no table (rebuild_tables re-creates one)"
    }
    assert "customers" not in {
        r["tableName"] for r in shop.spark.sql(f"SHOW TABLES IN {shop.catalog}.ods").collect()
    }


def test_replay_of_a_keyless_table_appends_nothing_twice(lake: Any) -> None:
    lake.add_pipeline("events", "datahub-blob")
    first, second = {"id": 1, "note": "first"}, {"id": 2, "note": "second"}
    land_on(lake, "001.json", 20, [keyless_blob_insert(first)], "events")
    land_on(lake, "002.json", 21, [keyless_blob_insert(second)], "events")
    lake.run("events")
    lake.run("events")
    original = with_order(lake, "events")

    summary = replay(lake, None, None, "events")

    assert summary.files and summary.tables.get("events") is None
    assert summary.already_applied == 2
    assert with_order(lake, "events") == original
    # A lost row comes back once, with its original position; the other is not appended again.
    lake.spark.sql(f"DELETE FROM {lake.catalog}.ods.events WHERE id = 2")
    replay(lake, 21, 22, "events")
    replay(lake, None, None, "events")
    assert with_order(lake, "events") == original


def test_replay_by_date_partition_in_the_path(lake: Any) -> None:
    lake.add_pipeline("shop", "debezium-json", landed_at={"path_pattern": "dt=%Y-%m-%d"}, **KEYS)
    (lake.landing("shop") / "dt=2026-11-20").mkdir()
    (lake.landing("shop") / "dt=2026-11-21").mkdir()
    lake.land("shop", "dt=2026-11-20/x.json", [ins("orders", 1000, id=1, amount=10)])
    lake.land("shop", "dt=2026-11-21/x.json", [ins("orders", 2000, id=2, amount=20)])
    lake.land("shop", "undated.json", [ins("orders", 3000, id=3, amount=30)])
    lake.run("shop")

    summary = replay(lake, 21, 22)

    assert summary.files == [(lake.landing("shop") / "dt=2026-11-21" / "x.json").as_uri()]
    assert summary.replay["landed_at"] == "path_pattern dt=%Y-%m-%d"


def test_rebuild_reproduces_damaged_and_dropped_tables(lake: Any) -> None:
    lake.add_pipeline("shop", "debezium-json", **KEYS)
    land_on(lake, "a.json", 20, [ins("orders", 1000, id=1, amount=10), "not json"])
    land_on(lake, "b.json", 21, [upd("orders", 1000, {"id": 1}, id=1, amount=11)])
    land_on(lake, "c.json", 21, [ins("orders", 1500, id=2, amount=5), dele("orders", 1600, id=2)])
    lake.run("shop")
    land_on(lake, "d.json", 22, [ins("customers", 3000, id=7, name="ann")])
    land_on(lake, "e.json", 22, [ins("orders", 1700, id=3, amount=9)])
    lake.run("shop")
    orders, customers = with_order(lake, "orders"), with_order(lake, "customers")
    letters = lake.dead_letters()
    lake.spark.sql(f"UPDATE {lake.catalog}.ods.orders SET amount = 0")
    mirror = f"{lake.catalog}.ods.orders"
    lake.spark.sql(f"INSERT INTO {mirror} VALUES (2, 99, X'8000000000000001', 'c', 1)")
    lake.spark.sql(f"DROP TABLE {lake.catalog}.ods.customers")

    summary = run(lake, rebuild_tables=("customers", "orders"))

    assert summary.batch_id == 3 and len(summary.files) == 5
    assert with_order(lake, "orders") == orders
    assert with_order(lake, "customers") == customers
    assert lake.dead_letters() == letters
    assert summary.replay["mode"] == "rebuild"


def test_rebuild_of_an_append_only_table_has_no_duplicates(lake: Any) -> None:
    lake.add_pipeline("events", "datahub-blob")
    land_on(lake, "001.json", 20, [keyless_blob_insert({"id": 1, "note": "a"})], "events")
    lake.run("events")
    land_on(lake, "002.json", 21, [keyless_blob_insert({"id": 2, "note": "b"})], "events")
    lake.run("events")
    original = with_order(lake, "events")

    run(lake, "events", rebuild_tables=("events",))
    run(lake, "events", rebuild_tables=("events",))

    assert with_order(lake, "events") == original


def test_rebuild_refuses_a_table_not_of_the_pipeline(shop: Any) -> None:
    with pytest.raises(ReplayRefused, match="rebuild_tables nope: not a table of pipeline shop"):
        run(shop, rebuild_tables=("nope", "orders"))
    assert [
        r["tableName"]
        for r in shop.spark.sql(f"SHOW TABLES IN {shop.catalog}.ods LIKE 'orders'").collect()
    ] == ["orders"]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def test_killed_rebuild_is_finished_by_the_next_ordinary_run(shop: Any) -> None:
    orders = with_order(shop, "orders")
    config = ("--config", str(shop.config_path), "--pipeline", "shop")

    killed = cli(
        "run", *config, "--rebuild-tables=orders", env={"CDC_INGEST_FAIL_AT": "after_tables"}
    )
    assert killed.returncode == 99, killed.stderr[-2000:]
    again = cli("run", *config, "--replay-from=2026-11-20")
    assert again.returncode == 2 and "planned and not committed" in again.stderr
    rerun = cli("run", *config, "--json")
    assert rerun.returncode == 0, rerun.stderr[-2000:]

    summary = json.loads(rerun.stdout.splitlines()[-1])
    assert summary["resumed"] and summary["replay"]["mode"] == "rebuild"
    assert with_order(shop, "orders") == orders
    assert shop.table("_cdc_batches").where("batch_id = 2").count() == 1


def test_killed_keyless_replay_appends_once(lake: Any) -> None:
    lake.add_pipeline("events", "datahub-blob")
    land_on(lake, "001.json", 20, [keyless_blob_insert({"id": 1, "note": "a"})], "events")
    lake.run("events")
    lake.spark.sql(f"DELETE FROM {lake.catalog}.ods.events")
    config = ("--config", str(lake.config_path), "--pipeline", "events", "--replay-from=2026-11-01")

    killed = cli("run", *config, env={"CDC_INGEST_FAIL_AT": "after_tables"})
    assert killed.returncode == 99, killed.stderr[-2000:]
    rerun = cli("run", *config)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "batch 2 (resumed)" in rerun.stdout
    assert lake.rows("events") == [{"id": 1, "note": "a"}]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--replay-from=yesterday"], "is not an ISO 8601 date"),
        (["--replay-from=2026-11-21", "--replay-to=2026-11-20"], "must be before replay_to"),
        (["--replay-to=2026-11-20", "--rebuild-tables=a"], "exclude each other"),
        (["--replay-from=2026-11-20", "--max-files=3"], "do not apply to a replay"),
    ],
)
def test_bad_replay_flags_exit_2(flags: list[str], message: str) -> None:
    done = cli("run", "--config", "c.yaml", "--pipeline", "p", *flags)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_replay_flags_parse_as_airflow_renders_them() -> None:
    from cdc_ingest.cli import _parser

    base = ["run", "--config", "c.yaml", "--pipeline", "p"]
    unset = _parser().parse_args([*base, "--replay-from=", "--replay-to=", "--rebuild-tables="])
    assert (unset.replay_from, unset.replay_to, unset.rebuild_tables) == (None, None, ())
    interval = _parser().parse_args(
        [*base, "--replay-from=2026-11-20T00:00:00+00:00", "--replay-to=2026-11-21T01:00:00+01:00"]
    )
    assert (interval.replay_from, interval.replay_to) == (at(20), at(21))


def test_replay_and_rebuild_of_a_stream_with_ddl(lake: Any) -> None:
    from test_schema_evolution import columns, ddl, history, row

    lake.add_pipeline("shop", "canal-json")
    land_on(lake, "a.json", 20, [row("INSERT", {"id": 0, "v1": "zero"}), row("INSERT", {"id": 1})])
    lake.run("shop")
    land_on(
        lake,
        "b.json",
        21,
        [
            ddl("ALTER TABLE orders ADD COLUMN v2 INT"),
            row("UPDATE", {"id": 1, "v1": "one", "v2": 10}),
            ddl("ALTER TABLE orders DROP COLUMN v1"),
            row("INSERT", {"id": 2, "v2": 20}),
        ],
    )
    lake.run("shop")
    table, recorded = with_order(lake, "orders"), history(lake)
    assert columns(lake) == ["id", "v2"] and len(recorded) == 2

    # A replay re-runs no statement and adds no column (a.json still carries v1).
    summary = replay(lake, None, None)
    assert summary.batch_id == 3 and len(summary.files) == 2
    assert columns(lake) == ["id", "v2"] and with_order(lake, "orders") == table
    assert history(lake) == recorded

    # A rebuild runs the statements again, at their positions, and records none twice.
    run(lake, rebuild_tables=("orders",))
    assert columns(lake) == ["id", "v2"] and with_order(lake, "orders") == table
    assert history(lake) == recorded
