"""The package for a cluster's executors, by Spark's own mechanism (``SparkContext.addPyFile``).

A batch's Python workers (the line reader, the container reader) import ``cdc_ingest``. On a
cluster the driver ships a zip of the package it runs to every executor, so a worker's Python
needs only what PySpark's Arrow workers need (pyarrow and pandas; boto3 for S3 landing zones),
and runs exactly the driver's code. In local mode the workers are the driver machine's
interpreter, which has the package already: nothing is shipped.
"""

from __future__ import annotations

import hashlib
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import cdc_ingest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def package_zip(directory: Path | None = None) -> Path:
    """A zip of the running ``cdc_ingest`` package's modules, named by their content (written
    once per content, under the temporary directory by default)."""
    root = Path(next(iter(cdc_ingest.__path__))).resolve()
    modules = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for module in modules:
        digest.update(str(module.relative_to(root)).encode() + b"\0" + module.read_bytes())
    directory = directory or Path(tempfile.gettempdir()) / "cdc-ingest-py-files"
    path = directory / f"cdc_ingest-{digest.hexdigest()[:16]}.zip"
    if path.is_file():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{id(modules)}.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for module in modules:
            archive.write(module, Path("cdc_ingest") / module.relative_to(root))
    partial.replace(path)
    return path


def ship_package(spark: SparkSession) -> Path | None:
    """Add the package to the session's executors where they run elsewhere; returns the zip."""
    if (spark.sparkContext.master or "local").startswith("local"):
        return None
    path = package_zip()
    spark.sparkContext.addPyFile(str(path))
    return path
