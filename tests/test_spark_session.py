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
