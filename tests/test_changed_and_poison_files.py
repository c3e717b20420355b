"""Landed files that change, vanish or are corrupt: caught and named; the rest flows."""

from __future__ import annotations

import gzip
import os
from typing import Any

from cdc_ingest.checkpoint_store import CheckpointStore
from cdc_ingest.config import load_config
from cdc_ingest.landing import list_landed
from formats_under_test import KEY, TABLE, Changes


def _insert_lines(c: Changes, first: int, count: int) -> list[str]:
    return [
        c.insert({"id": k, "owner": f"o{k}", "balance": k}, 1000 + k)
        for k in range(first, first + count)
    ]


def _plan_and_die(lake: Any, pipeline: str) -> None:
    """What a run killed right after its plan commit leaves: a planned batch, no table changed."""
    config = load_config(lake.config_path)
    store = CheckpointStore(lake.spark, lake.catalog, "ods", pipeline)
    store.record_planned(store.plan(list_landed(config.pipeline(pipeline).landing), store.load()))


def _statuses(lake: Any) -> list[tuple[int, str, str]]:
    rows = lake.table("_cdc_checkpoints").where("file is not null").collect()
    return sorted((r["batch_id"], r["status"], os.path.basename(r["file"])) for r in rows)


def test_a_planned_file_truncated_before_it_is_read_is_left_out_and_planned_again(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    lake.land("accounts", "000.json", _insert_lines(c, 100, 1))
    lake.run("accounts")  # the system tables
    lake.land("accounts", "001.json", _insert_lines(c, 1, 4))
    second = lake.land("accounts", "002.json", _insert_lines(c, 5, 4))
    _plan_and_die(lake, "accounts")
    second.write_text("".join(line + "\n" for line in _insert_lines(c, 5, 2)))

    resumed = lake.run("accounts")

    assert resumed.resumed and resumed.batch_id == 2
    assert list(resumed.changed_files) == [second.as_uri()]
    assert "bytes when planned" in resumed.changed_files[second.as_uri()]
    assert (resumed.lines, resumed.tables[TABLE].inserted) == (4, 4)
    assert "1 files left out, changed after they were planned" in resumed.render()
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 4, 100]
    # Not seen: the next batch plans the file with what it holds now.
    again = lake.run("accounts")
    assert again.batch_id == 3 and again.files == [second.as_uri()]
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 4, 5, 6, 100]
    assert _statuses(lake) == [
        (1, "applied", "000.json"),
        (1, "planned", "000.json"),
        (2, "applied", "001.json"),
        (2, "changed", "002.json"),
        (2, "planned", "001.json"),
        (2, "planned", "002.json"),
        (3, "applied", "002.json"),
        (3, "planned", "002.json"),
    ]


def test_a_planned_file_rewritten_with_the_same_size_is_caught_by_its_fingerprint(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    lake.land("accounts", "000.json", _insert_lines(c, 100, 1))
    lake.run("accounts")
    path = lake.land("accounts", "001.json", _insert_lines(c, 1, 2))
    _plan_and_die(lake, "accounts")
    text = path.read_text()
    path.write_text(text.replace('"o1"', '"x1"'))

    resumed = lake.run("accounts")

    assert resumed.changed_files == {path.as_uri(): "same size, other content than when planned"}
    assert resumed.lines == 0 and TABLE not in resumed.tables
    assert lake.run("accounts").tables[TABLE].inserted == 2
    assert lake.rows(TABLE, "id", "owner")[0] == {"id": 1, "owner": "x1"}


def test_a_planned_file_deleted_before_it_is_read_is_recorded_missing(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    lake.land("accounts", "000.json", _insert_lines(c, 100, 1))
    lake.run("accounts")
    lake.land("accounts", "001.json", _insert_lines(c, 1, 2))
    gone = lake.land("accounts", "002.json", _insert_lines(c, 3, 2))
    _plan_and_die(lake, "accounts")
    gone.unlink()

    resumed = lake.run("accounts")

    assert resumed.missing_files == {gone.as_uri(): "deleted after it was planned"}
    assert "1 files left out, deleted after they were planned" in resumed.render()
    assert resumed.tables[TABLE].inserted == 2
    assert (2, "missing", "002.json") in _statuses(lake)
    assert lake.run("accounts").batch_id is None


def test_lines_appended_to_an_applied_file_are_reported(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    path = lake.land("accounts", "001.json", _insert_lines(c, 1, 2))
    size = path.stat().st_size
    lake.run("accounts")
    with path.open("a") as handle:
        handle.write(_insert_lines(c, 3, 1)[0] + "\n")

    later = lake.run("accounts")

    assert later.batch_id is None
    assert later.changed_after_applied == {
        path.as_uri(): f"applied with {size} bytes by batch 1, {path.stat().st_size} bytes now"
    }
    assert "1 files changed after they were applied (not applied)" in later.render()


def test_a_corrupt_gzip_file_is_one_dead_letter_and_the_other_files_apply(lake):
    c = Changes("debezium-json")
    lake.add_pipeline("accounts", "debezium-json", keys={TABLE: [KEY]})
    good = "".join(line + "\n" for line in _insert_lines(c, 1, 3)).encode()
    (lake.landing("accounts") / "001.json.gz").write_bytes(gzip.compress(good))
    packed = gzip.compress("".join(line + "\n" for line in _insert_lines(c, 10, 50)).encode())
    bad = lake.landing("accounts") / "002.json.gz"
    bad.write_bytes(packed[: len(packed) // 2])
    lake.land("accounts", "003.json", _insert_lines(c, 4, 1))

    summary = lake.run("accounts")

    # None of the truncated file's lines are applied: its 50 changes are one dead letter.
    assert sorted(r["id"] for r in lake.rows(TABLE, "id")) == [1, 2, 3, 4]
    assert (summary.lines, summary.messages, summary.dead_lettered) == (5, 4, 1)
    [letter] = lake.dead_letters()
    assert (letter["file"], letter["line"], letter["raw"]) == (bad.as_uri(), 0, None)
    assert letter["reason"].startswith(
        "file is not a readable gzip stream, none of its lines read: "
    )
    # The file is applied (as one dead letter): the pipeline does not stay stuck on it.
    assert lake.run("accounts").batch_id is None
