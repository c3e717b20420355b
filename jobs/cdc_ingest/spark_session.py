"""Spark sessions wired to the Iceberg runtime and a JDBC catalog.

The Iceberg runtime jar comes from the pinned ``snowpark-connect-deps-iceberg`` wheel and the JDBC
drivers from Debian's packages (or CDC_INGEST_JDBC_JARS); both are located at run time so nothing
depends on a hard-coded site-packages path.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_ingest.config import CatalogConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ICEBERG_JAR_NAME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
ICEBERG_PACKAGE = "snowpark_connect_deps_iceberg"
# The catalog database's JDBC driver, by URI scheme: the jar and the Debian package that ships it.
JDBC_DRIVERS = {
    "sqlite": ("/usr/share/java/sqlite-jdbc.jar", "libxerial-sqlite-jdbc-java"),
    "postgresql": ("/usr/share/java/postgresql.jar", "libpostgresql-jdbc-java"),
}
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


class EnvironmentProblem(RuntimeError):
    """Something the job needs on this machine (a jar, Java) is missing."""


def iceberg_runtime_jar() -> str:
    """Path of the Iceberg Spark runtime jar shipped by the pinned wheel."""
    override = os.environ.get("CDC_INGEST_ICEBERG_JAR")
    if override:
        return override
    spec = importlib.util.find_spec(ICEBERG_PACKAGE)
    roots = []
    if spec and spec.submodule_search_locations:
        roots = [Path(p) for p in spec.submodule_search_locations]
    elif spec and spec.origin:
        roots = [Path(spec.origin).parent]
    for root in roots:
        for candidate in (root / "jars" / ICEBERG_JAR_NAME, *root.rglob(ICEBERG_JAR_NAME)):
            if candidate.is_file():
                return str(candidate)
    raise EnvironmentProblem(
        f"{ICEBERG_JAR_NAME} not found: install snowpark-connect-deps-iceberg==1.0.2 "
        "(or set CDC_INGEST_ICEBERG_JAR)"
    )


def jdbc_jars(catalog: CatalogConfig | None = None) -> list[str]:
    """JDBC driver jars for the Iceberg catalog database.

    Args:
        catalog: the catalog the job uses; its database's driver must be installed. Without it,
            any installed driver will do.

    Returns:
        The catalog's driver first, then every other installed driver, so that one session can
        be re-pointed at a catalog of the other kind (the tests do).

    Raises:
        EnvironmentProblem: the catalog's driver (or, without a catalog, every driver) is missing;
            the message names the Debian package to install.
    """
    override = os.environ.get("CDC_INGEST_JDBC_JARS")
    if override:
        return [j for j in override.split(",") if j]
    installed = [jar for jar, _ in JDBC_DRIVERS.values() if Path(jar).is_file()]
    if catalog is not None:
        jar, package = JDBC_DRIVERS[catalog.database]
        if not Path(jar).is_file():
            raise EnvironmentProblem(
                f"catalog {catalog.name!r} is on {catalog.database} but its JDBC driver {jar} "
                f"is missing: apt-get install {package} (or set CDC_INGEST_JDBC_JARS)"
            )
        return [jar, *(j for j in installed if j != jar)]
    if not installed:
        packages = " or ".join(package for _, package in JDBC_DRIVERS.values())
        raise EnvironmentProblem(
            f"no JDBC driver for the Iceberg catalog: apt-get install {packages} "
            "(or set CDC_INGEST_JDBC_JARS)"
        )
    return installed


def job_jars(catalog: CatalogConfig | None = None) -> list[str]:
    """Every jar the ingestion job needs on the Spark classpath (see :func:`jdbc_jars`)."""
    return [iceberg_runtime_jar(), *jdbc_jars(catalog)]


def catalog_conf(catalog: CatalogConfig) -> dict[str, str]:
    """Spark settings that register ``catalog`` as an Iceberg JDBC catalog."""
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "jdbc",
        f"{prefix}.uri": catalog.jdbc_url,
        f"{prefix}.warehouse": catalog.warehouse,
        # pyiceberg's SqlCatalog reads and writes the V1 layout (with iceberg_type).
        f"{prefix}.jdbc.schema-version": "V1",
        # Other writers (a rerun, another pipeline, pyiceberg) commit to the same tables.
        f"{prefix}.cache-enabled": "false",
    }
    user, password = catalog.jdbc_credentials
    if user:
        conf[f"{prefix}.jdbc.user"] = user
    if password:
        conf[f"{prefix}.jdbc.password"] = password
    return conf


# HotSpot never JIT-compiles a method over 8000 bytes of bytecode unless this flag is off.
HUGE_METHODS_FLAG = "DontCompileHugeMethods"
JVM_OPTIONS = f"-XX:-{HUGE_METHODS_FLAG}"
JVM_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def submit_conf(catalog: CatalogConfig, overrides: dict[str, str]) -> dict[str, str]:
    """The job's whole Spark conf: session settings, the catalog, then a pipelines file's own.

    Later entries win, except that JVM options set there keep the job's unless they name the same
    HotSpot flag: replacing them would silently slow every stage that generates a huge method.
    """
    conf = {**session_conf(), **catalog_conf(catalog), **overrides}
    for key in JVM_OPTION_KEYS:
        if key in overrides and HUGE_METHODS_FLAG not in overrides[key]:
            conf[key] = f"{JVM_OPTIONS} {overrides[key]}".strip()
    return conf


def session_conf() -> dict[str, str]:
    """Settings the job relies on regardless of catalog."""
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    return {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        # Read by spark-submit (Airflow); a bare interpreter sets it on the builder instead.
        "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "4g"),
        # Epoch values from CDC messages are UTC instants; keep Spark from shifting them.
        "spark.sql.session.timeZone": "UTC",
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
        # A stage that decodes or types many columns generates methods over HotSpot's limit.
        **{key: JVM_OPTIONS for key in JVM_OPTION_KEYS},
        "spark.pyspark.python": python,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


def configure_catalog(spark: SparkSession, catalog: CatalogConfig) -> None:
    """Register (or re-point) a catalog on a running session; catalogs load lazily by name."""
    for key, value in catalog_conf(catalog).items():
        spark.conf.set(key, value)


def build_session(catalog: CatalogConfig, app_name: str = "cdc-ingest") -> SparkSession:
    """The job's Spark session: local[*] unless spark-submit or SPARK_MASTER says otherwise."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit the master and jars are already set; on a bare interpreter start local.
    if "SPARK_ENV_LOADED" not in os.environ and "spark.master" not in _submitted_conf():
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
        builder = builder.config("spark.jars", ",".join(job_jars(catalog)))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**session_conf(), **catalog_conf(catalog)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CDC_INGEST_SPARK_LOG_LEVEL", "WARN"))
    return spark


def _submitted_conf() -> dict[str, str]:
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return {"spark.master": "set"} if "--master" in args else {}


def release(frame: DataFrame) -> None:
    """Free the blocks of a local checkpoint now instead of when the JVM collects its RDD.

    A process that runs several batches (the tests, a long-lived driver) would otherwise hold
    every batch's rows until a garbage collection notices them.
    """
    plan = frame._jdf.queryExecution().analyzed()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
