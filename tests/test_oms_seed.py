"""Seed 001 (OceanBase OMS): every sample of the five serializations, verbatim, as test input.

The samples are documentation: two Default samples have trailing commas, key names
(``record_primary_key``, ``pkNames``, ``schema.pk``) that are not among the row's columns, and
decimals with hundreds of digits. Verbatim, each such sample is a dead letter with a clear reason;
with the comma removed and the key configured (config ``keys`` override the message), it applies.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from conftest import FIXTURES
from seed_samples import OMS_SEED, fenced_samples

LAYOUT = {  # fixture -> index of the ```json block in seed 001
    "oms-default/insert": 1,
    "oms-default/update": 2,
    "oms-default/delete": 3,
    "oms-canal/insert": 5,
    "oms-canal/update": 6,
    "oms-canal/delete": 7,
    "oms-dataworks/insert": 10,
    "oms-dataworks/update": 11,
    "oms-dataworks/delete": 12,
    "oms-shareplex/insert": 14,
    "oms-shareplex/update": 15,
    "oms-shareplex/delete": 16,
    "oms-default-extend/insert": 18,
    "oms-default-extend/update": 19,
    "oms-default-extend/delete": 20,
}
TRAILING_COMMA = "line is not valid JSON: a trailing comma before '}' or ']'"
SHANGHAI_2020_11_25 = datetime(2020, 11, 24, 16, 1, 2, 12345)  # 00:01:02.012345 +08:00 in UTC


def sample(name: str) -> str:
    return (FIXTURES / f"{name}.jsonl").read_text().splitlines()[0]


def test_fixtures_are_the_seed_samples_verbatim() -> None:
    blocks = fenced_samples(OMS_SEED)
    for name, index in LAYOUT.items():
        assert sample(name) == blocks[index], name
    heartbeat = fenced_samples(OMS_SEED, strip_comments=True)[9]
    assert sample("oms-dataworks/heartbeat") == heartbeat
    for name in ("insert", "update"):
        fixed = re.sub(r",(\s*[}\]])", r"\1", sample(f"oms-default/{name}"))
        assert sample(f"oms-default/{name}-without-trailing-comma") == fixed


def test_default_samples_verbatim_are_dead_letters_with_their_reasons(lake):
    lake.add_pipeline("oms", "oms-default")
    lake.land(
        "oms", "001.json", [sample(f"oms-default/{n}") for n in ("insert", "update", "delete")]
    )
    summary = lake.run("oms")
    assert (summary.lines, summary.messages, summary.dead_lettered) == (3, 0, 3)
    reasons = [d["reason"] for d in lake.dead_letters()]
    assert reasons == [
        TRAILING_COMMA,
        TRAILING_COMMA,
        "key column 'int8' is missing from the message",
    ]
    assert lake.dead_letters()[0]["raw"] == sample("oms-default/insert")


def test_default_samples_without_trailing_commas_apply_with_configured_keys(lake):
    lake.add_pipeline("oms", "oms-default", keys={"table_name": ["col1", "col2"]})
    lake.land("oms", "001.json", [sample("oms-default/insert-without-trailing-comma")])
    summary = lake.run("oms")
    assert (summary.messages, summary.tables["table_name"].inserted) == (1, 1)
    types = {f.name: f.dataType.simpleString() for f in lake.table("table_name").schema.fields}
    # Untyped values: integers are longs, the unsigned one beyond 2^63-1 a decimal, never wrapped.
    assert (types["col1"], types["col4"], types["col5"], types["col6"]) == (
        "bigint",
        "bigint",
        "decimal(38,0)",
        "double",
    )
    row = lake.rows("table_name")[0]
    assert (row["col4"], row["col5"], row["col8"]) == (
        9223372036854775806,
        Decimal("10223372036854775806"),
        "hello world",
    )
    lake.land("oms", "002.json", [sample("oms-default/update-without-trailing-comma")])
    assert lake.run("oms").tables["table_name"].updated == 1
    assert lake.rows("table_name", "col1", "col2", "col8") == [
        {"col1": 3, "col2": 129, "col8": "hello world 2020"}
    ]
    lake.land("oms", "003.json", [sample("oms-default/delete")])
    assert lake.run("oms").tables["table_name"].deleted == 1
    assert lake.rows("table_name") == []


def test_extend_light_type_is_type_metadata_never_a_column(lake):
    lake.add_pipeline("oms", "oms-default-extend", keys={"table": ["col1", "col2"]})
    lake.land("oms", "001.json", [sample("oms-default-extend/insert")])
    lake.land("oms", "002.json", [sample("oms-default-extend/update")])
    summary = lake.run("oms")
    assert (summary.messages, summary.dead_lettered) == (2, 0)
    columns = [c for c in lake.table("table").columns if not c.startswith("_cdc_")]
    assert columns == [f"col{i}" for i in range(1, 15)]
    assert lake.rows("table", "col1", "col8") == [{"col1": 3, "col8": "hello world 2020"}]
    lake.land("oms", "003.json", [sample("oms-default-extend/delete")])
    assert lake.run("oms").tables["table"].deleted == 1


def test_extend_light_type_types_the_columns_it_names(lake):
    lake.add_pipeline("oms", "oms-default-extend")
    line = (
        '{"allMetaData":{"record_primary_key":"id","table_name":"t","db":"ten.db",'
        '"timestamp":"1609344671"},"prevStruct":null,"recordType":"INSERT",'
        '"postStruct":{"id":7,"amount":"12.50","born":"2020-11-25","seen":"1606233662.012345",'
        '"at":"2020-11-25 00:01:02","big":10223372036854775806,"old":1606233662,"__light_type":{'
        '"id":{"schemaType":"INT"},"amount":{"schemaType":"DECIMAL(10,2)"},'
        '"born":{"schemaType":"DATE"},"seen":{"schemaType":"TIMESTAMP"},'
        '"at":{"schemaType":"DATETIME"},"big":{"schemaType":"BIGINT UNSIGNED"},'
        '"old":{"schemaType":"TIMESTAMP"}}}}'
    )
    lake.land("oms", "001.json", [line])
    lake.run("oms")
    types = {f.name: f.dataType.simpleString() for f in lake.table("t").schema.fields}
    assert [types[c] for c in ("id", "amount", "born", "seen", "at", "big")] == [
        "bigint",
        "decimal(10,2)",
        "date",
        "timestamp",
        "timestamp_ntz",
        "decimal(20,0)",
    ]
    assert lake.rows("t") == [
        {
            "id": 7,
            "amount": Decimal("12.50"),
            "born": date(2020, 11, 25),
            "seen": datetime(2020, 11, 24, 16, 1, 2, 12345),
            "at": datetime(2020, 11, 25, 0, 1, 2),
            "big": Decimal("10223372036854775806"),
            "old": datetime(2020, 11, 24, 16, 1, 2),  # integer seconds: OMS before 3.3.0-CE
        }
    ]


def test_canal_samples_verbatim_dead_letter_values_their_types_cannot_hold(lake):
    lake.add_pipeline("oms", "oms-canal")
    lake.land("oms", "001.json", [sample(f"oms-canal/{n}") for n in ("insert", "update", "delete")])
    summary = lake.run("oms")
    assert (summary.lines, summary.dead_lettered) == (3, 3)
    reasons = [d["reason"] for d in lake.dead_letters()]
    # mysqlType says decimal (no precision: decimal(38,18)) for a value of hundreds of digits.
    assert reasons[0] == (
        "column 'col12': the number (read as '1.0E-307') has more digits than Spark's JSON reader "
        "keeps for a number, and a decimal(38,18) must be exact (send DECIMAL values as JSON "
        "strings)"
    )
    assert reasons[1] == reasons[0]
    assert reasons[2] == "key column 'int8' is missing from the message"


def canal_fixed(name: str) -> str:
    """A Canal sample whose decimal and (signed) bigint values fit their declared types."""
    line = re.sub(r'"col12":[0-9.E-]+', '"col12":9.99', sample(f"oms-canal/{name}"))
    return line.replace('"col13":10223372036854775806', '"col13":1022337203685477580')


def test_canal_samples_typed_by_mysql_type(lake):
    # pkNames says [col1, col2], but the UPDATE sample changes col2 and its old[] does not carry
    # col2's previous value: keyed so, it would be a new row. The configured key overrides it.
    lake.add_pipeline("oms", "oms-canal", keys={"table": ["col1"]})
    lake.land("oms", "001.json", [canal_fixed("insert")])
    summary = lake.run("oms")
    assert (summary.messages, summary.tables["table"].inserted) == (1, 1)
    types = {f.name: f.dataType.simpleString() for f in lake.table("table").schema.fields}
    assert [types[f"col{i}"] for i in range(1, 15)] == [
        "timestamp_ntz",  # datetime
        "string",  # varchar
        "double",  # float
        "double",  # double
        "bigint",  # smallint
        "string",  # time
        "bigint",  # int
        "bigint",  # int64
        "binary",  # blob (Base64)
        "bigint",  # tinyint
        "date",
        "decimal(38,18)",  # decimal without precision
        "bigint",
        "timestamp",  # timestamp: seconds.fraction
    ]
    row = lake.rows("table")[0]
    assert row["col1"] == datetime(2020, 11, 25, 0, 1, 2)
    assert row["col9"] == bytearray(b"hello world")
    assert row["col11"] == date(2020, 11, 25)
    assert row["col12"] == Decimal("9.99")
    assert row["col14"] == datetime(2020, 11, 24, 16, 1, 2, 12345)
    assert row["col4"] == pytest.approx(9.999999999999999e-308)
    lake.land("oms", "002.json", [canal_fixed("update")])
    assert lake.run("oms").tables["table"].updated == 1
    assert lake.rows("table", "col2") == [{"col2": "hello world 2020"}]


def test_dataworks_samples_and_heartbeat(lake):
    lake.add_pipeline("dw", "oms-dataworks")
    names = ("insert", "update", "delete", "heartbeat")
    lake.land("dw", "001.json", [sample(f"oms-dataworks/{n}") for n in names])
    summary = lake.run("dw")
    # col6 and col11 are number literals of over 1000 characters: Jackson refuses them.
    assert (summary.lines, summary.messages, summary.dead_lettered) == (4, 1, 3)
    assert {d["reason"] for d in lake.dead_letters()} == {
        "line holds a number literal longer than 1000 characters, more than Spark's JSON reader "
        "(Jackson) accepts"
    }
    # The heartbeat changes no row but advances freshness.
    assert (summary.no_row_change, summary.freshness_ms) == (1, 1620457659000)


def dataworks_fixed(name: str) -> str:
    """A DataWorks sample whose 1000-digit numbers are cut to a double's precision."""
    return re.sub(
        r'"(col6|col11)":0\.0{300,}[0-9]+',
        r'"\1":9.999999999999999E-310',
        sample(f"oms-dataworks/{name}"),
    )


def test_dataworks_keys_named_by_schema_pk_must_be_columns(lake):
    lake.add_pipeline("dw", "oms-dataworks")
    lake.land("dw", "001.json", [dataworks_fixed("insert")])
    assert lake.run("dw").dead_lettered == 1
    # schema.pk names pkName1/pkName2, which the rows do not have: a dead letter, not a guess.
    assert lake.dead_letters()[0]["reason"] == "key column 'pkName1' is missing from the message"


def test_dataworks_samples_apply_with_configured_keys(lake):
    lake.add_pipeline("dw", "oms-dataworks", keys={"tab": ["col1", "col2"]})
    lake.land("dw", "001.json", [dataworks_fixed("insert")])
    s1 = lake.run("dw")
    assert s1.tables["tab"].inserted == 1 and s1.freshness_ms == 1647581000000
    row = lake.rows("tab")[0]
    assert (row["col7"], row["col9"], row["col16"]) == (
        Decimal("10223372036854775806"),
        "hello world",
        "2020-11-25 00:01:02.012345 Asia/Shanghai",
    )
    lake.land("dw", "002.json", [dataworks_fixed("update")])
    assert lake.run("dw").tables["tab"].updated == 1
    assert lake.rows("tab", "col9") == [{"col9": "hello world 2020"}]
    lake.land("dw", "003.json", [dataworks_fixed("delete")])
    assert lake.run("dw").tables["tab"].deleted == 1
    assert lake.rows("tab") == []


def test_dataworks_columns_are_typed_by_schema_column(lake):
    lake.add_pipeline("dw", "oms-dataworks")
    line = (
        '{"version":"2.0","schema":{"source":{"dbType":"ob_mysql","dbName":"db","table":"t"},'
        '"column":[{"name":"id","type":"BIGINT"},{"name":"zoned","type":"ZONED_DATETIME"},'
        '"PLACEHOLDER"],"pk":["id"]},"payload":{"before":null,"after":{"data":{"id":1,'
        '"zoned":"2020-11-25 00:01:02.012345 Asia/Shanghai","t":"00:01:02",'
        '"iv":"INTERVAL \'3\' DAY","b":"aGVsbG8gd29ybGQ="}},"op":"INSERT",'
        '"timestamp":{"eventTime":1647581000000},"ddl":null,"scn":"17"}}'
    ).replace(
        '"PLACEHOLDER"',
        '{"name":"t","type":"TIME"},{"name":"iv","type":"INTERVAL_DAY_TO_SECOND"},'
        '{"name":"b","type":"BLOB"}',
    )
    exact = line.replace('"id":1,', '"id":2,"d":"12345678.123456789012345678",').replace(
        '"type":"BIGINT"}', '"type":"BIGINT"},{"name":"d","type":"DECIMAL(30,18)"}'
    )
    rounded = exact.replace('"d":"12345678.123456789012345678"', '"d":12345678.123456789012345678')
    lake.land("dw", "001.json", [line, exact, rounded.replace('"id":2', '"id":3')])
    summary = lake.run("dw")
    assert (summary.messages, summary.dead_lettered) == (2, 1)
    assert lake.rows("t", "id", "d") == [
        {"id": 1, "d": None},
        {"id": 2, "d": Decimal("12345678.123456789012345678")},
    ]
    assert lake.dead_letters()[0]["reason"].startswith(
        "column 'd': the number (read as '1.234567812345679E7') has more digits"
    )
    assert lake.rows("t", "id", "zoned", "t", "iv", "b")[:1] == [
        {
            "id": 1,
            "zoned": SHANGHAI_2020_11_25,
            "t": "00:01:02",
            "iv": "INTERVAL '3' DAY",
            "b": bytearray(b"hello world"),
        }
    ]


def test_shareplex_update_is_a_patch_over_the_previous_row(lake):
    lake.add_pipeline("sp", "oms-shareplex", keys={"mock_table": ["col14", "col6"]})
    lake.land("sp", "001.json", [sample("oms-shareplex/insert")])
    assert lake.run("sp").tables["mock_table"].inserted == 1
    before = lake.rows("mock_table")[0]
    lake.land("sp", "002.json", [sample("oms-shareplex/update")])
    summary = lake.run("sp")
    assert summary.tables["mock_table"].updated == 1
    after = lake.rows("mock_table")[0]
    # Only the modified column changes (here a column the table did not have yet).
    assert after == {**before, "string": "hello world 2020"}
    lake.land("sp", "003.json", [sample("oms-shareplex/delete")])
    assert lake.run("sp").tables["mock_table"].deleted == 1
    assert lake.rows("mock_table") == []
    fresh = datetime.fromtimestamp(summary.freshness_ms / 1000, UTC).replace(tzinfo=None)
    assert fresh == datetime(2020, 11, 25, 0, 1, 2)


def test_shareplex_without_configured_keys_is_dead_lettered(lake):
    lake.add_pipeline("sp", "oms-shareplex")
    lake.land("sp", "001.json", [sample("oms-shareplex/insert")])
    assert lake.run("sp").dead_lettered == 1
    reason = lake.dead_letters()[0]["reason"]
    assert reason.startswith("no key columns known for source table mock_database.mock_table")


def test_ddl_records_are_kept_in_history_and_control_ops_change_no_row(lake):
    lake.add_pipeline("dw", "oms-dataworks")
    source = '"schema":{"source":{"dbName":"db","table":"t"},"column":[{"name":"a","type":"INT"}]}'
    lines = [
        f'{{"version":"2.0",{source},"payload":{{"op":"ALTER","ddl":{{"text":"ALTER TABLE t ADD '
        'COLUMN c INT"},"timestamp":{"eventTime":1647581000000},"scn":"5"}}',
        *[
            f'{{"version":"2.0","payload":{{"op":"{op}","timestamp":{{"eventTime":1}}}}}}'
            for op in ("TRANSACTION_BEGIN", "GTID", "XACOMMIT", "QUERY", "TRANSACTION_END")
        ],
        '{"version":"2.0","payload":{"op":"REBOOT","timestamp":{"eventTime":1}}}',
    ]
    lake.land("dw", "001.json", lines)
    summary = lake.run("dw")
    assert (summary.messages, summary.no_row_change, summary.ddl_recorded) == (6, 6, 1)
    assert [d["reason"] for d in lake.dead_letters()] == ["unknown op 'REBOOT'"]
    [ddl] = [r.asDict() for r in lake.table("_cdc_ddl_history").collect()]
    assert (ddl["line"], ddl["op"], ddl["statement"], ddl["source_table"], ddl["status"]) == (
        1,
        "ALTER",
        "ALTER TABLE t ADD COLUMN c INT",
        "db.t",
        "no_change",
    )
    assert ddl["detail"] == "no such table in the mirror yet"
    assert not summary.tables


def test_default_ddl_row_records_and_multi_column_keys(lake):
    lake.add_pipeline("oms", "oms-default")
    meta = '"allMetaData":{"record_primary_key":"a\\u0001b","table_name":"t","db":"ten.db",'
    lines = [
        "{" + meta + '"timestamp":"1"},"recordType":"DDL","prevStruct":null,'
        '"postStruct":{"ddl":"CREATE TABLE t (a INT, b INT, v TEXT, PRIMARY KEY (a, b))"}}',
        "{" + meta + '"timestamp":"2"},"recordType":"ROW","prevStruct":null,'
        '"postStruct":{"a":1,"b":1,"v":"x"}}',
        "{" + meta + '"timestamp":"3"},"recordType":"INSERT","prevStruct":null,'
        '"postStruct":{"a":1,"b":2,"v":"y"}}',
        "{" + meta + '"timestamp":"4"},"recordType":"HEARTBEAT"}',
        "{" + meta + '"timestamp":"5"},"recordType":"DELETE","postStruct":null,'
        '"prevStruct":{"a":1,"b":1,"v":"x"}}',
    ]
    lake.land("oms", "001.json", lines)
    summary = lake.run("oms")
    assert (summary.messages, summary.ddl_recorded, summary.freshness_ms) == (5, 1, 5000)
    assert lake.rows("t") == [{"a": 1, "b": 2, "v": "y"}]
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        lake.catalog,
        uri=f"sqlite:///{lake.root / 'catalog.db'}",
        warehouse=(lake.root / "warehouse").as_uri(),
    )
    schema = catalog.load_table("ods.t").schema()
    assert sorted(schema.identifier_field_names()) == ["a", "b"]
    ddl = lake.table("_cdc_ddl_history").collect()[0]
    assert ddl["statement"].startswith("CREATE TABLE t") and ddl["source_table"] == "ten.db.t"
