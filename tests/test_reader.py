"""Reading landed files: line numbers, blank lines, line ends, BOM, gzip and invalid UTF-8."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from cdc_ingest.landing.reader import DRIVER_BYTES, read_lines
from cdc_ingest.landing.zones import LandedFile

BOM = b"\xef\xbb\xbf"


def _insert(key: int, name: str, ts: int) -> bytes:
    message = {
        "schema": {},
        "payload": {
            "op": "c",
            "ts_ms": ts,
            "before": None,
            "after": {"id": str(key), "name": name},
            "source": {"db": "ld", "namespace": "default", "table": "customers", "ts_ms": ts},
        },
    }
    return json.dumps(message, ensure_ascii=False).encode("utf-8")


# Files given as bare URIs go to Spark's text source; listed with their (small) size they are
# read by Python tasks, many files to a task, or by the driver when they are few bytes in all.
# All must read alike.
READERS = ["text-source", "packed", "driver"]


def _lines(spark, paths: list[Path], reader: str = "text-source") -> list[tuple]:
    files: list[str | LandedFile] = [p.as_uri() for p in paths]
    if reader != "text-source":
        files = [LandedFile(p.as_uri(), p.stat().st_size) for p in paths]
    frame = read_lines(spark, files, driver_bytes=0 if reader == "packed" else DRIVER_BYTES)
    plan = frame._jdf.queryExecution().executedPlan().toString()
    if reader != "text-source":
        assert ("MapInArrow" in plan) == (reader == "packed"), plan
    return sorted(tuple(r) for r in frame.collect())


@pytest.mark.parametrize("reader", READERS)
def test_local_lines_keep_their_numbers_across_blank_lines_line_ends_and_bom(
    spark, tmp_path, reader
):
    path = tmp_path / "a.jsonl"
    path.write_bytes(BOM + b"first\r\n\n \t \r\nfourth\rstill fourth\nfifth\r\r\n\nseventh")
    assert _lines(spark, [path], reader) == [
        (0, 1, "first", None),
        # A lone "\r" does not end a line; only "\n" does.
        (0, 4, "fourth\rstill fourth", None),
        (0, 5, "fifth", None),
        (0, 7, "seventh", None),
    ]


@pytest.mark.parametrize("reader", READERS)
def test_gzipped_local_file_reads_like_the_plain_one(spark, tmp_path, reader):
    content = BOM + b"one\r\n\ntwo\n\xc3\xa9three\n"
    (tmp_path / "plain.jsonl").write_bytes(content)
    (tmp_path / "packed.jsonl.gz").write_bytes(gzip.compress(content))
    paths = [tmp_path / "packed.jsonl.gz", tmp_path / "plain.jsonl"]
    assert _lines(spark, paths, reader) == [
        (0, 1, "one", None),
        (0, 3, "two", None),
        (0, 4, "\u00e9three", None),
        (1, 1, "one", None),
        (1, 3, "two", None),
        (1, 4, "\u00e9three", None),
    ]


@pytest.mark.parametrize("reader", READERS)
def test_invalid_utf8_is_flagged_with_the_byte_where_it_starts(spark, tmp_path, reader):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"a":"ok"}\n{"b":"\xc3\xa9\xff\xfe"}\n{"c":"\xe2\x82"}\n')
    assert _lines(spark, [path], reader) == [
        (0, 1, '{"a":"ok"}', None),
        (0, 2, '{"b":"\u00e9\ufffd\ufffd"}', "line is not valid UTF-8 (at byte 8)"),
        (0, 3, '{"c":"\ufffd"}', "line is not valid UTF-8 (at byte 6)"),
    ]


def test_each_file_keeps_its_index_whatever_its_size_or_name(spark, tmp_path):
    # Spark orders its partitions by file size: the index must come from the file, not the order.
    odd = tmp_path / "dir with space [x]"
    odd.mkdir()
    names = [odd / "1 small+{a}.jsonl", tmp_path / "2-large.jsonl", odd / "3 medium%20.jsonl.gz"]
    names[0].write_bytes(b"s1\ns2\n")
    names[1].write_bytes(b"".join(b"l%d\n" % i for i in range(1, 2001)))
    names[2].write_bytes(gzip.compress(b"m1\n\nm3\n" * 10))
    lines = _lines(spark, names)
    assert lines[:2] == [(0, 1, "s1", None), (0, 2, "s2", None)]
    assert lines[2:4] == [(1, 1, "l1", None), (1, 2, "l2", None)]
    assert lines[2001] == (1, 2000, "l2000", None)
    assert lines[2002:2005] == [(2, 1, "m1", None), (2, 3, "m3", None), (2, 4, "m1", None)]
    assert lines[-1] == (2, 30, "m3", None)
    assert len(lines) == 2 + 2000 + 20


def test_small_files_are_packed_into_few_tasks_and_keep_their_line_numbers(spark, tmp_path):
    paths = []
    for n in range(300):
        path = tmp_path / f"{n:04d}.jsonl"
        # File n has n % 7 blank lines first, then its two lines.
        path.write_bytes(b"\n" * (n % 7) + b"a%d\nb%d\n" % (n, n))
        paths.append(path)
    files = [LandedFile(p.as_uri(), p.stat().st_size) for p in paths]
    frame = read_lines(spark, files, leave_out={5}, driver_bytes=0)
    assert frame.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism + 1
    lines = sorted(tuple(r) for r in frame.collect())
    assert len(lines) == 2 * 299
    assert lines[:2] == [(0, 1, "a0", None), (0, 2, "b0", None)]
    assert (13, 7, "a13", None) in lines and (13, 8, "b13", None) in lines
    assert lines[-1] == (299, 2 + 299 % 7, "b299", None)
    assert not [line for line in lines if line[0] == 5]


def test_dead_letters_name_file_and_line_and_every_line_is_counted(lake):
    landing = lake.add_pipeline("customers", "lindorm", keys={"customers": ["id"]})
    not_utf8 = _insert(2, "Bo?", 11).replace(b"Bo?", b"Bo\xff")
    (landing / "001 first.jsonl").write_bytes(
        BOM + _insert(1, "Ann", 10) + b"\r\n\n" + b"{not json\r\n" + not_utf8 + b"\n"
    )
    (landing / "002.jsonl.gz").write_bytes(
        gzip.compress(b"\n\n" + _insert(3, "Chen", 12) + b"\n[1,2]\n" + _insert(4, "D\u00e9", 13))
    )
    summary = lake.run("customers")
    assert (summary.lines, summary.messages, summary.dead_lettered) == (6, 3, 3)
    assert lake.rows("customers") == [
        {"id": "1", "name": "Ann"},
        {"id": "3", "name": "Chen"},
        {"id": "4", "name": "D\u00e9"},
    ]
    letters = [
        (Path(d["file"]).name, d["line"], d["reason"].split(":")[0].split(" (")[0])
        for d in lake.dead_letters()
    ]
    assert letters == [
        ("001%20first.jsonl", 3, "line is not valid JSON"),
        ("001%20first.jsonl", 4, "line is not valid UTF-8"),
        ("002.jsonl.gz", 4, "not a lindorm message"),
    ]
