"""Batch metrics through Airflow's own StatsD client, read by a UDP listener on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# What apply_batch does once its batch is recorded, in a process of its own whose Airflow metrics
# configuration points at the test's listener (Airflow's client reads it when initialized, as the
# task runner initializes it).
SENDER = """
import json, sys
from airflow.sdk.observability import stats
from airflow.sdk.observability.metrics import stats_utils
stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=True)
from cdc_ingest_airflow.metrics import send_batch_metrics
print(send_batch_metrics(json.loads(sys.stdin.read()), int(sys.argv[1])))
"""


def canal(i: int, es: int) -> dict:
    return {
        "data": [{"id": str(i), "v": f"v{i}"}],
        "database": "shop",
        "es": es,
        "isDdl": False,
        "mysqlType": {"id": "INT", "v": "VARCHAR(8)"},
        "pkNames": ["id"],
        "table": "orders",
        "type": "INSERT",
    }


def test_one_batch_sends_its_metrics_to_statsd(lake, tmp_path):
    lake.add_pipeline("shop", "canal-json")
    lake.land(
        "shop",
        "a.json",
        [
            canal(1, 1_700_000_000_000),
            canal(2, 1_700_000_001_000),
            canal(3, 1_700_000_002_000),
            "not json",
        ],
    )
    summary = json.loads(lake.run("shop").to_json())
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(30)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(listener.getsockname()[1]),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "PYTHONPATH": os.pathsep.join([str(REPO / "jobs"), str(REPO / "plugins")]),
    }
    sent_at = time.time()
    done = subprocess.run(
        [sys.executable, "-c", SENDER, "2"],
        input=json.dumps(summary),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    count = int(done.stdout.strip().splitlines()[-1])
    received: dict[str, tuple[float, str]] = {}
    # Airflow sends metrics of its own too (serializers loaded): only the job's are counted.
    while len(received) < count:
        datagram = listener.recv(65536).decode()
        for line in datagram.splitlines():
            name, _, rest = line.partition(":")
            value, _, kind = rest.partition("|")
            if name.startswith("airflow.cdc_ingest."):
                received[name] = (float(value), kind)
    listener.close()
    counters = {n: v for n, (v, k) in received.items() if k == "c"}
    assert counters == {
        "airflow.cdc_ingest.shop.lines": 4,
        "airflow.cdc_ingest.shop.dead_lettered": 1,
        "airflow.cdc_ingest.shop.ddl_rejected": 0,
        "airflow.cdc_ingest.shop.orders.inserted": 3,
        "airflow.cdc_ingest.shop.orders.updated": 0,
        "airflow.cdc_ingest.shop.orders.deleted": 0,
        "airflow.cdc_ingest.shop.orders.dead_lettered": 0,
    }
    assert received["airflow.cdc_ingest.shop.files_pending"] == (2, "g")
    lag, kind = received["airflow.cdc_ingest.shop.lag_seconds"]
    # The newest change applied is from 1_700_000_002 (epoch seconds).
    assert kind == "g" and abs(lag - (sent_at - 1_700_000_002)) < 60
    duration, kind = received["airflow.cdc_ingest.shop.batch_duration"]
    assert kind == "ms" and duration > 0


def test_each_expectation_of_a_table_is_a_counter_tagged_with_its_rule():
    """Issue 69: counts per rule reach the metrics, one counter per rule of each table."""
    from cdc_ingest_airflow.metrics import batch_metrics

    rules = {
        "positive_qty": {"on_violation": "drop", "violations": 2},
        "known_status": {"on_violation": "warn", "violations": 0},
    }
    summary = {
        "pipeline": "shop",
        "batch_id": 3,
        "tables": {"orders": {"inserted": 1, "expectations": rules}},
    }
    found = [m for m in batch_metrics(summary, 0, now=0.0) if ".expectation." in m[1]]
    table = {"pipeline": "shop", "table": "orders"}
    assert found == [
        (
            "incr",
            "cdc_ingest.shop.orders.expectation.known_status",
            0.0,
            {**table, "rule": "known_status", "on_violation": "warn"},
        ),
        (
            "incr",
            "cdc_ingest.shop.orders.expectation.positive_qty",
            2.0,
            {**table, "rule": "positive_qty", "on_violation": "drop"},
        ),
    ]
