"""What a namespace's tables hold of metadata after ``maintain``, for ``bench_steady.py``'s
"after maintain" scenario: position-delete files, data files, snapshots and manifests per table,
and whether each is bounded."""

from __future__ import annotations

from typing import Any

from scripts.benchmarks.bench_table import Shape

# What "bounded" means after maintain, per table, besides the retained snapshots: a handful of
# data files and of manifests listing live files.
MAX_DATA_FILES, MAX_MANIFESTS = 8, 8


def namespace_metadata(spark: Any, namespace: str) -> dict[str, tuple[int, int, int, int, int]]:
    """Per table of ``namespace`` (``catalog.namespace``): (position-delete files, data files,
    snapshots, manifests of the current snapshot listing live files, manifests listing none that
    an earlier snapshot wrote). A snapshot's own record of the files it removed is a manifest of
    no live file, which the next commit leaves out; one carried further is metadata that grows."""
    found: dict[str, tuple[int, int, int, int, int]] = {}
    for row in spark.sql(f"SHOW TABLES IN {namespace}").collect():
        name = f"{namespace}.{row['tableName']}"
        found[row["tableName"]] = (
            spark.sql(f"SELECT * FROM {name}.delete_files").count(),
            spark.sql(f"SELECT * FROM {name}.data_files").count(),
            spark.sql(f"SELECT * FROM {name}.snapshots").count(),
            *current_manifests(spark, name),
        )
    return found


def current_manifests(spark: Any, name: str) -> tuple[int, int]:
    """The manifests of a table's current snapshot: those listing live files (data or delete),
    and those listing none that an earlier snapshot wrote."""
    current = spark.sql(
        f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()
    live = (
        "added_data_files_count + existing_data_files_count"
        " + added_delete_files_count + existing_delete_files_count > 0"
    )
    counts = spark.sql(
        f"SELECT count_if({live}) AS live, count_if(NOT ({live})"
        f" AND added_snapshot_id != {current[0][0] if current else -1}) AS carried"
        f" FROM {name}.manifests"
    ).first()
    return (counts["live"], counts["carried"]) if counts else (0, 0)


def after_maintain(
    tables: dict[str, tuple[int, int, int, int, int]], retain_snapshots: int
) -> Shape:
    """Print each table's metadata; the scenario: the most any table holds of each, and whether
    every table is bounded (no delete file, no manifest carried)."""
    for name, (deletes, files, snapshots, manifests, carried) in tables.items():
        print(
            f"  {name:<22} delete files {deletes:>3}  data files {files:>3}  "
            f"snapshots {snapshots:>3}  manifests {manifests:>3} (+{carried} carried)"
        )
    worst = tuple(max(counts[i] for counts in tables.values()) for i in range(5))
    bounded = (
        worst[0] == 0
        and worst[1] <= MAX_DATA_FILES
        and worst[2] <= retain_snapshots
        and worst[3] <= MAX_MANIFESTS
        and worst[4] == 0
    )
    return Shape(
        "after maintain",
        f"most per table: {worst[0]} deletes, {worst[1]} files, {worst[2]} snaps,"
        f" {worst[3]}+{worst[4]} manifests",
        f"{len(tables)} tables",
        float(worst[0]),
        0.0,
        (f"0/{MAX_DATA_FILES}/{retain_snapshots}/{MAX_MANIFESTS}+0", bounded),
    )
