"""Which Iceberg table properties a pipelines file may set, and the values each accepts.

Checked when the config is loaded, so that a misspelt property fails there with a suggestion
instead of being stored on the table and ignored by Iceberg.
"""

from __future__ import annotations

import difflib
import re
from typing import Any


class PropertyError(ValueError):
    """A property Iceberg does not know, or a value it would not accept."""


# Every property of Iceberg's TableProperties (1.10 to 1.12) a table may set; a name ending in "."
# takes a column name after it. Read-only ones (uuid, snapshot-count, current-*) are left out.
ICEBERG_PROPERTIES = [
    "commit.manifest-merge.enabled",
    "commit.manifest.min-count-to-merge",
    "commit.manifest.target-size-bytes",
    "commit.retry.max-wait-ms",
    "commit.retry.min-wait-ms",
    "commit.retry.num-retries",
    "commit.retry.total-timeout-ms",
    "commit.status-check.max-wait-ms",
    "commit.status-check.min-wait-ms",
    "commit.status-check.num-retries",
    "commit.status-check.total-timeout-ms",
    "compatibility.snapshot-id-inheritance.enabled",
    "encryption.data-key-length",
    "encryption.key-id",
    "engine.hive.enabled",
    "engine.hive.lock-enabled",
    "format-version",
    "gc.enabled",
    "history.expire.max-ref-age-ms",
    "history.expire.max-snapshot-age-ms",
    "history.expire.min-snapshots-to-keep",
    "read.data-planning-mode",
    "read.delete-planning-mode",
    "read.orc.vectorization.batch-size",
    "read.orc.vectorization.enabled",
    "read.parquet.vectorization.batch-size",
    "read.parquet.vectorization.enabled",
    "read.split.adaptive-size.enabled",
    "read.split.metadata-target-size",
    "read.split.open-file-cost",
    "read.split.planning-lookback",
    "read.split.target-size",
    "write.avro.compression-codec",
    "write.avro.compression-level",
    "write.data.path",
    "write.delete.avro.compression-codec",
    "write.delete.avro.compression-level",
    "write.delete.distribution-mode",
    "write.delete.format.default",
    "write.delete.granularity",
    "write.delete.isolation-level",
    "write.delete.mode",
    "write.delete.orc.block-size-bytes",
    "write.delete.orc.compression-codec",
    "write.delete.orc.compression-strategy",
    "write.delete.orc.stripe-size-bytes",
    "write.delete.parquet.compression-codec",
    "write.delete.parquet.compression-level",
    "write.delete.parquet.dict-size-bytes",
    "write.delete.parquet.page-row-limit",
    "write.delete.parquet.page-size-bytes",
    "write.delete.parquet.row-group-size-bytes",
    "write.delete.target-file-size-bytes",
    "write.distribution-mode",
    "write.folder-storage.path",
    "write.format.default",
    "write.location-provider.impl",
    "write.merge.distribution-mode",
    "write.merge.isolation-level",
    "write.merge.mode",
    "write.metadata.compression-codec",
    "write.metadata.delete-after-commit.enabled",
    "write.metadata.metrics.column.",
    "write.metadata.metrics.default",
    "write.metadata.metrics.max-inferred-column-defaults",
    "write.metadata.path",
    "write.metadata.previous-versions-max",
    "write.object-storage.enabled",
    "write.object-storage.partitioned-paths",
    "write.object-storage.path",
    "write.orc.block-size-bytes",
    "write.orc.bloom.filter.columns",
    "write.orc.bloom.filter.fpp",
    "write.orc.compression-codec",
    "write.orc.compression-strategy",
    "write.orc.stripe-size-bytes",
    "write.parquet.bloom-filter-enabled.column.",
    "write.parquet.bloom-filter-fpp.column.",
    "write.parquet.bloom-filter-max-bytes",
    "write.parquet.compression-codec",
    "write.parquet.compression-level",
    "write.parquet.dict-size-bytes",
    "write.parquet.page-row-limit",
    "write.parquet.page-size-bytes",
    "write.parquet.row-group-check-max-record-count",
    "write.parquet.row-group-check-min-record-count",
    "write.parquet.row-group-size-bytes",
    "write.parquet.stats-enabled.column.",
    "write.spark.accept-any-schema",
    "write.spark.advisory-partition-size-bytes",
    "write.spark.fanout.enabled",
    "write.summary.partition-limit",
    "write.target-file-size-bytes",
    "write.update.distribution-mode",
    "write.update.isolation-level",
    "write.update.mode",
    "write.wap.enabled",
]
_CHOICES = {
    r"format-version": ("2", "3"),  # row-level deletes need version 2
    r"write\.(delete|update|merge)\.mode": ("copy-on-write", "merge-on-read"),
    r"write\.((delete|update|merge)\.)?distribution-mode": ("none", "hash", "range"),
    r"write\.(delete|update|merge)\.isolation-level": ("serializable", "snapshot"),
    r"write\.(delete\.)?parquet\.compression-codec": (
        "zstd",
        "gzip",
        "snappy",
        "lz4",
        "brotli",
        "uncompressed",
    ),
    r"write\.(delete\.)?format\.default": ("parquet", "avro", "orc"),
    r"write\.delete\.granularity": ("file", "partition"),
}
_INTEGER = re.compile(r"(-bytes|-ms|-count|-retries|-size|-limit|-keep|-lookback|-max)$")
_BOOLEAN = re.compile(r"(\.enabled|-enabled|accept-any-schema)$")
# Properties the job owns: set by it, never by a pipelines file.
_OWNED = re.compile(r"^cdc\.")


def validate_property(key: str, value: Any) -> str:
    """The value of an Iceberg table property as text, or a PropertyError saying why not."""
    if _OWNED.match(key):
        raise PropertyError("cdc.* properties are set by the job")
    known = key in ICEBERG_PROPERTIES or any(
        p.endswith(".") and key.startswith(p) and len(key) > len(p) for p in ICEBERG_PROPERTIES
    )
    if not known:
        close = difflib.get_close_matches(key, ICEBERG_PROPERTIES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise PropertyError(f"not an Iceberg table property{hint}")
    text = str(value).lower() if isinstance(value, bool) else str(value)
    for pattern, choices in _CHOICES.items():
        if re.fullmatch(pattern, key) and text.lower() not in choices:
            raise PropertyError(f"{text!r} must be one of {', '.join(choices)}")
    if _BOOLEAN.search(key) and text.lower() not in ("true", "false"):
        raise PropertyError(f"{text!r} must be true or false")
    if _INTEGER.search(key) and not re.fullmatch(r"\d+", text):
        raise PropertyError(f"{text!r} must be a non-negative integer")
    return text
