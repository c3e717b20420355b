"""Canal JSON test data of Flink, SeaTunnel and RisingWave (tests/fixtures/conformance), through the
whole job with ``canal-json``.

Peers emit changelogs (+I/-U/+U/-D); cdc-ingest mirrors tables, so each expected changelog is
replayed by key into the table it leaves behind and compared with the final Iceberg table (see
canal_expectations.py; Paimon's cases are in test_paimon_canal_conformance.py). Inputs are the
copies in tests/fixtures/canal-json (see its README.txt); expectations are read from
tests/fixtures/conformance/*/expected/.
"""

from __future__ import annotations

import json
import re

import pytest
from canal_expectations import (
    CANAL,
    FLINK,
    RISINGWAVE,
    SEATUNNEL,
    assert_table,
    expected,
    final_table,
    json_lines,
    records,
)
from conftest import Lake

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
    assert summary.records == records(changelog) + 1  # and the one DDL message
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
    # Rows of the other tables are not in the expected changelog. The DDL message filed under
    # 'projects' says CREATE TABLE project (id VARCHAR(255) ...): the statement's table is created,
    # so the later 'project' rows (ids like 'A101', though their mysqlType says int(11)) apply.
    assert lake.dead_letters() == []
    assert summary.tables["project"].inserted == 9 and "projects" not in summary.tables
    assert {type(r["id"]) for r in lake.rows("project", "id")} == {str}


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
    # Flink binds canal-json to one declared table: the messages carry only data and type.
    lake.add_pipeline(
        "inline", "canal-json", envelope="kafka", table="products", keys={"products": ["id"]}
    )
    lines: list[str] = []
    case_lines: list[range] = []
    for case in doc["cases"]:
        first = len(lines) + 1
        for value in case["inputs"]:
            record = {"topic": "canal", "partition": 0, "offset": len(lines), "value": value}
            lines.append(json.dumps({**record, "key": None}))
        case_lines.append(range(first, len(lines) + 1))
    lake.land("inline", "inline.jsonl", lines)
    summary = lake.run("inline")
    return doc["cases"], case_lines, lake, summary


def test_flink_non_numeric_numbers_insert_nan_and_infinities(flink_inline):
    cases, case_lines, lake, summary = flink_inline
    letters = [d["reason"] for d in lake.dead_letters() if d["line"] in case_lines[0]]
    assert letters == []
    columns = list(expected(FLINK / "canal-data.expected.json")["read_schema"])
    want = []
    for printed in cases[0]["expected"]:
        match = re.fullmatch(r"\+I\((.*)\)", printed)
        assert match is not None, f"not a Flink +I row: {printed}"
        fields = match.group(1).split(",")
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
                literal = re.search(r'"(?:[^"\\]|\\.)*"', value)
                assert literal is not None, f"no JSON string literal in {value!r}"
                value = json.loads(literal.group())
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
