"""Paimon's "aliyun-json" cases (AliyunJsonRecordParserTest) through ``datahub-blob``.

Paimon's aliyun-json is DataWorks real-time sync to Kafka: the DataHub Blob message. Each event file
(an Apache license comment, then one message) is one batch, in the expected file's case order; the
expected kind (+I, +U, -D) of each case says how its rows count, and the table each case leaves
behind is written out by hand below (Paimon's test checks the kinds and images only). ``val`` is a
DOUBLE sent as text ("1.100000"); ``create_time`` a DATE in epoch ms.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from canal_expectations import expected, json_lines
from conftest import CONFORMANCE, Lake

PAIMON = CONFORMANCE / "paimon"
EXPECTED = PAIMON / "expected" / "aliyun-json.expected.json"
TABLE_TEMPLATE = "{db}_{table}"  # the target name then shows both the database and the table
COLUMN_TYPES = {"id": "bigint", "val": "double", "name": "string", "create_time": "timestamp"}


def cases() -> list[dict[str, Any]]:
    return list(expected(EXPECTED)["cases"])


# The table after each case, by hand: the insert of id 2 (1731661114000 ms is 2024-11-15 08:58:34
# UTC), its update to val 2.2, then the delete of id 1, which the table never held.
CREATED = dt.datetime(2024, 11, 15, 8, 58, 34)
TABLE_AFTER = [
    [{"id": 2, "val": 1.1, "name": "a", "create_time": CREATED}],
    [{"id": 2, "val": 2.2, "name": "a", "create_time": CREATED}],
    [{"id": 2, "val": 2.2, "name": "a", "create_time": CREATED}],
]


@pytest.fixture(scope="module")
def paimon_aliyun(spark, tmp_path_factory):
    """Every case file as one batch; the table after each batch kept as ``<table>_step<i>``."""
    lake = Lake(root=tmp_path_factory.mktemp("paimon_aliyun"), spark=spark, catalog="aliyun")
    lake.add_pipeline("aliyun", "datahub-blob", table=TABLE_TEMPLATE)
    summaries: list[Any] = []
    for step, case in enumerate(cases()):
        lines = json_lines(PAIMON / case["file"])
        assert len(lines) == case["records"], case["file"]
        lake.land("aliyun", f"{step:02d}-{case['file'].rsplit('/', 1)[-1]}", lines)
        summaries.append(lake.run("aliyun"))
        target = f"{case['database']}_{case['table']}"
        lake.spark.sql(
            f"CREATE TABLE {lake.catalog}.ods.{target}_step{step} AS "
            f"SELECT * FROM {lake.catalog}.ods.{target}"
        )
    return lake, summaries


@pytest.mark.parametrize("step", range(len(cases())), ids=[c["file"] for c in cases()])
def test_paimon_aliyun_case_applies_its_kind_and_leaves_the_expected_table(paimon_aliyun, step):
    lake, summaries = paimon_aliyun
    case, summary = cases()[step], summaries[step]
    target = f"{case['database']}_{case['table']}"
    assert summary.dead_lettered == 0, summary.dead_letter_samples
    assert summary.messages == case["records"]
    counts = summary.tables[target]
    applied = {
        "+I": counts.inserted,
        "+U": counts.updated,
        "-D": counts.deleted + counts.deleted_absent,
    }[case["kind"][:2]]
    assert applied == case["records"]
    frame = lake.table(f"{target}_step{step}")
    assert {
        f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name in COLUMN_TYPES
    } == COLUMN_TYPES
    rows = sorted(
        (r.asDict() for r in frame.select(*COLUMN_TYPES).collect()), key=lambda r: r["id"]
    )
    assert rows == TABLE_AFTER[step]
    props = {
        r["key"]: r["value"]
        for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.catalog}.ods.{target}").collect()
    }
    assert props["cdc.keys"].split(",") == case["primary_keys"]


def test_paimon_aliyun_final_table_is_the_updated_row_and_the_delete_of_an_absent_id(paimon_aliyun):
    lake, summaries = paimon_aliyun
    assert lake.rows("bigdata_test_sync_test_table") == [
        {"id": 2, "val": 2.2, "name": "a", "create_time": dt.datetime(2024, 11, 15, 8, 58, 34)}
    ]
    # The insert is a full-sync row (eventTime -1): it proves no source time. (Paimon's
    # timestamp_gt_0 on it is about its test-only etl_create_time=now() column.)
    assert summaries[0].freshness_ms is None
    assert summaries[-1].freshness_ms == 1731662085000
