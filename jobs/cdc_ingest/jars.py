"""The job's JVM artifacts, by their Maven coordinates, resolved once into a local cache.

``make install`` runs ``python -m cdc_ingest.jars``: Maven copies each artifact (no transitive
dependencies: the Iceberg jars are shaded bundles and the JDBC drivers need nothing Spark lacks)
into :func:`jars_dir`. From then on the job, the DAGs' spark-submit, the tests and the bench take
the files from there (``spark.jars``), so no run resolves anything or reaches the network; on a
Spark cluster the driver ships them to the executors.

One Iceberg release for every Iceberg artifact: 1.12.0 is the newest with a Spark 3.5 runtime.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ICEBERG_VERSION = "1.12.0"
SPARK_LINE = "3.5_2.12"
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


ICEBERG_SPARK_RUNTIME = Artifact(
    "org.apache.iceberg", f"iceberg-spark-runtime-{SPARK_LINE}", ICEBERG_VERSION
)
# S3FileIO (in the runtime jar) needs the AWS SDK v2, which this bundle shades.
ICEBERG_AWS_BUNDLE = Artifact("org.apache.iceberg", "iceberg-aws-bundle", ICEBERG_VERSION)
SQLITE_JDBC = Artifact("org.xerial", "sqlite-jdbc", "3.51.1.0")
POSTGRESQL_JDBC = Artifact("org.postgresql", "postgresql", "42.7.14")
# Spark's Avro source for Avro landing zones: pyspark's own release (Avro is in Spark's jars).
SPARK_AVRO = Artifact("org.apache.spark", "spark-avro_2.12", "3.5.9")

# Every jar of the job, in classpath order; the catalog's JDBC drivers are on it whatever the
# catalog, so that one session can be re-pointed at a catalog of another kind.
JOB_ARTIFACTS = (
    ICEBERG_SPARK_RUNTIME,
    ICEBERG_AWS_BUNDLE,
    SQLITE_JDBC,
    POSTGRESQL_JDBC,
    SPARK_AVRO,
)


# Resolved with the job's jars, loaded only when a pipelines file asks (cdc_ingest.lineage): the
# OpenLineage Spark integration, the newest release whose dependencies resolve here (1.38 to 1.40
# did not), Scala 2.12 for Spark 3.5.
OPTIONAL_ARTIFACTS = (Artifact("io.openlineage", "openlineage-spark_2.12", "1.37.0"),)


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
    return artifact_paths(JOB_ARTIFACTS)


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
        paths = resolve((*JOB_ARTIFACTS, *OPTIONAL_ARTIFACTS), args.dir or jars_dir())
    except EnvironmentProblem as exc:
        print(f"cdc-ingest: {exc}", file=sys.stderr)
        return 2
    print("\n".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
