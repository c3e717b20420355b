"""A class-data-sharing archive of the driver JVM's classes, built at install.

A cold run's JVM loads and verifies about 19,000 classes (Spark, Iceberg, Parquet, the JDBC
drivers) before it reads a line. HotSpot can map them from an archive a previous JVM wrote at
exit instead (dynamic AppCDS, ``-XX:ArchiveClassesAtExit``), which roughly halves what a cold
session spends before its first batch.

``cdc-ingest setup`` builds it (``cdc_ingest.archive_workload``): a small pipeline
(created table, update, delete, DDL) runs once in a JVM that writes the archive at exit, so that
the classes a batch uses are in it (linked first: an archive holds only linked classes). This
module is what every driver needs of it: every driver the job
starts (the CLI, spark-submit from Airflow, the tests' sessions) then maps it
(``driver_options``) where the file exists. An archive written by
another Java, or for other jars, is refused by the JVM without a word (its CDS logging is off)
and the run loads its classes as before; ``make install`` writes a new one when the jars change.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

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
