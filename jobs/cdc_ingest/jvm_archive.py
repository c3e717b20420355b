"""A class-data-sharing archive of the driver JVM's classes, built at install.

A cold run's JVM loads and verifies about 19,000 classes (Spark, Iceberg, Parquet, the JDBC
drivers) before it reads a line. HotSpot can map them from an archive a previous JVM wrote at
exit instead (dynamic AppCDS, ``-XX:ArchiveClassesAtExit``), which roughly halves what a cold
session spends before its first batch.

``make install`` runs ``python -m cdc_ingest.jvm_archive``: a small pipeline (created table,
update, delete, DDL) runs once in a JVM that writes the archive at exit, so that the classes a
batch uses are in it (linked first: an archive holds only linked classes). Every driver the job
starts (the CLI, spark-submit from Airflow, the tests' sessions) then maps it
(``driver_options``) where the file exists. An archive written by
another Java, or for other jars, is refused by the JVM without a word (its CDS logging is off)
and the run loads its classes as before; ``make install`` writes a new one when the jars change.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ARCHIVE_VARIABLE = "CDC_INGEST_JVM_ARCHIVE"
# The JVM's own messages about an archive it cannot use (another Java, other jars) stay quiet.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# The workload JVM's log of the classes it loaded, in its directory.
CLASS_LOG = "classes.log"
# HotSpot 17 dies with SIGSEGV (in KlassFactory::check_shared_class_file_load_hook) within a
# second of starting a JVM that maps a dynamic archive and hooks class loading: a Java agent that
# transforms classes (an APM agent, OpenTelemetry's) or a flight recording. Such a driver loads
# its classes from the jars instead (tests/test_jvm_archive.py starts one).
CLASS_LOAD_HOOKS = (
    "-javaagent",
    "-agentlib",
    "-agentpath",
    "StartFlightRecording",
    "FlightRecorder",
)
# Where a driver's JVM takes options from besides its own (spark-submit reads SPARK_SUBMIT_OPTS).
JVM_OPTION_VARIABLES = (
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "SPARK_SUBMIT_OPTS",
)


def archive_path() -> Path:
    """Where the archive lives: ``$CDC_INGEST_JVM_ARCHIVE``, else beside the job's jars."""
    override = os.environ.get(ARCHIVE_VARIABLE)
    if override:
        return Path(override)
    return Path(sys.prefix) / "share" / "cdc-ingest" / "jvm" / "driver.jsa"


def driver_options(options: str = "") -> str:
    """JVM options that map the archive into a driver, or nothing where there is none or where
    the driver's other ``options`` or its environment hook class loading."""
    path = archive_path()
    if not path.is_file() or hooks_class_loading(options):
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def hooks_class_loading(options: str = "", environ: Mapping[str, str] | None = None) -> bool:
    """Whether a driver started with ``options`` (and ``environ``, by default this process's
    environment) hooks class loading."""
    environ = os.environ if environ is None else environ
    given = " ".join([options, *(environ.get(name, "") for name in JVM_OPTION_VARIABLES)])
    return any(hook in given for hook in CLASS_LOAD_HOOKS)


def _workload(root: Path) -> None:
    """A small pipeline's two batches on a session of the job's own settings."""
    import yaml

    from cdc_ingest.config import load_config
    from cdc_ingest.run.batch import run_pipeline
    from cdc_ingest.spark_session import build_session

    landing = root / "landing"
    landing.mkdir()
    config = root / "pipelines.yaml"
    catalog = {"name": "archive", "uri": f"sqlite:///{root / 'catalog.db'}"}
    catalog["warehouse"] = (root / "warehouse").as_uri()
    pipeline = {"name": "shop", "format": "canal-json", "landing": landing.as_uri()}
    doc = {"catalog": catalog, "pipelines": [{**pipeline, "namespace": "ods"}]}
    config.write_text(yaml.safe_dump(doc))
    loaded = load_config(config)
    spark = build_session(loaded.catalog, app_name="cdc-ingest-jvm-archive")
    for number, lines in enumerate(_batches(), start=1):
        (landing / f"{number:03d}.json").write_text("".join(line + "\n" for line in lines))
        run_pipeline(spark, loaded, "shop")
    _link_loaded(spark, root / CLASS_LOG)
    spark.stop()


def _link_loaded(spark: Any, log: Path) -> None:
    """Link each class the workload's JVM loaded from a jar (``log``: its class loading).

    A dynamic archive takes only linked classes. About 1,100 of the Iceberg runtime's were loaded
    but never linked (the verifier loads the classes a method names to check it), so a cold run
    read them from the jar again; linked here, nearly all of them come from the archive.
    Reflecting on a class's methods links it without running
    its static initializer."""
    from cdc_ingest import spark_jvm

    loaded = (line.split("] ", 1)[-1].split(" source: ") for line in log.read_text().splitlines())
    spark_jvm.link_classes(
        spark,
        (f[0] for f in loaded if len(f) == 2 and f[1].startswith(("file:", "jar:"))),
    )


def _batches() -> list[list[str]]:
    """Canal lines of two batches: a created table; an update, a delete, an ALTER, a bad line."""

    def message(kind: str, es: int, key: int = 0, value: str = "", sql: str = "") -> str:
        row = {"id": str(key), "v": value}
        return json.dumps(
            {
                "data": None if sql else [row],
                "database": "shop",
                "table": "items",
                "pkNames": None if sql else ["id"],
                "isDdl": bool(sql),
                "type": kind,
                "es": es,
                "ts": es,
                "sql": sql,
                "mysqlType": None if sql else {"id": "int", "v": "varchar(20)"},
                "old": None,
            }
        )

    first = [message("INSERT", 1, 1, "a"), message("INSERT", 2, 2, "b")]
    alter = message("ALTER", 5, sql="ALTER TABLE items ADD COLUMN n INT")
    second = [message("UPDATE", 3, 1, "a2"), message("DELETE", 4, 2, "b"), alter, "not json"]
    return [first, second]


def build_archive(path: Path | None = None) -> Path:
    """Write the archive: the workload runs in a child process whose JVM dumps its classes at
    exit; this process reaps every descendant (a child subreaper), so the file is complete when
    it is moved into place."""
    path = path or archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    # Linux: orphans of the workload (its JVM outlives the Python that started it) come here.
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    with tempfile.TemporaryDirectory(prefix="cdc-ingest-jvm-archive-") as root:
        dump = f"-XX:ArchiveClassesAtExit={partial}"
        logged = f"-Xlog:class+load=info:file={Path(root) / CLASS_LOG}"
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{options} {dump} {logged}"}
        env.pop(ARCHIVE_VARIABLE, None)
        command = [sys.executable, "-m", "cdc_ingest.jvm_archive", "--workload", root]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM archive was not written:\n{done.stderr[-3000:]}")
    partial.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--workload"]:
        _workload(Path(args[1]))
        return 0
    path = archive_path()
    path.unlink(missing_ok=True)  # the workload's JVM must not map an archive it replaces
    print(f"JVM class archive: {build_archive(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
