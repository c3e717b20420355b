"""Paimon's Canal schema-evolution cases (KafkaCanalSyncTableActionITCase) through ``canal-json``.

Each input file is one batch; after each, the Iceberg table must hold Paimon's expected rows with
Paimon's column types (as mirrored here: INT is bigint, FLOAT double). The missing-DDL variant has
no DDL messages at all: the columns come from the messages' ``mysqlType``, with the same result.
"""

from __future__ import annotations

import pytest
from canal_expectations import PAIMON, expected, json_lines
from conftest import FIXTURES, Lake
from test_paimon_canal_conformance import assert_paimon_table, paimon_files

PAIMON_KAFKA = FIXTURES / "conformance" / "paimon" / "kafka"

CASES = {
    "schemaevolution": ("canal-table-schemaevolution", None),
    "schemaevolutionmissingddl": ("canal-table-schemaevolution", "schemaevolutionmissingddl"),
    "schemaevolutionmultiple": ("canal-table-schemaevolutionmultiple", None),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def evolved(request, spark, tmp_path_factory):
    """Every step of one case applied, the table copied after each step."""
    name, folder = CASES[request.param]
    doc = expected(PAIMON / f"{name}.expected.json")
    keys = doc["config"]["primary_keys"]
    lake = Lake(root=tmp_path_factory.mktemp(request.param), spark=spark, catalog=request.param)
    names = [n for step in doc["steps"] for n in step["after_files"]]
    files = paimon_files(names)
    if folder:  # the same files, from the variant's folder
        files = [p.parent.parent / folder / p.name for p in files]
    sources = {"schema_evolution_1", "schema_evolution_2", "schema_evolution_multiple"}
    lake.add_pipeline("evolve", "canal-json", table="mirror", keys=dict.fromkeys(sources, keys))
    summaries = []
    for index, path in enumerate(files):
        lake.land("evolve", f"{index:02d}-{path.name}", json_lines(path))
        summaries.append(lake.run("evolve"))
        lake.spark.sql(
            f"CREATE TABLE {lake.catalog}.ods.mirror_step{index} AS SELECT * FROM "
            f"{lake.catalog}.ods.mirror"
        )
    return doc, lake, summaries, keys


def test_every_step_leaves_paimons_table(evolved):
    doc, lake, summaries, keys = evolved
    for index, step in enumerate(doc["steps"]):
        assert summaries[index].dead_lettered == 0, summaries[index].dead_letter_samples
        assert summaries[index].ddl_rejected == 0, summaries[index].ddl_outcomes
        assert_paimon_table(lake, f"mirror_step{index}", step["row_type"], step["rows"], keys)


@pytest.fixture(scope="module")
def database_sync(spark, tmp_path_factory):
    """testSchemaEvolutionMultiTopic: one batch per step over three topics, a table per source."""
    doc = expected(PAIMON / "canal-database-schemaevolution.expected.json")
    folder = paimon_files(["kafka/canal/database/schemaevolution/topic0/x"])[0].parent.parent
    lake = Lake(root=tmp_path_factory.mktemp("database"), spark=spark, catalog="database_sync")
    lake.add_pipeline("db", "canal-json")
    summaries = []
    for step in range(1, len(doc["steps"]) + 1):
        for topic in ("topic0", "topic1", "topic2"):
            path = folder / topic / f"canal-data-{step}.txt"
            if path.is_file() and json_lines(path):
                lake.land("db", f"{step:02d}-{topic}.txt", json_lines(path))
        summaries.append(lake.run("db"))
        for table in ("t1", "t2"):
            lake.spark.sql(
                f"CREATE TABLE {lake.catalog}.ods.{table}_step{step} AS SELECT * FROM "
                f"{lake.catalog}.ods.{table}"
            )
    return doc, lake, summaries


def test_database_sync_steps_leave_paimons_tables(database_sync):
    doc, lake, summaries = database_sync
    keys = {t: doc["steps"][0][t]["pk"] for t in ("t1", "t2")}
    for step, tables in enumerate(doc["steps"], start=1):
        assert summaries[step - 1].dead_lettered == 0, summaries[step - 1].dead_letter_samples
        for table, want in tables.items():
            assert_paimon_table(
                lake, f"{table}_step{step}", want["row_type"], want["rows"], keys[table]
            )


# The same schema-evolution steps in each format: (format, input folder, file prefix, table).
# The same schema-evolution steps in each format: format -> (input folder, file prefix, table).
SCHEMA_EVOLUTION_FORMATS = {
    "debezium-json": (
        FIXTURES / "debezium-json" / "paimon" / "schemaevolution",
        "debezium",
        "product",
    ),
    "maxwell-json": (PAIMON_KAFKA / "maxwell" / "table" / "schemaevolution", "maxwell", "product"),
    "ogg-json": (PAIMON_KAFKA / "ogg" / "table" / "schemaevolution", "ogg", "tbl_test"),
}


@pytest.mark.parametrize("fmt", sorted(SCHEMA_EVOLUTION_FORMATS))
def test_new_keys_in_row_images_add_columns_step_by_step(spark, tmp_path, fmt):
    """KafkaSyncTableActionITCase.testSchemaEvolutionImpl, for debezium, maxwell and ogg.

    Paimon types every column of these schema-less messages as STRING; here they are typed from
    the JSON values (bigint, double), so the rows are compared as text.
    """
    doc = expected(PAIMON / "debezium-table-schemaevolution.expected.json")
    folder, prefix, table = SCHEMA_EVOLUTION_FORMATS[fmt]
    lake = Lake(root=tmp_path, spark=spark, catalog=f"evolution_{prefix}")
    lake.add_pipeline("evolve", fmt, keys={table: doc["config"]["primary_keys"]})
    columns = list(doc["row_type_final"])
    for index, step in enumerate(doc["steps"], start=1):
        lake.land("evolve", f"{index:02d}.txt", json_lines(folder / f"{prefix}-data-{index}.txt"))
        summary = lake.run("evolve")
        assert summary.dead_lettered == 0, summary.dead_letter_samples
        width = len(step["rows"][0].split(", ")) if step["rows"] else 0
        mirrored = [c for c in lake.table(table).columns if c in columns]
        assert mirrored == columns[: len(mirrored)]
        got = sorted(
            [None if v is None else str(v) for v in (r[c] for c in columns[:width])]
            for r in lake.table(table).collect()
        )
        want = sorted(
            [None if v == "NULL" else v for v in _fields(printed)] for printed in step["rows"]
        )
        assert got == want, f"after {prefix}-data-{index}.txt"


@pytest.mark.parametrize("fmt", ["maxwell-json", "ogg-json"])
def test_database_sync_of_two_topics_evolves_each_table(spark, tmp_path, fmt):
    """Paimon's testSchemaEvolutionMultiTopic for maxwell and ogg: a table per source table, new
    columns added as they appear; rows compared as text (Paimon types them all STRING)."""
    doc = expected(PAIMON / "database-schemaevolution-maxwell-ogg.expected.json")
    prefix = fmt.removesuffix("-json")
    folder = PAIMON_KAFKA / prefix / "database" / "schemaevolution"
    lake = Lake(root=tmp_path, spark=spark, catalog=f"database_{prefix}")
    lake.add_pipeline("db", fmt)
    for index, step in enumerate(doc["steps"], start=1):
        for topic in ("topic0", "topic1"):
            path = folder / topic / f"{prefix}-data-{index}.txt"
            lake.land("db", f"{index:02d}-{topic}.txt", json_lines(path))
        summary = lake.run("db")
        assert summary.dead_lettered == 0, summary.dead_letter_samples
        for table, want in step.items():
            columns = want["columns"]
            got = sorted(
                [None if v is None else str(v) for v in (r[c] for c in columns)]
                for r in lake.table(table).collect()
            )
            rows = sorted(
                [None if v == "NULL" else v for v in _fields(printed)] for printed in want["rows"]
            )
            assert got == rows, f"{table} after step {index}"


def _fields(printed: str) -> list[str]:
    """``+I[103, 12-pack drill bits, …]``: the fields, split on ', ' (no value holds one)."""
    return printed.removeprefix("+I[").removesuffix("]").split(", ")
