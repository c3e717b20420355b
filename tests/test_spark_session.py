"""The job's Spark session as built by ``build_session`` (the tests' shared session is one)."""

from __future__ import annotations

from typing import Any


def test_generated_code_over_hotspot_method_limit_is_jit_compiled(spark: Any) -> None:
    # The typing stage of a five-column table already generates a processNext over 8000 bytes of
    # bytecode, which HotSpot would otherwise only ever interpret.
    jvm = spark.sparkContext._jvm
    arguments = list(
        jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert "-XX:-DontCompileHugeMethods" in arguments


def test_pipelines_file_jvm_options_keep_the_jit_flag_unless_they_set_it() -> None:
    from cdc_ingest.spark_session import submit_conf

    conf = submit_conf(
        {
            "spark.driver.extraJavaOptions": "-Xss4m -Dx=1",
            "spark.executor.extraJavaOptions": "-XX:+DontCompileHugeMethods",
            "spark.sql.shuffle.partitions": "2",
        },
    )
    assert conf["spark.driver.extraJavaOptions"] == "-XX:-DontCompileHugeMethods -Xss4m -Dx=1"
    # Naming the flag either way is the pipelines file's call.
    assert conf["spark.executor.extraJavaOptions"] == "-XX:+DontCompileHugeMethods"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert submit_conf({})["spark.executor.extraJavaOptions"] == "-XX:-DontCompileHugeMethods"
    # The catalog's settings (and secrets) are set by the job's driver, never on the command line.
    assert not any(key.startswith("spark.sql.catalog.") for key in conf)
