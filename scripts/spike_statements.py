"""The statements of a 1-line batch, as a proxy that runs on a classic session and through Spark
Connect alike (``spike_engine.py``): read the landed line, type it, count, MERGE it into an
Iceberg table, read the snapshot it made, plus the schema lookups and small collects a batch of
the job makes (``ANALYSES``, ``COLLECTS``), each of which is a round trip under Spark Connect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ANALYSES = 40
COLLECTS = 10


def statements(spark: Any, number: int, path: str) -> bool:
    """Run the batch's statements; returns whether the MERGE's snapshot carries the property set
    in the session's conf (``spark.sql.iceberg.snapshot-property.*``), which SQL writes need
    where the JVM's ``CommitMetadata`` is out of reach (Spark Connect)."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    landed = folder / f"{number:06d}.json"
    landed.write_text(json.dumps({"id": number, "v": f"value {number}", "es": number}) + "\n")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS spike.bench")
    spark.sql(
        "CREATE TABLE IF NOT EXISTS spike.bench.items (id BIGINT, v STRING, _cdc_order BINARY)"
        " USING iceberg"
    )
    lines = spark.read.text(str(landed))
    parsed = lines.selectExpr("from_json(value, 'id BIGINT, v STRING, es BIGINT') AS m").selectExpr(
        "m.id AS id", "m.v AS v", "CAST(m.es AS BINARY) AS _cdc_order"
    )
    frame = parsed
    for step in range(ANALYSES):
        frame = frame.selectExpr(*frame.columns) if step % 2 else frame.where("id IS NOT NULL")
    assert frame.count() == 1
    frame.createOrReplaceTempView("spike_batch")
    spark.conf.set("spark.sql.iceberg.snapshot-property.spike-batch", str(number))
    spark.sql(
        "MERGE INTO spike.bench.items t USING spike_batch s ON t.id = s.id "
        "WHEN MATCHED AND s._cdc_order > t._cdc_order THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    spark.conf.unset("spark.sql.iceberg.snapshot-property.spike-batch")
    latest = None
    for _ in range(COLLECTS):
        latest = spark.sql(
            "SELECT snapshot_id, summary FROM spike.bench.items.snapshots "
            "ORDER BY committed_at DESC LIMIT 1"
        ).collect()[0]
    assert latest is not None
    return latest["summary"].get("spike-batch") == str(number)
