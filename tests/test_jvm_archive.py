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


def _land_one_line(lake: Any) -> None:
    lake.add_pipeline("shop", "canal-json")
    row = {"id": "1", "v": "a"}
    message = {
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
    lake.land("shop", "001.json", [message])


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
def test_a_tiny_cold_run_maps_archived_classes_compiles_with_c1_and_interprets_expressions(
    lake: Any, tmp_path: Path
) -> None:
    from cdc_ingest.jvm_archive import archive_path

    assert archive_path().is_file(), "make install builds the archive"
    _land_one_line(lake)
    log = tmp_path / "classes.log"
    # Not the suite's C1-only option (conftest): a batch this small gets it from the CLI itself,
    # which the flags the driver prints show.
    options = f"-Xlog:class+load=info:file={log} -XX:+PrintFlagsFinal"
    done = subprocess.run(
        [CLI, "run", "--config", str(lake.config_path), "--pipeline", "shop"],
        capture_output=True,
        text=True,
        env={**os.environ, "SPARK_SUBMIT_OPTS": options, "PYTHONPROFILEIMPORTTIME": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert lake.rows("items") == [{"id": 1, "v": "a"}]
    [compilers] = [
        line.split() for line in done.stdout.splitlines() if " TieredStopAtLevel " in line
    ]
    assert compilers[:4] == ["intx", "TieredStopAtLevel", "=", "1"], compilers
    spark, iceberg = _sources(log, "org.apache.spark."), _sources(log, "org.apache.iceberg.")
    # Measured: 99% of the Spark classes and 99% of the Iceberg classes read from a class file
    # came from the archive (72% of Iceberg's before the install's run linked what it loaded:
    # an archive holds only linked classes).
    assert spark["archive"] > 0.9 * (spark["archive"] + spark["jar"]), spark
    assert iceberg["archive"] > 0.95 * (iceberg["archive"] + iceberg["jar"]), iceberg
    # Its expressions were interpreted: of the classes Spark generates for a plan, only the
    # partial aggregation's row joiner, which has no interpreted form, was compiled.
    loaded = [line.split("] ", 1)[-1].split(" source: ")[0] for line in log.read_text().split("\n")]
    assert "org.apache.spark.sql.catalyst.expressions.InterpretedUnsafeProjection" in loaded
    generated = {name for name in loaded if ".GeneratedClass$" in name}
    assert generated == {
        "org.apache.spark.sql.catalyst.expressions.GeneratedClass$SpecificUnsafeRowJoiner"
    }
    # Reading its lines in the driver did not import setuptools' distutils (arrow_frames).
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "pyarrow" in imported and "distutils" not in imported


def test_only_a_small_planned_batch_gets_the_quick_compiler_alone() -> None:
    from cdc_ingest.spark_session import SMALL_BATCH_BYTES, small_batch

    assert small_batch(1) and small_batch(SMALL_BATCH_BYTES)
    assert not small_batch(SMALL_BATCH_BYTES + 1)
    # A run that cannot tell its size (a replay, a batch to resume) keeps both compilers.
    assert not small_batch(None)


def test_only_a_tiny_planned_batch_interprets_its_expressions() -> None:
    from cdc_ingest.spark_session import (
        DRIVER_OPTIONS,
        INTERPRETED_EXPRESSIONS,
        QUICK_COMPILER_ONLY,
        SMALL_BATCH_BYTES,
        TINY_BATCH_BYTES,
        session_conf,
        sized_for_batch,
    )

    conf = session_conf()
    tiny = sized_for_batch(conf, TINY_BATCH_BYTES)
    assert tiny[DRIVER_OPTIONS].endswith(QUICK_COMPILER_ONLY)
    assert tiny["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
    assert tiny["spark.sql.codegen.wholeStage"] == "false"
    small = sized_for_batch(conf, SMALL_BATCH_BYTES)
    assert small[DRIVER_OPTIONS].endswith(QUICK_COMPILER_ONLY)
    assert not set(INTERPRETED_EXPRESSIONS) & set(small)
    assert sized_for_batch(conf, SMALL_BATCH_BYTES + 1) == conf
    assert sized_for_batch(conf, None) == conf
    # A pipelines file that chooses code generation keeps it.
    chosen = {**conf, "spark.sql.codegen.wholeStage": "true"}
    assert sized_for_batch(chosen, 1)["spark.sql.codegen.wholeStage"] == "true"


AGENT = """
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.ProtectionDomain;

public class Agent {
    public static void premain(String marker, Instrumentation instrumentation) throws Exception {
        instrumentation.addTransformer(new ClassFileTransformer() {
            public byte[] transform(ClassLoader loader, String name, Class<?> redefined,
                    ProtectionDomain domain, byte[] bytes) {
                return null;
            }
        }, true);
        Files.writeString(Path.of(marker), "started");
    }
}
"""


@pytest.mark.slow
def test_a_cold_run_with_a_java_agent_loads_its_classes_from_the_jars(
    lake: Any, tmp_path: Path
) -> None:
    """A driver that maps the archive and runs a class-transforming agent (as APM agents are)
    dies with SIGSEGV in HotSpot 17 before it answers; such a driver goes without the archive."""
    source = tmp_path / "Agent.java"
    source.write_text(AGENT)
    (tmp_path / "manifest.txt").write_text("Premain-Class: Agent\nCan-Retransform-Classes: true\n")
    subprocess.run(["javac", "-d", str(tmp_path), str(source)], check=True)
    agent = tmp_path / "agent.jar"
    classes = [p.name for p in tmp_path.glob("Agent*.class")]
    subprocess.run(["jar", "cfm", str(agent), "manifest.txt", *classes], cwd=tmp_path, check=True)
    _land_one_line(lake)
    marker = tmp_path / "agent-started"
    done = subprocess.run(
        [CLI, "run", "--config", str(lake.config_path), "--pipeline", "shop"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "JAVA_TOOL_OPTIONS": f"-javaagent:{agent}={marker}"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert marker.read_text() == "started"
    assert lake.rows("items") == [{"id": 1, "v": "a"}]
    assert not list(tmp_path.glob("hs_err_pid*.log"))


def test_the_archive_is_left_out_where_a_driver_hooks_class_loading(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cdc_ingest import jvm_archive
    from cdc_ingest.spark_session import DRIVER_OPTIONS, submit_conf

    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setenv(jvm_archive.ARCHIVE_VARIABLE, str(archive))
    for name in jvm_archive.JVM_OPTION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert str(archive) in jvm_archive.driver_options()
    assert jvm_archive.driver_options("-javaagent:/opt/otel/agent.jar") == ""
    assert jvm_archive.driver_options("-XX:StartFlightRecording=duration=60s") == ""
    assert str(archive) in submit_conf({DRIVER_OPTIONS: "-Dx=1"})[DRIVER_OPTIONS]
    assert str(archive) not in submit_conf({DRIVER_OPTIONS: "-agentpath:/a.so"})[DRIVER_OPTIONS]
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-javaagent:/opt/dd/dd-java-agent.jar")
    assert jvm_archive.driver_options() == ""


@pytest.mark.usefixtures("clean_env")
def test_the_driver_class_archive_is_chosen_where_the_task_runs(
    config_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DAG processor's environment is not the worker's: a worker that adds a Java agent
    (JAVA_TOOL_OPTIONS) must not map the archive, or its driver dies as it starts."""
    from cdc_ingest.jvm_archive import ARCHIVE_VARIABLE

    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setenv("CDC_INGEST_CONFIG", str(config_file))
    from dag_fixtures import dagbag

    bag = dagbag()
    for dag_id in ("ingest_orders_ld", "maintain_orders_ld"):
        dag = bag.dags[dag_id]
        [task] = [t for t in dag.tasks if getattr(t, "conf", None)]
        options = dag.get_template_env().from_string(task.conf["spark.driver.extraJavaOptions"])
        monkeypatch.setenv(ARCHIVE_VARIABLE, str(archive))
        assert f"-XX:SharedArchiveFile={archive}" in options.render().split()
        monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-javaagent:/opt/agent/agent.jar")
        assert "SharedArchiveFile" not in options.render()
        monkeypatch.delenv("JAVA_TOOL_OPTIONS")
