"""A cold run's driver maps the classes ``make install`` archived (``cdc_ingest.jvm_archive``)
instead of loading and verifying each from its jar."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

CLI = str(Path(sys.executable).parent / "cdc-ingest")


def _sources(log: Path, prefix: str) -> Counter[str]:
    """Where the JVM took each class of a package from: the archive or a jar (classes it
    generates or defines at run time, such as lambdas' and codegen's, come from neither)."""
    seen: Counter[str] = Counter()
    for line in log.read_text().splitlines():
        fields = line.split("] ", 1)[-1].split(" source: ")
        if len(fields) == 2 and fields[0].startswith(prefix):
            if fields[1] == "shared objects file (top)":
                seen["archive"] += 1
            elif fields[1].startswith(("file:", "jar:")):
                seen["jar"] += 1
    return seen


@pytest.mark.slow
def test_a_small_cold_run_maps_classes_from_the_install_archive_and_compiles_with_c1(
    lake: Any, tmp_path: Path
) -> None:
    from cdc_ingest.jvm_archive import archive_path

    assert archive_path().is_file(), "make install builds the archive"
    lake.add_pipeline("shop", "canal-json")
    row = {"id": "1", "v": "a"}
    lake.land(
        "shop",
        "001.json",
        [
            {
                "data": [row],
                "database": "shop",
                "table": "items",
                "pkNames": ["id"],
                "isDdl": False,
                "type": "INSERT",
                "es": 1,
                "ts": 1,
                "sql": "",
                "mysqlType": {"id": "int", "v": "varchar(20)"},
                "old": None,
            }
        ],
    )
    log = tmp_path / "classes.log"
    # Not the suite's C1-only option (conftest): a batch this small gets it from the CLI itself,
    # which the flags the driver prints show.
    options = f"-Xlog:class+load=info:file={log} -XX:+PrintFlagsFinal"
    done = subprocess.run(
        [CLI, "run", "--config", str(lake.config_path), "--pipeline", "shop"],
        capture_output=True,
        text=True,
        env={**os.environ, "SPARK_SUBMIT_OPTS": options},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert lake.rows("items") == [{"id": 1, "v": "a"}]
    [compilers] = [
        line.split() for line in done.stdout.splitlines() if " TieredStopAtLevel " in line
    ]
    assert compilers[:4] == ["intx", "TieredStopAtLevel", "=", "1"], compilers
    spark, iceberg = _sources(log, "org.apache.spark."), _sources(log, "org.apache.iceberg.")
    # Measured: 98% of the Spark classes and 66% of the Iceberg classes read from a class file
    # came from the archive (the others were first used by steps the install's run did not take).
    assert spark["archive"] > 0.9 * (spark["archive"] + spark["jar"]), spark
    assert iceberg["archive"] > 0.5 * (iceberg["archive"] + iceberg["jar"]), iceberg


def test_only_a_small_planned_batch_gets_the_quick_compiler_alone() -> None:
    from cdc_ingest.spark_session import SMALL_BATCH_BYTES, small_batch

    assert small_batch(1) and small_batch(SMALL_BATCH_BYTES)
    assert not small_batch(SMALL_BATCH_BYTES + 1)
    # A run that cannot tell its size (a replay, a batch to resume) keeps both compilers.
    assert not small_batch(None)
