"""With ``deletes: soft`` the mirror does not depend on how landed files were grouped into
batches (issue 51, defect 12): a key upserted and deleted in one batch keeps its row, flagged,
with the upsert's values, as two batches split between the upsert and the delete leave it.

Each scenario lands the same files for three pipelines (namespaces) and runs them grouped
differently: every file in its own batch, all files in one batch, the first file then the rest.
The expected rows are written by hand from the source's history: what a soft delete promises is
the row's last values, flagged.
"""

from __future__ import annotations

from typing import Any

import pytest
from canal_messages import TEXT, row_message
from spark_probes import GROUP_WRITE_PATHS, use_group_write_path

# Files as they land, each a batch of its own in the pipeline "split".
CANAL_FILES = [
    [
        row_message("items", "INSERT", {"id": 1, "v": "a"}, 10),
        row_message("items", "INSERT", {"id": 2, "v": "b"}, 11),
        row_message("items", "INSERT", {"id": 3, "v": "c"}, 12),
        row_message("items", "DELETE", {"id": 9, "v": "z"}, 13),  # never there: a tombstone
        row_message("items", "INSERT", {"id": 5, "v": "e"}, 14),
    ],
    [
        row_message("items", "DELETE", {"id": 3, "v": "c"}, 20),
        row_message("items", "UPDATE", {"id": 1, "v": "a2"}, 21),
        row_message("items", "INSERT", {"id": 4, "v": "d"}, 22),
        row_message("items", "UPDATE", {"id": 5, "v": "e-older"}, 9),  # older than its insert
    ],
    [
        row_message("items", "DELETE", {"id": 1, "v": "a2"}, 30),
        row_message("items", "DELETE", {"id": 4, "v": "d"}, 31),
        row_message("items", "INSERT", {"id": 3, "v": "c3"}, 32),  # revives the flagged row
        row_message("items", "DELETE", {"id": 5, "v": "e"}, 33),
        row_message("items", "INSERT", {"id": 9, "v": "nine"}, 35),  # past its tombstone
    ],
    [
        row_message("items", "DELETE", {"id": 3, "v": "c3"}, 40),
        row_message("items", "DELETE", {"id": 9, "v": "nine"}, 41),
        row_message("items", "DELETE", {"id": 1, "v": "a2"}, 42),  # of a flagged row
        row_message("items", "INSERT", {"id": 6, "v": "f"}, 43),
        row_message("items", "UPDATE", {"id": 6, "v": "f2"}, 44),
        row_message("items", "DELETE", {"id": 6, "v": "f2"}, 45),
        row_message("items", "DELETE", {"id": 7, "v": "never"}, 46),  # no row, ever
    ],
]
# Per id: its last values, whether it is deleted, the operation of its last change.
CANAL_EXPECTED = {
    1: ("a2", True, "DELETE"),
    2: ("b", False, "INSERT"),
    3: ("c3", True, "DELETE"),
    4: ("d", True, "DELETE"),
    5: ("e", True, "DELETE"),
    6: ("f2", True, "DELETE"),
    9: ("nine", True, "DELETE"),
}
# Batches of each pipeline, as the numbers of the files each applies.
GROUPINGS = {"split": [[0], [1], [2], [3]], "whole": [[0, 1, 2, 3]], "pairs": [[0], [1, 2, 3]]}
# The table written alone (``keyed.apply_table``), not in a group of tables.
ALONE = ("alone", None)


def _run_groupings(lake: Any, fmt: str, files: list[list[Any]], **options: Any) -> None:
    for pipeline, batches in GROUPINGS.items():
        lake.add_pipeline(pipeline, fmt, deletes="soft", namespace=pipeline, **options)
        for batch in batches:
            for number in batch:
                lake.land(pipeline, f"{number:03d}.json", files[number])
            summary = lake.run(pipeline)
            assert summary.dead_lettered == 0, summary.render()


def _mirrored(lake: Any, pipeline: str, table: str, *values: str) -> dict[int, tuple[Any, ...]]:
    rows = lake.rows(table, "id", *values, "_cdc_deleted", "_cdc_op", namespace=pipeline)
    return {r["id"]: tuple(r[c] for c in (*values, "_cdc_deleted", "_cdc_op")) for r in rows}


@pytest.mark.parametrize(("rewritten_rows", "chunk_rows"), [*GROUP_WRITE_PATHS, ALONE])
def test_soft_deletes_give_one_mirror_however_the_files_are_batched(
    lake, rewritten_rows, chunk_rows
):
    if rewritten_rows == "alone":
        lake.route_at(group_rows=0)
    else:
        use_group_write_path(lake, rewritten_rows, chunk_rows)

    _run_groupings(lake, "canal-json", CANAL_FILES)

    for pipeline in GROUPINGS:
        assert _mirrored(lake, pipeline, "items", "v") == CANAL_EXPECTED, pipeline


# Text columns enough for a table's changes to be typed by column type (``types_by_type``).
PADDING = 150
WIDE_TYPES = {**TEXT, **{f"p{i}": "VARCHAR(10)" for i in range(PADDING)}}


def _widened(message: dict[str, Any]) -> dict[str, Any]:
    """The message with each upserted row's ``v`` in every padding column too; a delete's row
    keeps its key and ``v`` only, so that only the values it carries from its upsert
    (``soft_deletes``) fill its padding."""
    if message["type"] == "DELETE":
        return {**message, "mysqlType": WIDE_TYPES}
    rows = [{**r, **{f"p{i}": r["v"] for i in range(PADDING)}} for r in message["data"]]
    return {**message, "data": rows, "mysqlType": WIDE_TYPES}


@pytest.mark.parametrize(("rewritten_rows", "chunk_rows"), [(None, None), (None, 2)])
def test_a_wide_tables_soft_deletes_keep_every_columns_last_value(lake, rewritten_rows, chunk_rows):
    use_group_write_path(lake, rewritten_rows, chunk_rows)

    _run_groupings(lake, "canal-json", [[_widened(m) for m in f] for f in CANAL_FILES])

    expected = {k: (v, v, deleted, op) for k, (v, deleted, op) in CANAL_EXPECTED.items()}
    for pipeline in GROUPINGS:
        assert _mirrored(lake, pipeline, "items", "v", "p149") == expected, pipeline


# Debezium's placeholder for a value it did not send (PostgreSQL TOAST).
UNSENT = "__debezium_unavailable_value"
FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "name"},
    {"type": "string", "optional": True, "field": "doc"},
]
SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "struct", "optional": True, "field": side, "fields": FIELDS}
        for side in ("before", "after")
    ],
}


def _debezium(op: str, before: Any, after: Any, lsn: int) -> dict[str, Any]:
    source = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "docs"}
    payload = {
        "op": op,
        "ts_ms": lsn,
        "before": before,
        "after": after,
        "source": {**source, "ts_ms": lsn, "lsn": lsn},
    }
    return {"schema": SCHEMA, "payload": payload}


def _doc(key: int, name: str, doc: str) -> dict[str, Any]:
    return {"id": key, "name": name, "doc": doc}


DEBEZIUM_FILES = [
    [
        _debezium("c", None, _doc(1, "a", "long text"), 10),
        _debezium("c", None, _doc(2, "b", "two"), 11),
    ],
    [
        # Updated without its TOASTed doc, then deleted: the row keeps the doc it had.
        _debezium("u", _doc(1, "a", UNSENT), _doc(1, "a2", UNSENT), 20),
        _debezium("c", None, _doc(3, "c", "three"), 21),
    ],
    [
        _debezium("d", _doc(1, "a2", UNSENT), None, 30),
        _debezium("u", _doc(2, "b", UNSENT), _doc(2, "b2", UNSENT), 31),
        _debezium("d", _doc(2, "b2", UNSENT), None, 32),
        # Moved to another key: the old key's row stays, flagged, with its values.
        _debezium("u", _doc(3, "c", UNSENT), _doc(4, "c2", "four"), 33),
    ],
]
DEBEZIUM_EXPECTED = {
    1: ("a2", "long text", True, "d"),
    2: ("b2", "two", True, "d"),
    3: ("c", "three", True, "u"),
    4: ("c2", "four", False, "u"),
}


def test_soft_deletes_after_unsent_values_and_moved_keys_however_the_files_are_batched(lake):
    # Unsent values and moved keys are applied a table at a time (keyed.apply_table).
    grouped = {"split": [[0], [1], [2]], "whole": [[0, 1, 2]], "pairs": [[0], [1, 2]]}
    for pipeline, batches in grouped.items():
        lake.add_pipeline(
            pipeline, "debezium-json", deletes="soft", namespace=pipeline, keys={"docs": ["id"]}
        )
        for batch in batches:
            for number in batch:
                lake.land(pipeline, f"{number:03d}.json", DEBEZIUM_FILES[number])
            assert lake.run(pipeline).dead_lettered == 0

    for pipeline in grouped:
        assert _mirrored(lake, pipeline, "docs", "name", "doc") == DEBEZIUM_EXPECTED, pipeline
