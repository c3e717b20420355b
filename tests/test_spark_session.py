"""The job's Spark session as built by ``build_session`` (the tests' shared session is one)."""

from __future__ import annotations

import time
from typing import Any


def test_generated_code_over_hotspot_method_limit_is_jit_compiled(spark: Any) -> None:
    # The typing stage of a five-column table already generates a processNext over 8000 bytes of
    # bytecode, which HotSpot would otherwise only ever interpret.
    jvm = spark.sparkContext._jvm
    arguments = list(
        jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert "-XX:-DontCompileHugeMethods" in arguments


def test_g1_starts_marking_only_at_a_fixed_occupancy(spark: Any) -> None:
    # Adaptive, G1 lowered its threshold to what the batch's checkpoints keep live and marked the
    # old generation every second and a half of a large batch.
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    assert bean.getVMOption("G1UseAdaptiveIHOP").getValue() == "false"
    assert bean.getVMOption("InitiatingHeapOccupancyPercent").getValue() == "80"


def test_a_long_lived_driver_fixes_its_heap_unless_its_options_size_it() -> None:
    from cdc_ingest.spark_session import fixed_heap

    conf = {"spark.driver.memory": "6g", "spark.driver.extraJavaOptions": "-Dx=1"}
    assert fixed_heap(conf)["spark.driver.extraJavaOptions"] == ("-Dx=1 -Xms6g -XX:+AlwaysPreTouch")
    # A pipelines file that sizes the heap or turns pre-touching off has the last word.
    own = {"spark.driver.memory": "6g", "spark.driver.extraJavaOptions": "-Xms1g"}
    assert fixed_heap(own)["spark.driver.extraJavaOptions"] == "-Xms1g -XX:+AlwaysPreTouch"
    off = {"spark.driver.memory": "6g", "spark.driver.extraJavaOptions": "-XX:-AlwaysPreTouch"}
    assert fixed_heap(off)["spark.driver.extraJavaOptions"] == "-XX:-AlwaysPreTouch -Xms6g"


def test_pipelines_file_jvm_options_keep_the_job_flags_they_do_not_name(
    tmp_path: Any, monkeypatch: Any
) -> None:
    from cdc_ingest.spark_session import submit_conf

    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"")
    monkeypatch.setenv("CDC_INGEST_JVM_ARCHIVE", str(archive))
    mapped = f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    g1 = "-XX:-G1UseAdaptiveIHOP -XX:InitiatingHeapOccupancyPercent=80"
    conf = submit_conf(
        {
            "spark.driver.extraJavaOptions": "-Xss4m -Dx=1",
            "spark.executor.extraJavaOptions": "-XX:+DontCompileHugeMethods "
            "-XX:InitiatingHeapOccupancyPercent=60",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    # The driver keeps mapping the install's class archive too (not the executors: another class
    # path).
    assert conf["spark.driver.extraJavaOptions"] == (
        f"-XX:-DontCompileHugeMethods {g1} {mapped} -Xss4m -Dx=1"
    )
    # Naming a flag, either way, is the pipelines file's call; the flags it does not name stay.
    assert conf["spark.executor.extraJavaOptions"] == (
        "-XX:-G1UseAdaptiveIHOP -XX:+DontCompileHugeMethods -XX:InitiatingHeapOccupancyPercent=60"
    )
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert submit_conf({})["spark.executor.extraJavaOptions"] == f"-XX:-DontCompileHugeMethods {g1}"
    # The catalog's settings (and secrets) are set by the job's driver, never on the command line.
    assert not any(key.startswith("spark.sql.catalog.") for key in conf)


def test_a_batch_shaped_like_the_last_one_compiles_no_new_code(lake: Any) -> None:
    # Generated classes are cached by their code: a batch id written into the code, or a cache
    # too small for one batch's classes, makes every batch compile them again (and the JIT
    # compile those again), about 70 classes a batch.
    lake.add_pipeline("shop", "debezium-json", keys={"orders": ["id"]})
    source = {"db": "shop", "table": "orders", "ts_ms": 1}

    def change(op: str, key: int, value: int) -> dict[str, Any]:
        before = None if op == "c" else {"id": key, "n": value - 1}
        return {"op": op, "before": before, "after": {"id": key, "n": value}, "source": source}

    # Rows enough that every batch's two changes take the same plan (a bloom filter of their
    # keys, a semi-join: both chosen by the table's size against the changes').
    lake.land("shop", "001.json", [change("c", k, 0) for k in range(20)])
    lake.run("shop")
    metrics = lake.spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    compiled = []
    for batch in range(3):
        before = metrics.METRIC_COMPILATION_TIME().getCount()
        updates = [change("u", 2 * batch, 1), change("u", 2 * batch + 1, 1)]
        lake.land("shop", f"update-{batch}.json", updates)
        summary = lake.run("shop")
        assert summary.tables["orders"].updated == 2
        compiled.append(metrics.METRIC_COMPILATION_TIME().getCount() - before)
    # Earlier tests of the session may have compiled these classes already; that the counter
    # counts is shown by code that is new for sure (a number no other query writes in).
    before = metrics.METRIC_COMPILATION_TIME().getCount()
    lake.spark.range(1).selectExpr(f"id + {time.time_ns()} AS n").collect()
    assert metrics.METRIC_COMPILATION_TIME().getCount() > before
    assert compiled[1:] == [0, 0], compiled


def test_a_cluster_default_of_ansi_mode_is_turned_off_for_the_stored_order(lake: Any) -> None:
    # Casting a bigint to binary (how the ordering value is stored) is refused in ANSI mode.
    from cdc_ingest import ordering
    from cdc_ingest.config import load_config
    from cdc_ingest.spark_session import build_session

    lake.add_pipeline("shop", "canal-json")
    lake.spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        spark = build_session(load_config(lake.config_path).catalog)
        order = ordering.encoded_sql("array(CAST(1 AS BIGINT))", "2")
        row = spark.sql(f"SELECT {order} AS o").collect()[0]
    finally:
        lake.spark.conf.set("spark.sql.ansi.enabled", "false")
    assert bytes(row["o"]).hex() == "80000000000000018000000000000002"
