"""The job's JVM artifacts, by their Maven coordinates, resolved once into a local cache.

``make install`` runs ``python -m cdc_ingest.jars``: Maven copies each artifact (no transitive
dependencies: the Iceberg jars are shaded bundles and the JDBC drivers need nothing Spark lacks)
into :func:`jars_dir`. From then on the job, the DAGs' spark-submit, the tests and the bench take
the files from there (``spark.jars``), so no run resolves anything or reaches the network; on a
Spark cluster the driver ships them to the executors.

One Iceberg release for every Iceberg artifact (1.12.0), and the artifacts of the installed Spark
line (:data:`SPARK_LINES`); another line is refused before Spark starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ICEBERG_VERSION = "1.12.0"
# The Spark lines the job supports, each with its Scala version: Iceberg 1.12.0 publishes Spark
# runtimes for 3.5 (Scala 2.12) and 4.1 (Scala 2.13) only, none for 4.0, 4.2 or 4.3.
SPARK_LINES = {"3.5": "2.12", "4.1": "2.13"}
JARS_DIR_VARIABLE = "CDC_INGEST_JARS_DIR"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


class EnvironmentProblem(RuntimeError):
    """Something the job needs on this machine (a jar, Java) is missing."""


@dataclass(frozen=True)
class Artifact:
    """One Maven artifact: ``group:artifact:version`` plus an optional classifier."""

    group: str
    artifact: str
    version: str
    classifier: str = ""

    @property
    def coordinates(self) -> str:
        """``group:artifact:version[:classifier]`` as Maven and Spark spell it."""
        tail = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{tail}"

    @property
    def file_name(self) -> str:
        """The jar's name as Maven's ``copy-dependencies`` writes it."""
        tail = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{tail}.jar"


def installed_spark() -> str:
    """The installed pyspark's version, read from its files: nothing of Spark is imported (a DAG
    file's parse must stay cheap).

    Raises:
        EnvironmentProblem: pyspark is not installed.
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentProblem(
            "pyspark is not installed: pip install 'cdc-ingest[spark35]' or 'cdc-ingest[spark41]'"
        )
    # Through its loader: under spark-submit, pyspark is imported from Spark's pyspark.zip.
    version = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
    try:
        text = spec.loader.get_data(version).decode()  # type: ignore[union-attr]
    except (AttributeError, OSError):
        text = ""
    found = re.search(r"__version__[^=]*=\s*[\"']([^\"']+)", text)
    if found is None:
        raise EnvironmentProblem(f"cannot tell the installed pyspark's version from {version}")
    _refuse_mixed_clients()
    return found[1]


def _refuse_mixed_clients() -> None:
    """pyspark-client (which the Spark provider 6 requires) writes its files over pyspark's: of
    another Spark version, it leaves a Python side that matches none of the installed jars."""
    try:
        full, client = metadata.version("pyspark"), metadata.version("pyspark-client")
    except metadata.PackageNotFoundError:
        return
    if full != client:
        raise EnvironmentProblem(
            f"pyspark-client {client} is installed over pyspark {full}: they must be one Spark "
            f"version; pip install 'cdc-ingest[spark{''.join(full.split('.')[:2])}]' with its "
            "constraints file (docs/deploying.md)"
        )


def spark_line(version: str | None = None) -> str:
    """The Spark line (``3.5``, ``4.1``) of ``version`` (the installed pyspark's by default).

    Raises:
        EnvironmentProblem: a line the job does not support, refused before Spark starts.
    """
    version = version or installed_spark()
    line = ".".join(version.split(".")[:2])
    if line not in SPARK_LINES:
        raise EnvironmentProblem(
            f"pyspark {version} is Spark {line}, which cdc-ingest does not support: install "
            f"Spark {' or '.join(SPARK_LINES)} (Iceberg {ICEBERG_VERSION} has Spark runtimes for "
            "those only)"
        )
    return line


def job_artifacts(version: str | None = None) -> tuple[Artifact, ...]:
    """Every jar of the job for Spark ``version`` (the installed one's by default), in classpath
    order; the catalog's JDBC drivers are on it whatever the catalog, so that one session can be
    re-pointed at a catalog of another kind.

    Raises:
        EnvironmentProblem: a Spark line the job does not support.
    """
    version = version or installed_spark()
    line = spark_line(version)
    scala = SPARK_LINES[line]
    return (
        Artifact("org.apache.iceberg", f"iceberg-spark-runtime-{line}_{scala}", ICEBERG_VERSION),
        # S3FileIO (in the runtime jar) needs the AWS SDK v2, which this bundle shades.
        Artifact("org.apache.iceberg", "iceberg-aws-bundle", ICEBERG_VERSION),
        Artifact("org.xerial", "sqlite-jdbc", "3.51.1.0"),
        Artifact("org.postgresql", "postgresql", "42.7.14"),
        # Spark's Avro source for Avro landing zones: pyspark's own release.
        Artifact("org.apache.spark", f"spark-avro_{scala}", version),
    )


def optional_artifacts(version: str | None = None) -> tuple[Artifact, ...]:
    """Resolved with the job's jars, loaded only when a pipelines file asks (cdc_ingest.lineage):
    the OpenLineage Spark integration, the newest release whose dependencies resolve here (1.38
    to 1.40 did not)."""
    scala = SPARK_LINES[spark_line(version)]
    return (Artifact("io.openlineage", f"openlineage-spark_{scala}", "1.37.0"),)


def jars_dir() -> Path:
    """Where resolved jars live: ``$CDC_INGEST_JARS_DIR``, else inside this interpreter's prefix.

    The prefix is the virtual environment (or the image's Python), so the jars go with the
    installation that uses them and a new environment resolves its own.
    """
    override = os.environ.get(JARS_DIR_VARIABLE)
    return Path(override) if override else Path(sys.prefix) / "share" / "cdc-ingest" / "jars"


def artifact_paths(artifacts: Sequence[Artifact], directory: Path | None = None) -> list[str]:
    """Absolute paths of ``artifacts`` in the cache.

    Raises:
        EnvironmentProblem: naming every missing artifact and how to resolve it.
    """
    directory = directory or jars_dir()
    paths = [directory / a.file_name for a in artifacts]
    missing = [a.coordinates for a, p in zip(artifacts, paths, strict=True) if not p.is_file()]
    if missing:
        raise EnvironmentProblem(
            f"JVM artifacts missing from {directory}: {', '.join(missing)}; run `cdc-ingest "
            f"setup` (with --jars-dir DIR where there is no network), or set {JARS_DIR_VARIABLE}"
        )
    return [str(p.resolve()) for p in paths]


def job_jars() -> list[str]:
    """Every jar the ingestion job needs on the Spark classpath."""
    return artifact_paths(job_artifacts())


def _pom(artifacts: Sequence[Artifact]) -> str:
    dependencies = "\n".join(
        "    <dependency>"
        f"<groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId>"
        f"<version>{a.version}</version>"
        + (f"<classifier>{a.classifier}</classifier>" if a.classifier else "")
        + "</dependency>"
        for a in artifacts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>cdc-ingest</groupId><artifactId>jvm-artifacts</artifactId>"
        "<version>0</version>\n"
        f"  <dependencies>\n{dependencies}\n  </dependencies>\n</project>\n"
    )


def resolve(
    artifacts: Sequence[Artifact], directory: Path, *, transitive: bool = False
) -> list[str]:
    """Copy ``artifacts`` (and, if ``transitive``, their runtime dependencies) into ``directory``.

    Maven keeps its own cache (``~/.m2``), so a second resolve is offline and quick. Nothing is
    fetched when every named jar is already there.

    Raises:
        EnvironmentProblem: Maven is missing or could not resolve; its last lines are quoted.
    """
    try:
        return artifact_paths(artifacts, directory)
    except EnvironmentProblem:
        pass
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EnvironmentProblem("Maven (mvn) is needed once to resolve the job's JVM artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(artifacts), encoding="utf-8")
        command = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={directory}",
            "-DincludeScope=runtime",
            f"-DexcludeTransitive={'false' if transitive else 'true'}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise EnvironmentProblem(f"Maven could not resolve the JVM artifacts:\n{tail}")
    return artifact_paths(artifacts, directory)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cdc_ingest.jars [--dir DIR]``: resolve the job's jars, print their paths."""
    parser = argparse.ArgumentParser(prog="python -m cdc_ingest.jars", description=main.__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="cache directory")
    args = parser.parse_args(argv)
    try:
        paths = resolve((*job_artifacts(), *optional_artifacts()), args.dir or jars_dir())
    except EnvironmentProblem as exc:
        print(f"cdc-ingest: {exc}", file=sys.stderr)
        return 2
    print("\n".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
