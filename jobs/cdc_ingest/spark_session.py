"""Spark sessions wired to the Iceberg runtime and the pipelines file's catalog.

The jars come from the Maven cache that ``make install`` fills (:mod:`cdc_ingest.jars`); the
catalog's settings from :mod:`cdc_ingest.catalog.properties`, which Spark and pyiceberg share.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from cdc_ingest.catalog.properties import spark_catalog_conf
from cdc_ingest.config import JOB_SPARK_SETTINGS, CatalogConfig
from cdc_ingest.jars import EnvironmentProblem, job_jars
from cdc_ingest.jvm_archive import driver_options
from cdc_ingest.lineage import LineageConfig, lineage_conf, lineage_jars
from cdc_ingest.shipping import ship_package

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["EnvironmentProblem", "build_session", "job_jars", "submit_conf"]
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
# Spark's default plus the catalog secrets its pattern misses (``credential``, S3 keys).
REDACTION_REGEX = r"(?i)secret|password|token|access[.]key|credential|access-key"


def catalog_conf(catalog: CatalogConfig) -> dict[str, str]:
    """Spark settings that register ``catalog`` (see :mod:`cdc_ingest.catalog.properties`)."""
    return spark_catalog_conf(catalog)


# HotSpot never JIT-compiles a method over 8000 bytes of bytecode unless this flag is off.
HUGE_METHODS_FLAG = "DontCompileHugeMethods"
# G1 starts a concurrent marking of the old generation whenever a humongous object (a Tungsten
# page, a sort's pointer array) is allocated above its initiating occupancy, which it adapts
# down to about what the batch's local checkpoints keep live: in a large batch, markings one
# after another, and the write barriers' cost in the tasks. A fixed 80% starts
# one only when the old generation is mostly garbage (docs/performance.md).
JVM_FLAGS = {
    HUGE_METHODS_FLAG: f"-XX:-{HUGE_METHODS_FLAG}",
    "G1UseAdaptiveIHOP": "-XX:-G1UseAdaptiveIHOP",
    "InitiatingHeapOccupancyPercent": "-XX:InitiatingHeapOccupancyPercent=80",
}
JVM_OPTIONS = " ".join(JVM_FLAGS.values())
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
JVM_OPTION_KEYS = (DRIVER_OPTIONS, "spark.executor.extraJavaOptions")


def submit_conf(
    overrides: dict[str, str], class_archive: Callable[[str], str] = driver_options
) -> dict[str, str]:
    """spark-submit's conf: session settings, then a pipelines file's own.

    The catalog's settings are not among them: the job's driver sets them when it builds its
    session, so that secrets resolved into its environment never reach a command line.

    Later entries win, except that JVM options set there keep each of the job's HotSpot flags
    (``JVM_FLAGS``) they do not name: replacing them would silently slow every stage that
    generates a huge method, or every batch that keeps rows live; nor the driver's class archive
    (``jvm_archive``), unless they name one or load an agent. ``class_archive``: the archive's
    options for a driver of the given other options (a DAG's renders them on its worker).
    """
    conf = {**session_conf(class_archive), **overrides}
    for key in JVM_OPTION_KEYS:
        if key in overrides:
            kept = [option for flag, option in JVM_FLAGS.items() if flag not in overrides[key]]
            if key == DRIVER_OPTIONS and "SharedArchiveFile" not in overrides[key]:
                kept.append(class_archive(overrides[key]))
            conf[key] = " ".join([*kept, overrides[key]]).strip()
    return conf


# The Python of the executors' workers, as Spark names it (a pipelines file's spark.conf may).
WORKER_PYTHON = "spark.pyspark.python"


def session_conf(class_archive: Callable[[str], str] = driver_options) -> dict[str, str]:
    """Settings the job relies on regardless of catalog (``class_archive``: as ``submit_conf``)."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        # Read by spark-submit (Airflow); a bare interpreter sets it on the builder instead.
        "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "4g"),
        # The settings the job's semantics depend on (config.JOB_SPARK_SETTINGS); a cluster's
        # defaults (Spark 4 runs ANSI mode) do not apply.
        **JOB_SPARK_SETTINGS,
        "spark.sql.shuffle.partitions": os.environ.get("CDC_INGEST_SHUFFLE_PARTITIONS", "8"),
        "spark.sql.adaptive.enabled": "true",
        # Decoders project dozens of aliased expressions; inferring constraints over them grows
        # combinatorially and can keep the optimizer busy for minutes on one query. The job
        # filters nothing that constraint propagation would prune.
        "spark.sql.constraintPropagation.enabled": "false",
        # The batch is cached once and read a few times: compressing its columns costs more CPU
        # than the decode it saves.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # A batch compiles about 70 generated classes; with Spark's default of 100 cached, the
        # next batch of the same shape compiles them all again, and the JIT compiles those anew.
        "spark.sql.codegen.cache.maxEntries": "2000",
        # Whole-stage code generation fuses a stage into one method; typing more than about 40
        # integer columns (a wide table, a group of tables) grows it past the JVM's 64 KB
        # limit, which Spark's default of 100 fields lets it try: an ERROR with the generated
        # source, the failed compile's CPU, then the stage unfused anyway; narrow tables do not
        # reach it.
        "spark.sql.codegen.maxFields": "40",
        # A stage that decodes or types many columns generates methods over HotSpot's limit.
        **{key: JVM_OPTIONS for key in JVM_OPTION_KEYS},
        # The driver maps the classes an install archived (the executors of a cluster do not:
        # their class path is another).
        DRIVER_OPTIONS: f"{JVM_OPTIONS} {class_archive(JVM_OPTIONS)}".strip(),
        WORKER_PYTHON: python,
        # The driver runs this interpreter, which has the package, whatever Python the
        # pipelines file gives the workers (spark.pyspark.python would be the driver's too).
        "spark.pyspark.driver.python": sys.executable,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.redaction.regex": REDACTION_REGEX,
    }


def configure_catalog(spark: SparkSession, catalog: CatalogConfig) -> None:
    """Register (or re-point) a catalog on a running session; catalogs load lazily by name."""
    for key, value in catalog_conf(catalog).items():
        spark.conf.set(key, value)


# A cold run of a batch this small (the planned files' bytes) runs its driver with HotSpot's
# quick compiler only: its optimizing compiler (C2) costs such a run more than it saves; a warm
# engine, whose
# compiled code serves every later batch, keeps both.
SMALL_BATCH_BYTES = int(os.environ.get("CDC_INGEST_SMALL_BATCH_BYTES", str(8 * 2**20)))
QUICK_COMPILER_ONLY = "-XX:TieredStopAtLevel=1"
# A batch smaller still has Spark interpret its expressions instead of generating and compiling
# code for them: a cold JVM compiles each generated class with Janino, itself not compiled yet,
# for a plan that then runs over a few rows (a warm engine: ``warm_sized_for_batch``). Past
# this size the rows pay more for interpretation than compiling saves.
TINY_BATCH_BYTES = int(os.environ.get("CDC_INGEST_TINY_BATCH_BYTES", str(2**20)))
INTERPRETED_EXPRESSIONS = {
    "spark.sql.codegen.wholeStage": "false",
    # Spark's own switch between generated and interpreted projections, predicates and
    # orderings (an internal setting its tests run both ways).
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def small_batch(planned_bytes: int | None) -> bool:
    """Whether a cold run of ``planned_bytes`` (None: not known) is small enough for C1 only."""
    return planned_bytes is not None and planned_bytes <= SMALL_BATCH_BYTES


def tiny_batch(planned_bytes: int | None) -> bool:
    """Whether a batch of ``planned_bytes`` (None: not known) is tiny enough to interpret its
    expressions (``INTERPRETED_EXPRESSIONS``)."""
    return planned_bytes is not None and planned_bytes <= TINY_BATCH_BYTES


def warm_sized_for_batch(
    base: SparkSession, conf: dict[str, str], planned_bytes: int | None
) -> dict[str, str]:
    """A warm engine's session settings ``conf`` for one batch of ``planned_bytes``: with
    interpreted expressions for a tiny one, unless the engine's own settings choose. Its
    compiled classes are cached, but each task still generates a projection's code, which for a
    wide table costs more than interpreting its few rows; a narrow one's loses nothing."""
    if not tiny_batch(planned_bytes):
        return conf
    chosen = base.sparkContext.getConf()
    interpreted = {k: v for k, v in INTERPRETED_EXPRESSIONS.items() if not chosen.contains(k)}
    return {**conf, **interpreted}


def sized_for_batch(conf: dict[str, str], planned_bytes: int | None) -> dict[str, str]:
    """``conf`` for a driver started cold for one batch of ``planned_bytes`` (None: not known):
    C1 only for a small batch, interpreted expressions for a tiny one, unless ``conf`` (the
    pipelines file's ``spark.conf``) chooses either itself."""
    if not small_batch(planned_bytes):
        return conf
    sized = dict(conf)
    if "TieredStopAtLevel" not in sized[DRIVER_OPTIONS]:
        sized[DRIVER_OPTIONS] = f"{sized[DRIVER_OPTIONS]} {QUICK_COMPILER_ONLY}"
    if tiny_batch(planned_bytes):
        for key, value in INTERPRETED_EXPRESSIONS.items():
            sized.setdefault(key, value)
    return sized


# A warm engine's heap is fixed at its size and touched at start, as long-lived JVM services run
# theirs (Elasticsearch's defaults do the same). Left to grow, G1 commits more heap while
# collections are frequent and returns it only after a cycle that a busy engine with little live
# data rarely needs, so its resident size drifts with where a sample falls in that cycle. Fixed,
# the engine's size is known when it starts (a machine that cannot hold it refuses it then, not
# hundreds of batches later) and stays there (docs/engine.md).
PRE_TOUCH = "-XX:+AlwaysPreTouch"


def fixed_heap(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the driver's heap fixed at ``spark.driver.memory`` and touched at start,
    unless its JVM options size the heap or set pre-touching themselves."""
    options = conf.get(DRIVER_OPTIONS, "")
    added = [] if "-Xms" in options else [f"-Xms{conf['spark.driver.memory']}"]
    added += [] if "AlwaysPreTouch" in options else [PRE_TOUCH]
    return {**conf, DRIVER_OPTIONS: " ".join([options, *added]).strip()}


def build_session(
    catalog: CatalogConfig | None,
    app_name: str = "cdc-ingest",
    lineage: LineageConfig | None = None,
    extra_conf: dict[str, str] | None = None,
    planned_bytes: int | None = None,
    long_lived: bool = False,
) -> SparkSession:
    """The job's Spark session: local[*] unless spark-submit or SPARK_MASTER says otherwise;
    with ``lineage``, reporting to OpenLineage (under spark-submit its conf says so already);
    ``planned_bytes``: the bytes of the one batch a driver started here runs (a cold run), which
    its compiler settings follow (``sized_for_batch``); ``long_lived`` (a warm engine), its heap
    fixed (``fixed_heap``).

    A warm engine builds it with no catalog (each batch's session registers its own) and with
    the pipelines file's ``spark.conf`` as ``extra_conf``, as spark-submit would pass them."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the master and jars are already set; on a bare interpreter start local.
    if "SPARK_ENV_LOADED" not in os.environ and "spark.master" not in _submitted_conf():
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
        builder = builder.config("spark.jars", ",".join(job_jars() + lineage_jars(lineage)))
        for key, value in lineage_conf(lineage).items():
            builder = builder.config(key, value)
    conf = submit_conf(extra_conf) if extra_conf else session_conf()
    # PySpark starts the workers of a session it launches with PYSPARK_PYTHON, not the conf: a
    # pipelines file's worker Python (spark.pyspark.python) reaches them that way.
    os.environ["PYSPARK_PYTHON"] = (extra_conf or {}).get(
        WORKER_PYTHON, os.environ.get("PYSPARK_PYTHON", sys.executable)
    )
    conf = sized_for_batch(conf, planned_bytes)
    if long_lived:
        conf = fixed_heap(conf)
    for key, value in {**conf, **(catalog_conf(catalog) if catalog else {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CDC_INGEST_SPARK_LOG_LEVEL", "WARN"))
    ship_package(spark)
    return spark


def _submitted_conf() -> dict[str, str]:
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return {"spark.master": "set"} if "--master" in args else {}


def release(frame: DataFrame) -> None:
    """Free the blocks of a local checkpoint now instead of when the JVM collects its RDD.

    A process that runs several batches (the tests, a long-lived driver) would otherwise hold
    every batch's rows until a garbage collection notices them.
    """
    from cdc_ingest import spark_jvm

    spark_jvm.release_checkpoint(frame)


# Spark's exit status for a JVM that an OutOfMemoryError ended (SparkExitCode.OOM): in local mode
# an executor's task that runs out of heap ends the driver's JVM with it.
OOM_EXIT_STATUS = 52


def driver_ran_out_of_memory(spark: SparkSession) -> bool:
    """Whether the session's driver JVM, started by this process, ended out of memory."""
    import subprocess

    from cdc_ingest import spark_jvm

    process = spark_jvm.driver_process(spark)
    if process is None:
        return False  # the JVM started this Python (spark-submit): its own status says it
    try:
        return bool(process.wait(timeout=10) == OOM_EXIT_STATUS)
    except subprocess.TimeoutExpired:
        return False
