"""Canal JSON test data of Flink, SeaTunnel, RisingWave and Paimon (shared/conformance), through the
whole job with ``canal-json``.

Peers emit changelogs (+I/-U/+U/-D); cdc-ingest mirrors tables, so each expected changelog is
replayed by key into the table it leaves behind and compared with the final Iceberg table. Paimon's
expectations are already end states. Inputs are the copies in tests/fixtures/canal-json (see its
README.txt); every expectation is read from shared/conformance/*/expected/.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import CONFORMANCE, FIXTURES, Lake

CANAL = FIXTURES / "canal-json"
FLINK = CONFORMANCE / "flink" / "expected"
SEATUNNEL = CONFORMANCE / "seatunnel" / "expected"
RISINGWAVE = CONFORMANCE / "risingwave" / "expected"
PAIMON = CONFORMANCE / "paimon" / "expected"
PAIMON_INPUT = CANAL / "paimon"

pytestmark = pytest.mark.skipif(
    not CONFORMANCE.is_dir(), reason="shared/conformance not beside the repository"
)


def expected(path: Path) -> Any:
    return json.loads(path.read_text())


def json_lines(path: Path) -> list[str]:
    """The lines of a landed dump that are JSON (Paimon's files open with a license comment)."""
    lines = []
    for line in path.read_text().splitlines():
        try:
            json.loads(line)
        except ValueError:
            continue
        lines.append(line)
    return lines


def final_table(changelog: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """The table a changelog leaves behind: +I/+U rows kept, -U/-D rows removed, by key."""
    rows: dict[tuple, dict] = {}
    for change in changelog:
        row = change["row"]
        key = tuple(row[k] for k in keys)
        if change["op"] in ("+I", "+U"):
            rows[key] = row
        else:
            rows.pop(key, None)
    return list(rows.values())


def typed_like(rows: list[dict], schema: Any) -> list[dict]:
    """Expected rows with text dates, timestamps and decimals as the mirror's Python types."""
    types = {f.name: f.dataType.simpleString() for f in schema.fields}

    def convert(value: Any, spark_type: str) -> Any:
        if value is None:
            return None
        if spark_type == "date" and isinstance(value, str):
            return dt.date.fromisoformat(value)
        if spark_type.startswith("timestamp") and isinstance(value, str):
            return dt.datetime.fromisoformat(value)
        if spark_type.startswith("decimal") and isinstance(value, str | int | float):
            return Decimal(str(value))
        return value

    return [{k: convert(v, types[k]) for k, v in row.items()} for row in rows]


def assert_table(lake: Lake, table: str, rows: list[dict], keys: tuple[str, ...], **kw) -> None:
    """The table's rows (the expected rows' columns) equal ``rows``; floats approximately."""
    columns = list(rows[0]) if rows else list(keys)
    frame = lake.table(table, **kw).select(*columns)
    want = typed_like(rows, frame.schema)
    got = [r.asDict() for r in frame.collect()]

    def by_key(row: dict) -> tuple:
        return tuple(str(row[k]) for k in keys)

    def close(row: dict) -> dict:  # FLOAT columns are doubles here
        return {
            k: pytest.approx(v, nan_ok=True) if isinstance(v, float) else v for k, v in row.items()
        }

    assert sorted(got, key=by_key) == [close(r) for r in sorted(want, key=by_key)]


def records(changelog: list[dict]) -> int:
    """Change records behind a changelog: one per +I, +U (after its -U) and -D."""
    return sum(change["op"] != "-U" for change in changelog)


# --- Flink and SeaTunnel ------------------------------------------------------------------------


def test_flink_canal_data_leaves_the_table_of_the_expected_changelog(lake):
    doc = expected(FLINK / "canal-data.expected.json")
    changelog = doc["changelog"]
    table = doc["metadata_first_message"]["table"]
    lake.add_pipeline("inventory", "canal-json")
    lake.land("inventory", "canal-data.txt", json_lines(CANAL / "flink" / doc["input"]))
    summary = lake.run("inventory")
    want = final_table(changelog, ("id",))
    assert (summary.lines, summary.dead_lettered, summary.ddl_recorded) == (11, 0, 1)
    assert summary.records == records(changelog) + summary.ddl_recorded
    counts = summary.tables[table]
    assert (counts.messages, counts.inserted, counts.dead_lettered) == (
        records(changelog),
        len(want),
        0,
    )
    assert_table(lake, table, want, ("id",))


def test_filter_table_file_mirrors_the_filtered_table_as_flink_and_seatunnel_expect(lake):
    flink = expected(FLINK / "canal-data-filter-table.expected.json")
    seatunnel = expected(SEATUNNEL / "canal-data-filter-table.expected.json")
    assert flink["changelog"] == seatunnel["changelog"]
    lake.add_pipeline("mydb", "canal-json")
    lake.land("mydb", "filter.txt", json_lines(CANAL / "flink" / flink["input"]))
    summary = lake.run("mydb")
    # Filtering by database/table becomes one Iceberg table per source table ("{table}").
    options = seatunnel["options"]
    matching = [t for t in summary.tables if re.match(options["table"], t)]
    assert matching == [flink["metadata_first_message"]["table"]] == ["product"]
    assert re.match(options["database"], flink["metadata_first_message"]["database"])
    counts = summary.tables["product"]
    assert (counts.messages, counts.dead_lettered) == (records(flink["changelog"]), 0)
    assert_table(lake, "product", final_table(flink["changelog"], ("id",)), ("id",))
    # Rows of the other tables are not in the expected changelog; 'project' declares id int(11)
    # but sends ids like 'A101', which cdc-ingest dead-letters rather than mirror.
    assert {letter["target_table"] for letter in lake.dead_letters()} == {"project"}


def test_seatunnel_canal_data_leaves_the_expected_final_table(lake):
    doc = expected(SEATUNNEL / "canal_data.expected.json")
    columns = list(doc["read_schema"])
    want = [dict(zip(columns, row, strict=True)) for row in doc["final_table_rows_ordered_by_id"]]
    lake.add_pipeline("canal", "canal-json")
    lake.land("canal", "canal_data.txt", json_lines(CANAL / "seatunnel" / doc["input"]))
    summary = lake.run("canal")
    # 3 DDL messages (QUERY, CREATE, ALTER with isDdl=true) change no row.
    assert (summary.lines, summary.dead_lettered, summary.ddl_recorded) == (7, 0, 3)
    assert summary.tables["products"].inserted == len(want)
    assert_table(lake, "products", want, ("id",))


# --- Flink inline cases (messages built inside CanalJsonSerDeSchemaTest) ------------------------


@pytest.fixture(scope="module")
def flink_inline(spark, tmp_path_factory):
    """All inline cases as Kafka records (Flink's null / empty byte[] need a Kafka value)."""
    doc = expected(FLINK / "canal-inline-cases.expected.json")
    lake = Lake(root=tmp_path_factory.mktemp("flink_inline"), spark=spark, catalog="canal_inline")
    lake.add_pipeline("inline", "canal-json", envelope="kafka")
    lines, case_lines = [], []
    for case in doc["cases"]:
        first = len(lines) + 1
        for value in case["inputs"]:
            record = {"topic": "canal", "partition": 0, "offset": len(lines), "value": value}
            lines.append(json.dumps({**record, "key": None}))
        case_lines.append(range(first, len(lines) + 1))
    lake.land("inline", "inline.jsonl", lines)
    summary = lake.run("inline")
    return doc["cases"], case_lines, lake, summary


@pytest.mark.xfail(
    strict=True,
    reason="Flink binds canal-json to one declared table; these messages carry only data and "
    "type, no database/table/pkNames, so canal-json dead-letters them ('message names no "
    "table') and no key could be configured for them. (With a table added, the unquoted "
    "NaN/Infinity tokens still reach the row image as the quoted text '\"NaN\"', and without "
    "mysqlType weight would be typed string.)",
)
def test_flink_non_numeric_numbers_insert_nan_and_infinities(flink_inline):
    cases, case_lines, lake, summary = flink_inline
    letters = [d["reason"] for d in lake.dead_letters() if d["line"] in case_lines[0]]
    assert letters == []
    columns = list(expected(FLINK / "canal-data.expected.json")["read_schema"])
    want = []
    for printed in cases[0]["expected"]:
        fields = re.fullmatch(r"\+I\((.*)\)", printed).group(1).split(",")
        want.append(
            dict(zip(columns, [int(fields[0]), *fields[1:3], float(fields[3])], strict=True))
        )
    (table,) = summary.tables
    assert_table(lake, table, want, ("id",))


def test_flink_null_and_empty_messages_change_nothing(flink_inline):
    cases, case_lines, lake, summary = flink_inline
    case = cases[1]
    assert case["inputs"] == [None, ""] and case["expected"] == []
    letters = [d for d in lake.dead_letters() if d["line"] in case_lines[1]]
    assert letters == []
    assert summary.no_row_change == len(case["inputs"])


# --- RisingWave --------------------------------------------------------------------------------

# Key columns of each case's table: the messages name none (or RisingWave reads no key).
RISINGWAVE_KEYS = {
    "test_data_types": ("id",),
    "test_json_parser": ("id",),
    "test_parse_multi_rows": ("v1", "v2"),
}


def risingwave_changelog(case: dict) -> list[dict]:
    """A case's expected changes with column names as the mirror has them (RisingWave matches
    columns case-insensitively) and its two prose values as values."""
    changes = []
    for change in case["expected"]:
        row = {}
        for name, value in change["row"].items():
            if name.endswith("_bytes_utf8"):
                name, value = name.removesuffix("_bytes_utf8"), value.encode("utf-8")
            elif name == "json":  # prose around the JSON string literal that is the value
                value = json.loads(re.search(r'"(?:[^"\\]|\\.)*"', value).group())
            row[name.lower()] = value
        changes.append({"op": change["op"], "row": row})
    return changes


@pytest.fixture(scope="module")
def risingwave(spark, tmp_path_factory):
    """Cases 1-2 through one pipeline; case 3 (same source table demo.demo, other columns)
    through a second pipeline into another namespace."""
    doc = expected(RISINGWAVE / "canal-inline-cases.expected.json")
    lines = (CANAL / "risingwave" / "canal-inline-messages.jsonl").read_text().splitlines()
    lake = Lake(root=tmp_path_factory.mktemp("risingwave"), spark=spark, catalog="canal_rw")
    by_name = {case["name"]: case for case in doc["cases"]}
    routes = {"test_data_types": "ods", "test_json_parser": "ods", "test_parse_multi_rows": "rows"}
    for namespace in sorted(set(routes.values())):
        cases = [by_name[n] for n, ns in routes.items() if ns == namespace]
        keys = {"demo": list(RISINGWAVE_KEYS[cases[-1]["name"]])}  # demo.demo's key here
        lake.add_pipeline(f"rw_{namespace}", "canal-json", namespace=namespace, keys=keys)
        lake.land(f"rw_{namespace}", "cases.jsonl", [lines[c["line"] - 1] for c in cases])
        summary = lake.run(f"rw_{namespace}")
        assert summary.dead_lettered == 0, summary.dead_letter_samples
    return by_name, routes, lines, lake


@pytest.mark.parametrize("name", list(RISINGWAVE_KEYS))
def test_risingwave_case_leaves_the_expected_table(risingwave, name):
    by_name, routes, lines, lake = risingwave
    case = by_name[name]
    table = json.loads(lines[case["line"] - 1])["table"]
    keys = RISINGWAVE_KEYS[name]
    want = final_table(risingwave_changelog(case), keys)
    assert_table(lake, table, want, keys, namespace=routes[name])


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
        body = re.fullmatch(r"\+I\[(.*)\]", line).group(1)
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
    assert {c: types.get(c) for c in row_type} == {c: paimon_type(t) for c, t in row_type.items()}
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


@pytest.mark.xfail(
    strict=True,
    reason="ignore-delete=true is a Paimon table option (DELETEs dropped); cdc-ingest always "
    "applies Canal DELETEs",
)
def test_paimon_event_with_ignore_delete_keeps_deleted_rows(paimon_event):
    doc, lake, _ = paimon_event
    last = doc["steps"][-1]
    assert last["rows_ignore_delete_true"] == "unchanged from previous step"
    printed = doc["steps"][-2]["rows"]
    assert_paimon_table(lake, "event", doc["row_type"], printed, ["_id"])


MISC_XFAIL = {
    "testSynchronizeIncompleteJson": "messages carry only data and type (no database/table/"
    "mysqlType): canal-json dead-letters them ('message names no table'); Paimon names the "
    "target table in the sync action and types every column STRING",
    "testSynchronizeNonPkTable": "pkNames [] makes Paimon create an append-only table keeping "
    "both identical rows; cdc-ingest mirrors keyed tables (no key: dead letter; all columns as "
    "key: the duplicates collapse into one row)",
    "testTypeMappingToString": "type_mapping=to-string is a Paimon sync-action option; "
    "canal-json types columns by mysqlType (INT -> bigint)",
    "testComputedColumn": "the _year=year(_date) computed column (and key) is a Paimon "
    "sync-action option; canal-json mirrors the source columns only",
    "testSyncWithInitialEmptyTopic": "Paimon pre-creates the table with a computed _year column; "
    "canal-json mirrors the source columns only",
}
MISC_SKIP = {
    "testAllTypes": "its expected rows are only in the Java test, which shared/conformance lacks",
}
STEPWISE = "testDecimalNoChange"  # a batch per file: the second file declares another DECIMAL


@pytest.fixture(scope="module")
def paimon_misc(spark, tmp_path_factory):
    """The small table-sync cases, each into its own table: one batch, then the second file of
    testDecimalNoChange."""
    doc = expected(PAIMON / "canal-table-misc.expected.json")
    lake = Lake(root=tmp_path_factory.mktemp("paimon_misc"), spark=spark, catalog="canal_misc")
    cases = {c["name"]: c for c in doc["cases"] if c["name"] not in MISC_SKIP}
    tables, keys, later = {}, {}, []
    for index, (name, case) in enumerate(cases.items()):
        files = paimon_files(case["files"])
        messages = [json.loads(line) for path in files for line in json_lines(path)]
        tables[name] = messages[0].get("table")
        primary_keys = case.get("config", {}).get("primary_keys")
        if isinstance(primary_keys, list) and tables[name]:
            keys[tables[name]] = primary_keys
        for path in files:
            landed = (f"{index:02d}-{path.parent.name}-{path.name}", json_lines(path))
            if name == STEPWISE and path != files[0]:
                later.append(landed)
            else:
                lake.land("misc", *landed)
    lake.add_pipeline("misc", "canal-json", keys=keys)
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
    names = [c["name"] for c in expected(path)["cases"]] if path.is_file() else []
    params = []
    for name in names:
        marks = []
        if name in MISC_XFAIL:
            marks.append(pytest.mark.xfail(strict=True, reason=MISC_XFAIL[name]))
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
        assert history.count() == len(json_lines(paimon_files(case["files"])[0]))
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
