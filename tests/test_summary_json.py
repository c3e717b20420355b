"""``cdc-ingest run --json`` prints the batch's summary as its last line; a caller (the bench on
the engine, a wrapper script) reads it back as a ``RunSummary`` whose counts still add up."""

from __future__ import annotations

from cdc_ingest.state.summary import RunSummary

# A 3-line batch as ``cdc-ingest run --json`` prints it (fields it leaves at their defaults cut).
PRINTED = (
    '{"batch_id": 7, "dead_lettered": 1, "files": ["file:///landing/001.json"], "lines": 3, '
    '"messages": 2, "pipeline": "shop", "records": 3, "tables": {"orders": {"created": true, '
    '"inserted": 1, "messages": 2, "table": "orders", "updated": 1}}}'
)


def test_the_printed_summary_reads_back_with_its_tables_and_counts():
    summary = RunSummary.from_json(PRINTED)

    assert (summary.pipeline, summary.batch_id, summary.lines) == ("shop", 7, 3)
    assert summary.files == ["file:///landing/001.json"]
    orders = summary.tables["orders"]
    assert (orders.inserted, orders.updated, orders.deleted, orders.created) == (1, 1, 0, True)
    assert summary.unaccounted() == []


def test_a_read_back_summary_that_does_not_add_up_says_so():
    short = PRINTED.replace('"inserted": 1', '"inserted": 0')

    assert RunSummary.from_json(short).unaccounted() != []
