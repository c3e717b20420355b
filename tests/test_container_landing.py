"""Avro and Parquet landing zones (``file_format``): Debezium envelopes as Kafka Connect's S3 sinks
write them, with Connect's logical types, give the mirror the same changes in JSON give.

The files and their JSON twins are written by debezium_containers.py (fastavro and pyarrow, with
the schema Confluent's AvroConverter derives for a Debezium MySQL table).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from debezium_containers import (
    FIRST,
    SECOND,
    avro_schema,
    connect_json,
    write_avro,
    write_parquet,
)

# What FIRST and SECOND leave, by hand: id 1 updated, 2 deleted, 3 dead-lettered, 4 inserted.
WANT = {
    1: ("c1", Decimal("99.99"), dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5, 678902)),
    4: ("c4", Decimal("0.10"), dt.date(2024, 1, 5), dt.datetime(2024, 1, 2, 3, 4, 5, 678905)),
}


def mirrored(lake, namespace: str) -> dict[int, tuple]:
    rows = lake.table("customers", namespace=namespace).collect()
    return {r["id"]: (r["name"], r["amount"], r["born"], r["updated"]) for r in rows}


@pytest.fixture(params=["file", "s3"])
def zone(request, monkeypatch) -> str:
    """Where the container files land: a local directory, or a bucket of a real S3 endpoint."""
    if request.param == "s3":
        s3 = request.getfixturevalue("s3_server")
        s3.ensure_bucket("sinks")
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    return str(request.param)


def land_containers(zone: str, landing: Path, files: dict[str, tuple[dict, list]]) -> str:
    """Write each file (name: writer schema, records) into the landing directory or, for
    ``s3``, upload it under ``s3://sinks/<directory name>/``; returns the landing zone's URI."""
    for name, (schema, records) in files.items():
        (write_avro if name.endswith(".avro") else write_parquet)(landing / name, schema, records)
    if zone == "file":
        return landing.as_uri()
    client = lake_s3_client()
    for name in files:
        client.upload_file(str(landing / name), "sinks", f"{landing.name}/topics/{name}")
        (landing / name).unlink()
    return f"s3://sinks/{landing.name}"


def lake_s3_client() -> Any:
    import os

    import boto3

    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])


@pytest.mark.parametrize("file_format", ["avro", "parquet"])
def test_debezium_container_files_give_the_mirror_of_the_same_changes_in_json(
    lake, file_format, zone
):
    landing = lake.add_pipeline(
        "binary",
        "debezium-json",
        file_format=file_format,
        namespace="binary",
        keys={"customers": ["id"]},
    )
    uri = land_containers(
        zone,
        landing,
        {
            f"customers+0+0.{file_format}": (avro_schema(), FIRST),
            f"customers+0+4.{file_format}": (avro_schema(with_email=True), SECOND),
        },
    )
    lake.add_pipeline(
        "binary",
        "debezium-json",
        file_format=file_format,
        namespace="binary",
        keys={"customers": ["id"]},
        landing=uri,
    )
    lake.add_pipeline("text", "debezium-json", namespace="text", keys={"customers": ["id"]})
    lake.land("text", "first.json", [connect_json(m, False) for m in FIRST])
    lake.land("text", "second.json", [connect_json(m, True) for m in SECOND])

    summary = lake.run("binary")
    assert (summary.lines, summary.dead_lettered) == (6, 1)
    assert lake.run("text").dead_lettered == 1
    assert mirrored(lake, "binary") == mirrored(lake, "text") == WANT
    types = {f.name: f.dataType.simpleString() for f in lake.table("customers", "binary").schema}
    assert (types["amount"], types["born"], types["updated"]) == (
        "decimal(10,2)",
        "date",
        "timestamp_ntz",
    )
    assert [r["email"] for r in lake.rows("customers", "id", "email", namespace="binary")] == [
        None,
        "d@x",
    ]
    [letter] = lake.dead_letters("binary")
    assert (unquote(letter["file"]).rsplit("/", 1)[-1], letter["line"], letter["kafka_offset"]) == (
        f"customers+0+0.{file_format}",
        4,
        3,
    )
    assert letter["reason"] == "unknown op 'x'"
    offsets = {
        (unquote(r["file"]).rsplit("/", 1)[-1], r["kafka_topic"], r["kafka_partition"]): (
            r["min_offset"],
            r["max_offset"],
        )
        for r in lake.table("_cdc_checkpoints", "binary").where("status = 'applied'").collect()
    }
    assert offsets == {
        (f"customers+0+0.{file_format}", "customers", 0): (0, 3),
        (f"customers+0+4.{file_format}", "customers", 0): (4, 5),
    }


KEY_SCHEMA = {
    "type": "record",
    "name": "Key",
    "namespace": "dbserver1.shop.customers",
    "fields": [{"name": "id", "type": "long"}],
    "connect.name": "dbserver1.shop.customers.Key",
}
HEADERS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "record",
        "name": "Header",
        "fields": [{"name": "key", "type": "string"}, {"name": "value", "type": "string"}],
    },
}


def write_companions(landing: Path, name: str, changes: list[dict]) -> None:
    """The keys and headers Confluent's sink stores beside a values file (``store.kafka.keys``,
    ``store.kafka.headers``): Avro as the records themselves, Parquet wrapped in a field."""
    stem, extension = name.rsplit(".", 1)
    ids = [(c["after"] or c["before"])["id"] for c in changes]
    headers = [[{"key": "trace", "value": f"t{i}"}] for i in ids]
    if extension == "avro":
        write_avro(landing / f"{stem}.keys.avro", KEY_SCHEMA, [{"id": i} for i in ids])
        write_avro(landing / f"{stem}.headers.avro", HEADERS_SCHEMA, headers)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = pa.table({"key": pa.array([{"id": i} for i in ids], pa.struct([("id", pa.int64())]))})
    pq.write_table(keys, landing / f"{stem}.keys.parquet")
    pq.write_table(pa.table({"headers": headers}), landing / f"{stem}.headers.parquet")


@pytest.mark.parametrize("file_format", ["avro", "parquet"])
def test_keys_the_sink_stored_beside_the_values_key_the_changes(lake, file_format, zone):
    landing = lake.add_pipeline("keyed", "debezium-json", file_format=file_format)
    files = {
        f"customers+0+0.{file_format}": (avro_schema(), FIRST),
        f"customers+0+4.{file_format}": (avro_schema(with_email=True), SECOND),
    }
    for name, (_, changes) in files.items():
        write_companions(landing, name, changes)
    if zone == "s3":
        client = lake_s3_client()
        for companion in sorted(landing.glob("*.keys.*")) + sorted(landing.glob("*.headers.*")):
            client.upload_file(str(companion), "sinks", f"{landing.name}/topics/{companion.name}")
    uri = land_containers(zone, landing, files)
    # No keys: in the pipeline: without the stored keys every change would be a dead letter.
    lake.add_pipeline("keyed", "debezium-json", file_format=file_format, landing=uri)

    summary = lake.run("keyed")
    assert (summary.lines, summary.dead_lettered) == (6, 1)
    assert mirrored(lake, "ods") == WANT


def test_container_files_need_no_envelope(tmp_path):
    from cdc_ingest.config import ConfigError, load_config

    path = tmp_path / "pipelines.yaml"
    head = "catalog: {name: lake, uri: 'sqlite:////tmp/x.db', warehouse: 'file:///tmp/w'}\n"
    cases = {
        "landing: 'file:///l', file_format: parquet, envelope: kafka": "envelope must be none",
        "landing: 'file:///l', file_format: orc": "file_format: 'orc' must be one of json, avro",
    }
    for keys, message in cases.items():
        path.write_text(
            head
            + "pipelines:\n  - {name: p, format: debezium-json, namespace: ods, "
            + keys
            + "}\n"
        )
        with pytest.raises(ConfigError, match=message):
            load_config(path)


def test_only_the_zones_format_is_listed(tmp_path):
    from cdc_ingest.landing.zones import list_landed

    landed = ("t+0+0.avro", "t+0+9.parquet", "a.json", ".t+0+5.avro", "notes.txt")
    companions = ("t+0+0.keys.avro", "t+0+0.headers.avro", "t+0+9.keys.parquet")
    for name in landed + companions:
        (tmp_path / name).write_text("x")
    names = {
        fmt: [f.uri.rsplit("/", 1)[-1] for f in list_landed(tmp_path.as_uri(), file_format=fmt)]
        for fmt in ("avro", "parquet", "json")
    }
    assert names == {
        "avro": ["t%2B0%2B0.avro"],
        "parquet": ["t%2B0%2B9.parquet"],
        "json": ["a.json", "notes.txt"],
    }
