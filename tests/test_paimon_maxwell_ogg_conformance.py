"""Paimon's Maxwell and Oracle GoldenGate cases (KafkaSyncTableActionITCase and
KafkaSyncDatabaseActionITCase, shared by both formats): their data under
tests/fixtures/conformance/paimon/kafka, their expected tables transcribed in
tests/fixtures/conformance/paimon/expected/maxwell-ogg-*.expected.json.
"""

from __future__ import annotations

import pytest
from canal_expectations import PAIMON, expected, json_lines
from conftest import FIXTURES

PAIMON_KAFKA = FIXTURES / "conformance" / "paimon" / "kafka"


# --- Paimon's table cases (KafkaSyncTableActionITCase, maxwell and ogg) -------------------------

PAIMON_TABLE_CASES = PAIMON / "maxwell-ogg-table-cases.expected.json"
PAIMON_TABLES = {"maxwell-json": ("maxwell", "product"), "ogg-json": ("ogg", "tbl_test")}


def as_text(lake, table: str, columns: list[str]) -> list[list[str | None]]:
    rows = lake.table(table).collect()
    return sorted([None if r[c] is None else str(r[c]) for c in columns] for r in rows)


def printed(rows: list[str]) -> list[list[str | None]]:
    """Paimon's ``+I[a, b, NULL]`` rows as text fields (no value here holds ", ")."""
    fields = (r.removeprefix("+I[").removesuffix("]").split(", ") for r in rows)
    return sorted([None if v == "NULL" else v for v in f] for f in fields)


@pytest.mark.parametrize("fmt", sorted(PAIMON_TABLES))
def test_paimon_computed_column_partitions_the_table_by_it(lake, fmt):
    """testComputedColumn: ``_year=year(_date)``, partitioned by it (table_options here); keys
    are source columns here, so the table is keyed by _id alone."""
    case = expected(PAIMON_TABLE_CASES)["computed_column"]
    prefix, table = PAIMON_TABLES[fmt]
    lake.add_pipeline(
        "computed",
        fmt,
        keys={table.upper() if fmt == "ogg-json" else table: ["_id"]},
        table_options={
            table: {"computed_columns": {"_year": "year(_date)"}, "partition_by": ["_year"]}
        },
    )
    [name] = case["files"]
    lake.land(
        "computed",
        "a.txt",
        json_lines(PAIMON_KAFKA / prefix / "table" / name.format(format=prefix)),
    )
    assert lake.run("computed").dead_lettered == 0
    assert as_text(lake, table, case["columns"]) == printed(case["rows"])
    partitions = lake.spark.sql(f"SELECT partition FROM {lake.catalog}.ods.{table}.partitions")
    assert [r["partition"]["_year"] for r in partitions.collect()] == [2023]


@pytest.mark.parametrize("fmt", sorted(PAIMON_TABLES))
def test_paimon_startup_earliest_reads_both_files(lake, fmt):
    case = expected(PAIMON_TABLE_CASES)["startup_earliest"]
    prefix, table = PAIMON_TABLES[fmt]
    lake.add_pipeline("startup", fmt, keys={table.upper() if fmt == "ogg-json" else table: ["id"]})
    for index, name in enumerate(case["files"]):
        path = PAIMON_KAFKA / prefix / "table" / name.format(format=prefix)
        lake.land("startup", f"{index}.txt", json_lines(path))
    assert lake.run("startup").dead_lettered == 0
    assert as_text(lake, table, case["columns"]) == printed(case["rows"])


def test_paimon_ogg_cdc_operations_step_by_step(lake):
    case = expected(PAIMON_TABLE_CASES)["ogg_cdc_operations"]
    lake.add_pipeline("event", "ogg-json")
    for index, step in enumerate(case["steps"]):
        lake.land(
            "event", f"{index}.txt", json_lines(PAIMON_KAFKA / "ogg" / "table" / step["file"])
        )
        assert lake.run("event").dead_lettered == 0
        assert as_text(lake, "event", case["columns"]) == printed(step["rows"]), step["file"]


# --- Paimon's database cases (KafkaSyncDatabaseActionITCase, maxwell and ogg) -----------------

PAIMON_DATABASE_CASES = PAIMON / "maxwell-ogg-database-cases.expected.json"
PAIMON_PREFIXES = {"maxwell-json": "maxwell", "ogg-json": "ogg"}


def database_file(fmt: str, name: str):
    prefix = PAIMON_PREFIXES[fmt]
    return PAIMON_KAFKA / prefix / "database" / name.format(format=prefix)


@pytest.mark.parametrize("fmt", sorted(PAIMON_PREFIXES))
def test_paimon_table_prefix_and_suffix_are_the_table_template(lake, fmt):
    """testTableAffixOneTopic: both topics' files, then their second files adding a column."""
    case = expected(PAIMON_DATABASE_CASES)["table_affix"]
    config = case["config"]
    lake.add_pipeline(
        "affix",
        fmt,
        table=f"{config['table_prefix']}{{table}}{config['table_suffix']}",
        include_tables=config["including_tables"],
    )
    for step_index, step in enumerate(case["steps"]):
        for index, name in enumerate(step["files"]):
            lake.land("affix", f"{step_index}-{index}.txt", json_lines(database_file(fmt, name)))
        assert lake.run("affix").dead_lettered == 0
        for table, want in step["tables"].items():
            assert as_text(lake, table, want["columns"]) == printed(want["rows"]), table


@pytest.mark.parametrize("fmt", sorted(PAIMON_PREFIXES))
def test_paimon_including_and_excluding_tables(lake, fmt):
    """testIncludingTables, testExcludingTables, testIncludingAndExcludingTables: the tables a
    pipeline mirrors, the others' messages counted apart."""
    case = expected(PAIMON_DATABASE_CASES)["including_excluding"]
    lines = json_lines(database_file(fmt, case["file"]))
    for index, filters in enumerate(case["cases"]):
        namespace = f"filtered{index}"
        options = {"include_tables": filters["including"], "exclude_tables": filters["excluding"]}
        lake.add_pipeline(
            namespace,
            fmt,
            namespace=namespace,
            **{key: value for key, value in options.items() if value is not None},
        )
        lake.land(namespace, "a.txt", lines)
        summary = lake.run(namespace)
        assert (summary.dead_lettered, summary.excluded_table_messages) == (
            0,
            len(filters["absent"]),
        ), filters
        assert summary.unaccounted() == []
        tables = {
            r["tableName"]
            for r in lake.spark.sql(f"SHOW TABLES IN {lake.catalog}.{namespace}").collect()
        }
        assert sorted(t for t in tables if not t.startswith("_cdc")) == sorted(filters["exist"])


def test_paimon_ogg_names_differing_in_case_are_one_table_and_column(lake):
    """KafkaOggSyncDatabaseActionITCase.testCaseInsensitive: ``T1`` with ``ID``/``id`` and
    ``WEIGHT``/``weight`` across messages is one table ``t1`` of four columns (Paimon's
    case-sensitive=false is ``column_names: lowercase``)."""
    case = expected(PAIMON_DATABASE_CASES)["case_insensitive"]
    lake.add_pipeline("cases", "ogg-json", column_names="lowercase")
    lake.land("cases", "a.txt", json_lines(database_file("ogg-json", case["file"])))
    assert lake.run("cases").dead_lettered == 0
    columns = [f.name.lower() for f in lake.table(case["table"]).schema]
    assert [c for c in columns if not c.startswith("_cdc")] == case["columns"]
    assert as_text(lake, case["table"], case["columns"]) == printed(case["rows"])
