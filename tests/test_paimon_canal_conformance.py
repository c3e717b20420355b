"""Paimon's Canal table-sync cases (event, misc) through ``canal-json``.

Paimon's expectations are end states: each is compared with the final Iceberg table. Inputs are the
copies in tests/fixtures/canal-json/paimon; expectations are read from tests/fixtures/conformance.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from canal_expectations import (
    PAIMON,
    PAIMON_INPUT,
    assert_table,
    expected,
    json_lines,
)
from conftest import Lake

# --- Paimon (KafkaCanalSyncTableActionITCase) --------------------------------------------------

# Paimon type -> the mirrored column type (INT is bigint here, FLOAT double).
PAIMON_TYPES = [
    (r"^(TINYINT|SMALLINT|INT|BIGINT)$", "bigint"),
    (r"^(VARCHAR\(\d+\)|CHAR\(\d+\)|STRING)$", "string"),
    (r"^(FLOAT|DOUBLE)$", "double"),
    (r"^(VARBINARY\(\d+\)|BINARY\(\d+\)|BYTES)$", "binary"),
    (r"^DATE$", "date"),
]


def paimon_type(declared: str) -> str:
    declared = declared.removesuffix(" NOT NULL")
    decimal = re.match(r"^DECIMAL\((\d+), ?(\d+)\)$", declared)
    if decimal:
        return f"decimal({decimal.group(1)},{decimal.group(2)})"
    return next(ours for pattern, ours in PAIMON_TYPES if re.match(pattern, declared))


def paimon_rows(printed: list[str], row_type: dict[str, str]) -> list[dict]:
    """Rows Paimon prints as ``+I[1, one, NULL, [110, 105], 9.9]``, typed by the row type."""

    def value(text: str, declared: str) -> Any:
        kind = paimon_type(declared)
        if text == "NULL":
            return None
        if kind == "bigint":
            return int(text)
        if kind == "double":
            return float(text)
        if kind == "binary":
            return bytes(json.loads(text))
        if kind == "date":  # days since the epoch
            return dt.date(1970, 1, 1) + dt.timedelta(days=int(text))
        if kind.startswith("decimal"):
            return Decimal(text)
        return text

    rows = []
    for line in printed:
        match = re.fullmatch(r"\+I\[(.*)\]", line)
        assert match is not None, f"not a Paimon +I row: {line}"
        body = match.group(1)
        fields = [f.strip() for f in re.findall(r"\s*(\[[^\]]*\]|[^,]+)", body)]
        assert len(fields) == len(row_type), line
        rows.append({c: value(f, t) for (c, t), f in zip(row_type.items(), fields, strict=True)})
    return rows


def paimon_files(names: list[str]) -> list[Path]:
    """Input files named as in the expected file: a bare name is beside the previous one."""
    paths: list[Path] = []
    for name in names:
        paths.append(PAIMON_INPUT / name if "/" in name else paths[-1].parent / name)
    return paths


def assert_paimon_table(lake: Lake, table: str, row_type: dict, printed: list[str], keys) -> None:
    types = {f.name: f.dataType.simpleString() for f in lake.table(table).schema.fields}
    assert {c: types.get(c) for c in row_type} == {
        c: COMPUTED_TYPES.get(c) or paimon_type(t) for c, t in row_type.items()
    }
    assert_table(lake, table, paimon_rows(printed, row_type), tuple(keys))


@pytest.fixture(scope="module")
def paimon_event(spark, tmp_path_factory):
    """testCDCOperations: each file one batch, all source tables into one table ``event``."""
    doc = expected(PAIMON / "canal-table-event.expected.json")
    lake = Lake(root=tmp_path_factory.mktemp("paimon_event"), spark=spark, catalog="canal_event")
    lake.add_pipeline("event", "canal-json", table="event")
    files = paimon_files([name for step in doc["steps"] for name in step["after_files"]])
    summaries = []
    for index, path in enumerate(files):
        lake.land("event", f"{index:02d}-{path.name}", json_lines(path))
        summaries.append(lake.run("event"))
        # Snapshot the table after each step: later steps change it.
        lake.spark.sql(
            f"CREATE TABLE {lake.catalog}.ods.event_step{index} AS SELECT * FROM "
            f"{lake.catalog}.ods.event"
        )
    return doc, lake, summaries


@pytest.mark.parametrize("step", range(4))
def test_paimon_event_steps_leave_the_expected_table(paimon_event, step):
    doc, lake, summaries = paimon_event
    expected_step = doc["steps"][step]
    printed = expected_step.get("rows") or expected_step["rows_ignore_delete_false"]
    assert summaries[step].dead_lettered == 0, summaries[step].dead_letter_samples
    assert_paimon_table(lake, f"event_step{step}", doc["row_type"], printed, ["_id"])


def test_paimon_event_with_ignore_delete_keeps_deleted_rows(spark, tmp_path_factory):
    """ignore-delete=true: Paimon drops DELETEs; here ``deletes: ignore`` counts and skips them."""
    doc = expected(PAIMON / "canal-table-event.expected.json")
    lake = Lake(root=tmp_path_factory.mktemp("paimon_keep"), spark=spark, catalog="canal_keep")
    lake.add_pipeline("event", "canal-json", table="event", deletes="ignore")
    files = paimon_files([name for step in doc["steps"] for name in step["after_files"]])
    for index, path in enumerate(files):
        lake.land("event", f"{index:02d}-{path.name}", json_lines(path))
        last = lake.run("event")
    assert doc["steps"][-1]["rows_ignore_delete_true"] == "unchanged from previous step"
    # The last file holds one DELETE (of _id 1): counted, not applied.
    counts = last.tables["event"]
    assert (counts.messages, counts.deleted, counts.deletes_ignored) == (1, 0, 1)
    assert "deletes ignored 1" in last.render()
    printed = doc["steps"][-2]["rows"]
    assert_paimon_table(lake, "event", doc["row_type"], printed, ["_id"])


# Paimon's sync-action options of a case, as the table options of its table (partition_keys ->
# partition_by, computed -> computed_columns, type_mapping). Paimon also keys testComputedColumn's
# table by the computed _year; here keys are source columns, so the key stays _id.
MISC_OPTIONS: dict[str, dict[str, Any]] = {
    "testStarUpOptionEarliest/Group": {"partition_by": ["pt"]},
    "testTypeMappingToString": {"type_mapping": "to-string"},
    "testComputedColumn": {
        "computed_columns": {"_year": "year(_date)"},
        "partition_by": ["_year"],
    },
    # Paimon pre-creates this table with the computed _year; the message adds v.
    "testSyncWithInitialEmptyTopic": {"computed_columns": {"_year": "year(_date)"}},
}
# Spark's year() is an int (Paimon's INT; a source INT column is a bigint here).
COMPUTED_TYPES = {"_year": "int"}
# Messages that name no table (only data and type), bound to one table as Paimon's table sync
# binds them: a pipeline whose table: names one table.
BOUND = {"testSynchronizeIncompleteJson": "incomplete_json"}
MISC_SKIP = {
    "testAllTypes": "its expected rows are only in the Java test, not vendored here",
}
STEPWISE = "testDecimalNoChange"  # a batch per file: the second file declares another DECIMAL


@pytest.fixture(scope="module")
def paimon_misc(spark, tmp_path_factory):
    """The small table-sync cases, each into its own table: one batch, then the second file of
    testDecimalNoChange."""
    doc = expected(PAIMON / "canal-table-misc.expected.json")
    lake = Lake(root=tmp_path_factory.mktemp("paimon_misc"), spark=spark, catalog="canal_misc")
    cases = {c["name"]: c for c in doc["cases"] if c["name"] not in MISC_SKIP}
    tables, keys, later, options = {}, {}, [], {}
    for index, (name, case) in enumerate(cases.items()):
        files = paimon_files(case["files"])
        messages = [json.loads(line) for path in files for line in json_lines(path)]
        tables[name] = messages[0].get("table") or BOUND.get(name)
        computed = MISC_OPTIONS.get(name, {}).get("computed_columns", {})
        primary_keys = case.get("config", {}).get("primary_keys")
        if isinstance(primary_keys, list) and tables[name]:
            keys[tables[name]] = [k for k in primary_keys if k not in computed]
        if name in MISC_OPTIONS:
            options[tables[name]] = MISC_OPTIONS[name]
        for path in files:
            landed = (f"{index:02d}-{path.parent.name}-{path.name}", json_lines(path))
            if name == STEPWISE and path != files[0]:
                later.append(landed)
            else:
                lake.land("bound" if name in BOUND else "misc", *landed)
    lake.add_pipeline("misc", "canal-json", keys=keys, table_options=options)
    [bound] = BOUND.values()
    lake.add_pipeline("bound", "canal-json", table=bound, keys={bound: keys[bound]})
    lake.run("bound")
    first = lake.run("misc")
    stepwise = tables[STEPWISE]
    lake.spark.sql(
        f"CREATE TABLE {lake.catalog}.ods.{stepwise}_first AS SELECT * FROM "
        f"{lake.catalog}.ods.{stepwise}"
    )
    for landed in later:
        lake.land("misc", *landed)
    second = lake.run("misc")
    return cases, tables, lake, (first, second)


def misc_cases() -> list[Any]:
    path = PAIMON / "canal-table-misc.expected.json"
    names = [c["name"] for c in expected(path)["cases"]]
    params = []
    for name in names:
        marks = []
        if name in MISC_SKIP:
            marks.append(pytest.mark.skip(reason=MISC_SKIP[name]))
        params.append(pytest.param(name, marks=marks))
    return params


@pytest.mark.parametrize("name", misc_cases())
def test_paimon_misc_case_leaves_the_expected_table(paimon_misc, name):
    cases, tables, lake, _ = paimon_misc
    case, table = cases[name], tables[name]
    assert table, "the messages name no source table, so no table can be mirrored"
    existing = {
        r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.ods").collect()
    }
    if "expected_error" in case:
        # Paimon cannot derive a schema from DDL messages alone; nor does cdc-ingest: the DDL is
        # recorded, no table is created.
        assert table not in existing
        history = lake.table("_cdc_ddl_history").where(f"target_table = '{table}'")
        # The case's one file holds two ALTER TABLE schema_evolution_2 ADD COLUMN messages.
        statements = [r["statement"] for r in history.collect()]
        assert len(statements) == 2
        assert all("ALTER TABLE schema_evolution_2 ADD COLU" in s for s in statements)
        return
    assert table in existing, f"no table {table} was mirrored"
    keys = case.get("config", {}).get("primary_keys")
    keys = keys if isinstance(keys, list) else list(case["row_type"])[:1]
    if name == STEPWISE:
        assert_paimon_table(
            lake, f"{table}_first", case["row_type"], case["rows_after_file3"], keys
        )
        assert_paimon_table(lake, table, case["row_type"], case["rows_after_file4"], keys)
    else:
        assert_paimon_table(lake, table, case["row_type"], case["rows"], keys)
