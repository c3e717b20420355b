"""SCD type 2 history tables (``history: scd2``), on real Iceberg tables through real runs.

The first tests transcribe Databricks' published AUTO CDC example ("SCD type 1 and type 2
processing", users 123 to 126 with their ``sequenceNum``): its change records, and the tables
the documentation says AUTO CDC leaves, for SCD type 1 (the mirror), SCD type 2 (the history)
and SCD type 2 with ``city`` untracked (TRACK HISTORY ON * EXCEPT (city)). Its ``sequenceNum``
is both the order and the time of a change: here it is Canal's ``es`` (event time, in epoch
millis), which Canal's decoder also orders by. The records arrive in two batches: the second
holds the updates at sequence 5, which arrive after those at 6 were applied.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

TYPES = {"userId": "INT", "name": "VARCHAR(20)", "city": "VARCHAR(20)"}
CLI = str(Path(sys.executable).parent / "cdc-ingest")


def _user(kind: str, user_id: int, name: str | None, city: str | None, seq: int) -> dict:
    return {
        "data": [{"userId": user_id, "name": name, "city": city}],
        "database": "crm",
        "es": seq,
        "isDdl": False,
        "mysqlType": TYPES,
        "old": None,
        "pkNames": ["userId"],
        "sql": "",
        "table": "users",
        "type": kind,
    }


# The example's records, in the order the documentation lists them.
FIRST = [
    _user("INSERT", 124, "Raul", "Oaxaca", 1),
    _user("INSERT", 123, "Isabel", "Monterrey", 1),
    _user("INSERT", 125, "Mercedes", "Tijuana", 2),
    _user("INSERT", 126, "Lily", "Cancun", 2),
    _user("DELETE", 123, None, None, 6),
    _user("UPDATE", 125, "Mercedes", "Guadalajara", 6),
]
# "This batch of updates arrived out of order."
LATE = [
    _user("UPDATE", 125, "Mercedes", "Mexicali", 5),
    _user("UPDATE", 123, "Isabel", "Chihuahua", 5),
]


def _at(seq: int | None) -> datetime | None:
    return None if seq is None else datetime(1970, 1, 1) + timedelta(milliseconds=seq)


def _versions(lake: Any, table: str = "users_history") -> list[tuple[Any, ...]]:
    """(userId, name, city, start, end, current, op) of each version, by key and start."""
    rows = lake.table(table).collect()
    versions = (
        (
            r["userId"],
            r["name"],
            r["city"],
            r["_cdc_valid_from"],
            r["_cdc_valid_to"],
            r["_cdc_current"],
            r["_cdc_op"],
        )
        for r in rows
    )
    return sorted(versions, key=lambda v: (v[0], v[3], v[6] == "delete"))


def _published(*rows: tuple[int, str, str, int, int | None]) -> list[tuple[Any, ...]]:
    """The documentation's (userId, name, city, __START_AT, __END_AT) rows as versions here."""
    return [(u, n, c, _at(start), _at(end)) for u, n, c, start, end in rows]


def _users_pipeline(lake: Any, **history: Any) -> None:
    lake.add_pipeline(
        "crm",
        "canal-json",
        table_options={"users": {"history": "scd2", **history}},
    )


@pytest.mark.parametrize("join", ["plain", "listed keys", "bloom filter"])
def test_databricks_scd2_example_over_two_batches(lake, utc_session, monkeypatch, join):
    """``join``: how the late batch's MERGE into the history keeps the table's other rows out
    (as a larger table's would: forced here)."""
    from cdc_ingest.apply import few_keys, history, runtime_filter

    taken: list[str] = []
    if join == "listed keys":
        monkeypatch.setattr(few_keys, "LARGER", 0)

        def listed(*args: Any) -> str:
            condition = few_keys.listed_keys(*args)
            column, values = condition.split(" IN ")  # the keys in no particular order
            taken.append(f"{column} IN {sorted(int(v) for v in values.strip('()').split(','))}")
            return condition

        monkeypatch.setattr(history, "listed_keys", listed)
    if join == "bloom filter":
        monkeypatch.setattr(history, "listed_keys", lambda *args: "")
        monkeypatch.setattr(runtime_filter, "LARGER", 0)

        def filtered(spark: Any, changes: int) -> Any:
            taken.append(f"bloom {changes}")
            return runtime_filter.bloom_filtered(spark, changes)

        monkeypatch.setattr(history, "bloom_filtered", filtered)
    _users_pipeline(lake)
    lake.land("crm", "0001.json", FIRST)
    lake.run("crm")
    lake.land("crm", "0002.json", LATE)
    summary = lake.run("crm")

    # SCD type 1, as published: the mirror.
    assert lake.rows("users") == [
        {"userId": 124, "name": "Raul", "city": "Oaxaca"},
        {"userId": 125, "name": "Mercedes", "city": "Guadalajara"},
        {"userId": 126, "name": "Lily", "city": "Cancun"},
    ]
    versions = _versions(lake)
    # SCD type 2, as published; here a delete is kept as a version of no length.
    assert [v[:5] for v in versions if v[6] != "delete"] == _published(
        (123, "Isabel", "Monterrey", 1, 5),
        (123, "Isabel", "Chihuahua", 5, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Tijuana", 2, 5),
        (125, "Mercedes", "Mexicali", 5, 6),
        (125, "Mercedes", "Guadalajara", 6, None),
        (126, "Lily", "Cancun", 2, None),
    )
    assert [v for v in versions if v[6] == "delete"] == [
        (123, None, None, _at(6), _at(6), False, "delete")
    ]
    # The key's current version, and how each version began.
    assert [(v[0], v[2], v[5], v[6]) for v in versions if v[6] != "delete"] == [
        (123, "Monterrey", False, "insert"),
        (123, "Chihuahua", False, "update"),
        (124, "Oaxaca", True, "insert"),
        (125, "Tijuana", False, "insert"),
        (125, "Mexicali", False, "update"),
        (125, "Guadalajara", True, "update"),
        (126, "Cancun", True, "insert"),
    ]
    assert summary.tables["users"].history_changes == 2
    # The first batch appends to the empty table; the late one merges its two keys' versions.
    assert (
        taken
        == {
            "plain": [],
            "listed keys": [" AND t.`userId` IN [123, 125]"],
            "bloom filter": ["bloom 2"],
        }[join]
    )


# After FIRST: changes newer than what the mirror holds for their keys (in order), and one late.
IN_ORDER = [
    _user("UPDATE", 124, "Raul", "Oaxaca", 7),  # the values its current version holds
    _user("INSERT", 127, "Ana", "Puebla", 7),
    _user("UPDATE", 126, "Lily", "Merida", 8),
    _user("DELETE", 126, None, None, 9),
    _user("INSERT", 123, "Isabel", "Leon", 10),  # deleted at 6
    _user("UPDATE", 125, "Mercedes", "Ensenada", 3),  # older than its row (6): late
]


def _late_keys(monkeypatch: Any) -> list[list[int]]:
    """The keys each history placement read the stored versions of, as the run goes."""
    from cdc_ingest.apply import history

    read: list[list[int]] = []
    stored_rows = history._stored_rows

    def recorded(spark: Any, identifier: str, events: Any, *args: Any) -> Any:
        read.append(sorted(r[0] for r in events.select("userId").distinct().collect()))
        return stored_rows(spark, identifier, events, *args)

    monkeypatch.setattr(history, "_stored_rows", recorded)
    return read


def test_in_order_changes_follow_the_current_version_and_only_late_keys_read_the_history(
    lake, utc_session, monkeypatch
):
    """Only the late key's versions are read; the others are placed after the current version
    the mirror's classification says they follow, which the first extends (124: the same
    values) or closes (126); a key deleted before (123) or new (127) opens with an insert."""
    _users_pipeline(lake)
    lake.land("crm", "0001.json", FIRST)
    lake.run("crm")
    read = _late_keys(monkeypatch)
    lake.land("crm", "0002.json", IN_ORDER)
    summary = lake.run("crm")

    assert read == [[125]]
    assert lake.rows("users") == [
        {"userId": 123, "name": "Isabel", "city": "Leon"},
        {"userId": 124, "name": "Raul", "city": "Oaxaca"},
        {"userId": 125, "name": "Mercedes", "city": "Guadalajara"},
        {"userId": 127, "name": "Ana", "city": "Puebla"},
    ]
    assert _versions(lake) == [
        (123, "Isabel", "Monterrey", _at(1), _at(6), False, "insert"),
        (123, None, None, _at(6), _at(6), False, "delete"),
        (123, "Isabel", "Leon", _at(10), None, True, "insert"),
        (124, "Raul", "Oaxaca", _at(1), None, True, "insert"),
        (125, "Mercedes", "Tijuana", _at(2), _at(3), False, "insert"),
        (125, "Mercedes", "Ensenada", _at(3), _at(6), False, "update"),
        (125, "Mercedes", "Guadalajara", _at(6), None, True, "update"),
        (126, "Lily", "Cancun", _at(2), _at(8), False, "insert"),
        (126, "Lily", "Merida", _at(8), _at(9), False, "update"),
        (126, None, None, _at(9), _at(9), False, "delete"),
        (127, "Ana", "Puebla", _at(7), None, True, "insert"),
    ]
    assert summary.tables["users"].history_changes == 6
    # The version 124's change extended is the batch's now, as its newest change is.
    extended = lake.spark.sql(
        f"SELECT _cdc_batch_id FROM {lake.catalog}.ods.users_history WHERE userId = 124"
    ).collect()
    assert [r[0] for r in extended] == [summary.batch_id]


def test_an_in_order_change_to_an_untracked_column_extends_the_current_version(
    lake, utc_session, monkeypatch
):
    _users_pipeline(lake, history_except_columns=["city"])
    lake.land("crm", "0001.json", FIRST)
    lake.run("crm")
    read = _late_keys(monkeypatch)
    lake.land(
        "crm",
        "0002.json",
        [
            _user("UPDATE", 124, "Raul", "Puebla", 7),
            _user("UPDATE", 126, "Lilian", "Cancun", 8),
        ],
    )
    summary = lake.run("crm")

    assert read == []
    assert [v for v in _versions(lake) if v[0] in (124, 126)] == [
        (124, "Raul", "Puebla", _at(1), None, True, "insert"),
        (126, "Lily", "Cancun", _at(2), _at(8), False, "insert"),
        (126, "Lilian", "Cancun", _at(8), None, True, "update"),
    ]
    assert summary.tables["users"].history_changes == 2


def test_the_asset_event_names_the_snapshots_the_batch_committed(lake, utc_session):
    """What a downstream DAG gets: the batch's snapshots of the mirror and of its history, and
    the versions the batch wrote (``_cdc_batch_id``)."""
    import json

    from cdc_ingest_airflow.assets import table_events
    from cdc_ingest_airflow.lake_state import batch_tables

    _users_pipeline(lake)
    lake.land("crm", "0001.json", FIRST)
    first = json.loads(lake.run("crm").to_json())
    lake.land("crm", "0002.json", LATE)
    late = json.loads(lake.run("crm").to_json())

    created = batch_tables(str(lake.config_path), first)[0]["users"]
    assert created["snapshots"] and created["previous_snapshot"] is None
    assert created["history_table"] == "users_history" and created["history_snapshots"]
    # The late updates are older than the mirror's rows: only the history changed.
    [event] = table_events(late, batch_tables(str(lake.config_path), late)[0]).values()
    assert (event["updated"], event["snapshots"], event["history_table"]) == (
        0,
        [],
        "users_history",
    )
    [snapshot] = event["history_snapshots"]
    history = lake.spark.sql(
        f"SELECT userId, city FROM {lake.catalog}.ods.users_history VERSION AS OF {snapshot} "
        f"WHERE _cdc_batch_id = {event['batch_id']} ORDER BY userId"
    ).collect()
    assert [tuple(r) for r in history] == [(123, "Chihuahua"), (125, "Mexicali")]


def test_databricks_example_with_city_untracked(lake, utc_session):
    """TRACK HISTORY ON * EXCEPT (city): a city change updates the version it falls in."""
    _users_pipeline(lake, history_except_columns=["city"])
    lake.land("crm", "0001.json", FIRST)
    lake.run("crm")
    lake.land("crm", "0002.json", LATE)
    lake.run("crm")

    versions = _versions(lake)
    assert [v[:5] for v in versions if v[6] != "delete"] == _published(
        (123, "Isabel", "Chihuahua", 1, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Guadalajara", 2, None),
        (126, "Lily", "Cancun", 2, None),
    )


def test_a_replay_of_applied_files_never_doubles_a_version(lake, utc_session):
    from cdc_ingest.landing.landed_time import LandedRange

    _users_pipeline(lake)
    lake.land("crm", "0001.json", FIRST)
    lake.run("crm")
    lake.land("crm", "0002.json", LATE)
    lake.run("crm")
    before = _versions(lake)
    assert len(before) == 8
    # Every committed file again (an open range), in a batch of its own.
    again = lake.run("crm", landed=LandedRange())
    assert again.batch_id == 3 and again.tables["users"].history_changes == 0
    assert _versions(lake) == before


def test_maintain_compacts_history_tables_and_the_status_page_shows_them(lake, utc_session):
    from cdc_ingest.config import load_config
    from cdc_ingest.maintenance import maintain_pipeline

    lake.add_pipeline(
        "crm",
        "canal-json",
        table_options={"users": {"history": "scd2"}},
        maintenance={"retain_snapshots": 1},
    )
    lake.land("crm", "0001.json", FIRST)
    lake.run("crm")
    lake.land("crm", "0002.json", LATE)
    lake.run("crm")
    before = _versions(lake)
    # The status page says which tables keep history, and where.
    from cdc_ingest_airflow.pipeline_status import gather
    from cdc_ingest_airflow.status_html import render

    [status] = gather(str(lake.config_path)).pipelines
    [users] = status.tables
    assert (users.history, users.history_rows) == ("users_history", 8)
    assert "<td>users_history (8 versions)</td>" in render(gather(str(lake.config_path)))

    summary = maintain_pipeline(lake.spark, load_config(lake.config_path), "crm")

    [history] = [t for t in summary.tables if t.table == "users_history"]
    assert history.data_files[0] >= 2 and history.data_files[1] == 1
    assert history.delete_files[1] == 0
    assert _versions(lake) == before


@pytest.mark.slow
def test_a_batch_killed_after_its_tables_resumes_without_doubling_a_version(lake, utc_session):
    """The process dies once the mirror and its history are committed, before the checkpoint:
    the rerun resumes the batch and finds this part of the history done (its commit notes),
    counting what the killed attempt placed."""
    _users_pipeline(lake)
    lake.land("crm", "0001.json", FIRST)
    killed = subprocess.run(
        [CLI, "run", "--config", str(lake.config_path), "--pipeline", "crm", "--cold"],
        env={**os.environ, "CDC_INGEST_FAIL_AT": "after_tables"},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == 99, killed.stderr[-2000:]
    committed = _versions(lake)
    assert len(committed) == 6

    resumed = lake.run("crm")

    assert resumed.resumed and resumed.batch_id == 1
    # As the mirror's counts, the history's are those of the attempt that committed it.
    assert resumed.tables["users"].history_changes == 6
    assert _versions(lake) == committed
    assert [v[:5] for v in committed if v[6] != "delete"] == _published(
        (123, "Isabel", "Monterrey", 1, 6),
        (124, "Raul", "Oaxaca", 1, None),
        (125, "Mercedes", "Tijuana", 2, 6),
        (125, "Mercedes", "Guadalajara", 6, None),
        (126, "Lily", "Cancun", 2, None),
    )
