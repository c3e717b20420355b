"""``_cdc_checkpoints`` rows read once for every reader (state/lake.py), on hand-written rows."""

from __future__ import annotations

import json
from typing import Any

from cdc_ingest.landing.zones import LandedFile
from cdc_ingest.state.lake import OffsetRange, checkpoint_state, pending_work


def row(batch_id: int, status: str, file: str | None = None, **values: Any) -> dict[str, Any]:
    return {"batch_id": batch_id, "status": status, "file": file, **values}


ROWS = [
    # Batch 1: a.json applied, b.json a duplicate of it, committed.
    row(1, "planned", "s3://l/a.json", file_idx=0, size=10, fingerprint="fa"),
    row(1, "planned", "s3://l/b.json", file_idx=1, size=10, fingerprint="fa"),
    row(1, "applied", "s3://l/a.json", file_idx=0, size=10, fingerprint="fa"),
    row(1, "duplicate", "s3://l/b.json"),
    row(1, "committed", recorded_at="2026-11-20T10:00:00"),
    # Batch 2: c.json with Kafka offsets, committed.
    row(2, "planned", "s3://l/c.json", file_idx=0, size=7, fingerprint="fc"),
    row(
        2,
        "applied",
        "s3://l/c.json",
        file_idx=0,
        size=7,
        fingerprint="fc",
        kafka_topic="t",
        kafka_partition=0,
        min_offset=5,
        max_offset=9,
    ),
    row(2, "committed", recorded_at="2026-11-20T11:00:00"),
    # Batch 3: planned (d.json, e.json), never committed.
    row(3, "planned", "s3://l/e.json", file_idx=1, size=3, fingerprint="fe"),
    row(3, "planned", "s3://l/d.json", file_idx=0, size=4, fingerprint="fd"),
]


def test_committed_batches_and_the_planned_one() -> None:
    state = checkpoint_state(ROWS)
    assert state.last_batch_id == 3
    assert state.last_committed_batch_id == 2
    assert state.last_committed_at == "2026-11-20T11:00:00"
    assert state.seen_files == {"s3://l/a.json", "s3://l/b.json", "s3://l/c.json"}
    assert state.duplicates == 1
    assert state.fingerprints == {"fa": "s3://l/a.json", "fc": "s3://l/c.json"}
    assert state.offset_ranges == [OffsetRange("t", 0, 5, 9)]
    assert state.applied == {"s3://l/a.json": (1, 0, 10, "fa"), "s3://l/c.json": (2, 0, 7, "fc")}
    assert state.pending_batch_id == 3
    assert state.pending == [
        LandedFile("s3://l/d.json", 4, "fd"),
        LandedFile("s3://l/e.json", 3, "fe"),
    ]
    assert state.pending_replay is None


def test_pending_work_counts_the_planned_files_and_the_batch_to_resume() -> None:
    landed = ["s3://l/a.json", "s3://l/b.json", "s3://l/c.json", "s3://l/d.json", "s3://l/f.json"]
    work = pending_work(landed, checkpoint_state(ROWS))
    # e.json was deleted after it was planned: the resumed batch records it missing.
    assert work.files == ["s3://l/d.json", "s3://l/f.json"]
    assert work.resumes_batch == 3 and work.any
    nothing = pending_work(landed[:3], checkpoint_state(ROWS[:8]))
    assert nothing.files == [] and nothing.resumes_batch is None and not nothing.any
    # A planned batch is work even when none of its files is listed any more.
    assert pending_work([], checkpoint_state(ROWS)).any


def test_a_pending_replay_is_read_back_with_its_header_and_origins() -> None:
    header = {"mode": "replay", "from": "2026-11-20T00:00:00+00:00", "to": None}
    notes = [{"replay": header, "of_batch": 1, "of_file_idx": 0}, {"of_batch": 2, "of_file_idx": 0}]
    replay = [
        row(4, "planned", "s3://l/a.json", file_idx=0, size=10, summary=json.dumps(notes[0])),
        row(4, "planned", "s3://l/c.json", file_idx=1, size=7, summary=json.dumps(notes[1])),
    ]
    state = checkpoint_state(ROWS[:8] + replay)
    assert state.pending_batch_id == 4
    assert state.pending_replay == header
    assert state.pending_origins == [(1, 0), (2, 0)]


def test_rows_without_the_optional_columns_still_say_what_is_pending() -> None:
    # What check_landing scans with pyiceberg: batch_id, status and file only.
    slim = [{k: r[k] for k in ("batch_id", "status", "file")} for r in ROWS]
    state = checkpoint_state(slim)
    assert state.seen_files == {"s3://l/a.json", "s3://l/b.json", "s3://l/c.json"}
    assert state.pending_batch_id == 3
