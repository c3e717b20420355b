"""Steady state: changes into a mirror that already holds rows, then a long run of micro-batches.

    .venv/bin/python -m scripts.benchmarks.bench_steady [--quick] [--only history] [--workdir DIR]

In one Spark session, each number the CPU seconds of the whole process tree, each measured on a
warm JVM (the batch after two warm-up batches, each Spark reference after an uncounted run of its
own):

1. ``into 10M rows``: 1M Debezium changes (half updates, a quarter inserts, a quarter deletes)
   applied by ``run_pipeline`` to a mirror already holding 10M rows (the MERGE path), against
   - a parse-only baseline of the same files (``read.text`` + ``from_json`` + aggregate;
     reported);
   - a hand-written Spark job over a plain Iceberg table holding the same rows: parse, keep each
     key's newest change, one ``MERGE INTO`` (no ordering guard, dead letters or checkpoints;
     reported);
   - the same job guarded, the target's reference (1.5x): its table holds each row's source
     time, and the MERGE applies a change only where it is newer, as ours does;
   - pyiceberg's ``Table.upsert`` (plus ``Table.delete`` for the deletes) on a tenth of the rows
     and changes, scaled by ten.
2. ``50 batches``: 50 consecutive runs of 2,000 changes each; the last 10 against the first 10.
   After each, ``maintain`` runs when the batch left the mirror due under the pipeline's
   ``maintenance.triggers`` (the defaults), as the ingest DAG's event would have it run:
   ``maintain when due`` reports those runs' CPU-s against the 50 batches'.
   Then ``1 line into it``: a 1-line batch into the same mirror, against the guarded hand MERGE
   of the same line (reported, no target: what a small batch pays for the table's size).
   ``reads``: the mirror as those batches (and that maintenance) left it, read by a
   warm full scan and 100 point lookups through Spark and through pyiceberg (bench_reads.py),
   against the same reads after ``maintain`` (3.).
3. ``after maintain``: one ``maintain`` of the pipeline, then every table of its namespace (mirror
   and system tables): position-delete files left, data files, snapshots, and the manifests its
   current snapshot lists (of live files; of none, carried from an earlier snapshot).
4. ``bucket(16, id)``: the same 1M changes, and 10 micro-batches, into a second mirror of the same
   10M rows partitioned by ``bucket(16, id)`` (``table_options``), against the unpartitioned
   mirror's (reported, no target).
5. ``history``: the same into a third mirror that keeps an SCD type 2 history (bench_history.py).
6. ``copy-on-write`` and ``format v3``: the same 50 micro-batches into mirrors of the same rows
   whose MERGEs rewrite the files they touch, or write deletion vectors (``VARIANTS``), and their
   reads, against the merge-on-read v2 mirror's (reported, no target).

``--quick``: a tenth of the rows and changes (the 50 batches keep their size).
Exit status: 1 when a run's summary does not add up, else 0 (never on a ratio).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "jobs") not in sys.path:
    sys.path.insert(0, str(REPO / "jobs"))

from cdc_ingest import ordering  # noqa: E402
from cdc_ingest.config import load_config  # noqa: E402

from scripts.benchmarks.bench_engine import SessionBatches, add_route_argument, batches_for  # noqa: E402
from scripts.benchmarks.bench_history import historied_pipeline, history_shapes  # noqa: E402
from scripts.benchmarks.bench_metadata import after_maintain, namespace_metadata  # noqa: E402
from scripts.benchmarks.bench_phases import render_phases, tree_cpu_seconds  # noqa: E402
from scripts.benchmarks.bench_reads import (  # noqa: E402
    VARIANT_PYICEBERG_LOOKUPS,
    VARIANTS,
    ReadCosts,
    read_costs,
    read_shapes,
    variant_shapes,
)
from scripts.benchmarks.bench_references import (  # noqa: E402
    hand_merge,
    parse_baseline,
    pyiceberg_upsert,
    seed_hand_tables,
)
from scripts.benchmarks.bench_steady_data import TABLE, change, land, steady_changes  # noqa: E402
from scripts.benchmarks.bench_table import Shape, save, table  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

CATALOG, NAMESPACE = "steady", "shop"
# The second pipeline: the same table, partitioned by a bucket of its key.
BUCKETED, BUCKETED_NAMESPACE = "bucketed", "shop_bucketed"
BUCKET_SPEC = "bucket(16, id)"
FILES = 10
MICRO_BATCHES, MICRO_CHANGES = 50, 2000
# The snapshots maintain retains, which "after maintain" bounds (bench_metadata).
RETAIN_SNAPSHOTS = 5
# The order a seeded row holds, as the job stores a Debezium snapshot read ('r') of it: the
# vendor's nine elements (a snapshot, no position, time 0), then batch 1, file, line and row. Each
# row's is its own, as in a mirror (until 27 November every row held one 8-byte constant, which
# measured between nothing and 3 CPU-s less per batch: docs/performance.md).
SEEDED_ORDER = ordering.encoded_sql(
    "array(0L, 0L, NULL, NULL, NULL, NULL, NULL, NULL, 0L)", "1L", "id % 10", "id", "0L"
)


class Steady:
    """The pipeline, its catalog and the comparison tables, on one session."""

    def __init__(self, workdir: Path, rows: int, in_process: bool = True) -> None:
        from cdc_ingest.config import CatalogConfig
        from cdc_ingest.spark_session import build_session

        self.workdir, self.rows = workdir, rows
        self.catalog = CatalogConfig(
            CATALOG, f"sqlite:///{workdir / 'catalog.db'}", (workdir / "warehouse").as_uri()
        )
        self.spark: SparkSession = build_session(self.catalog, app_name="cdc-ingest-bench-steady")
        self.problems: list[str] = []
        self.landed = 0  # batches landed, each in a folder of its own
        self.timings: Any = None  # the last batch's stages
        self.maintained: list[float] = []  # CPU-s of each maintenance the triggers called for
        self.config_path = workdir / "pipelines.yaml"
        doc = {
            "catalog": {
                "name": CATALOG,
                "uri": self.catalog.uri,
                "warehouse": self.catalog.warehouse,
            },
            "pipelines": [
                {
                    "name": "steady",
                    "format": "debezium-json",
                    "landing": (workdir / "landing").as_uri(),
                    "namespace": NAMESPACE,
                    "keys": {TABLE: ["id"]},
                    "maintenance": {"retain_snapshots": RETAIN_SNAPSHOTS},
                },
                {
                    "name": BUCKETED,
                    "format": "debezium-json",
                    "landing": (workdir / "landing-bucketed").as_uri(),
                    "namespace": BUCKETED_NAMESPACE,
                    "keys": {TABLE: ["id"]},
                    "table_options": {TABLE: {"partition_by": [BUCKET_SPEC]}},
                },
                historied_pipeline(TABLE, (workdir / "landing-history").as_uri()),
                *(
                    {
                        "name": name,
                        "format": "debezium-json",
                        "landing": (workdir / f"landing-{name}").as_uri(),
                        "namespace": namespace,
                        "keys": {TABLE: ["id"]},
                        "table_options": {TABLE: {"properties": properties}},
                    }
                    for name, namespace, _, properties in VARIANTS
                ),
            ],
        }
        self.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self.config = load_config(self.config_path)
        self.batches = batches_for(in_process, self.spark, workdir / "engine")

    def mirror(self, pipeline: str = "steady") -> str:
        namespace = self.config.pipeline(pipeline).namespace
        return f"{CATALOG}.{namespace}.{TABLE}"

    def reads(self) -> ReadCosts:
        """What the steady mirror costs to read now (bench_reads)."""
        return read_costs(self.spark, self.catalog, self.mirror(), "id", "v", self.rows)

    def landing(self, pipeline: str = "steady") -> Path:
        return Path(self.config.pipeline(pipeline).landing.removeprefix("file://"))

    def run(self, lines: list[str], expect: dict[str, int], pipeline: str = "steady") -> float:
        """CPU seconds of one batch of ``lines``; its counts are checked against ``expect``."""
        self.landed += 1
        land(self.landing(pipeline) / f"batch-{self.landed:03d}", lines, FILES)
        batch = self.batches.run(self.config_path, pipeline)
        self.timings, summary, spent = batch.timings, batch.summary, batch.cpu
        table = summary.tables.get(TABLE)
        got = {k: getattr(table, k, None) for k in expect}
        if summary.unaccounted() or summary.lines != len(lines) or got != expect:
            self.problems.append(f"batch {self.landed}: {got} != {expect}: {summary.render()}")
        return spent

    def seed_mirror(
        self,
        pipeline: str = "steady",
        warm: int = 1000,
        rounds: int | None = None,
        seeded: Callable[[], None] | None = None,
    ) -> None:
        """The mirror holding keys 0 .. rows-1: created by a batch, filled by one INSERT (then
        ``seeded`` runs), then changed by ``rounds`` warm-up batches of ``warm`` changes shaped
        like the measured one: by default two in the bench's session, four on the engine, whose
        JVM the seeding (an INSERT of every row in the bench's session) did not warm: its second
        and third batches of the shape still cost 15 to 40% more than later ones (29 November
        2026)."""
        if rounds is None:
            rounds = 2 if isinstance(self.batches, SessionBatches) else 4
        self.run([change("c", 0, 0, 1)], {"inserted": 1}, pipeline)
        self.spark.sql(
            f"INSERT INTO {self.mirror(pipeline)} SELECT id, 0L, concat('n', id), "
            f"{SEEDED_ORDER}, 'r', 1L FROM range(1, {self.rows})"
        )
        if seeded is not None:
            seeded()
        # Warm-up batches through the MERGE path as large as the measured one and of its shape
        # (updates, deletes and inserts: each writes through code of its own), so that the
        # measured batch runs on compiled code (the JIT's, Spark's generated classes) like the
        # references measured after it, as every batch of a stream after its first few does. The
        # first finds no tombstones; the second classifies against the first's, as the measured
        # batch does. On the mirror's last keys, which no later batch changes, and fresh keys no
        # later batch inserts.
        updates, inserts = warm // 2, warm // 4
        deletes = warm - updates - inserts
        for round_ in range(rounds):
            first = self.rows - (round_ + 1) * (updates + deletes)
            ts = 2 + round_ * warm
            warm_up = [change("u", first + k, 1, ts + k) for k in range(updates)]
            warm_up += [
                change("d", first + updates + k, 1, ts + updates + k) for k in range(deletes)
            ]
            fresh = (20 + round_) * self.rows
            warm_up += [
                change("c", fresh + k, 0, ts + updates + deletes + k) for k in range(inserts)
            ]
            expect = {"inserted": inserts, "updated": updates, "deleted": deletes}
            self.run(warm_up, expect, pipeline)

    def maintain_when_due(self, pipeline: str = "steady") -> None:
        """Maintain the pipeline's due tables (``maintain --due``) when the batch left its mirror
        due under its ``maintenance.triggers``, as the ingest DAG's event would; its CPU-s go to
        ``self.maintained``."""
        from cdc_ingest.maintenance import maintain_pipeline
        from cdc_ingest.read_debt import ReadDebt
        from cdc_ingest.state.lake import open_catalog

        namespace = self.config.pipeline(pipeline).namespace
        table = open_catalog(self.catalog).load_table((namespace, TABLE))
        if ReadDebt.of(table).due(self.config.pipeline(pipeline).maintenance.triggers) is None:
            return
        cpu = tree_cpu_seconds()
        maintain_pipeline(self.spark, self.config, pipeline, due_only=True)
        self.maintained.append(tree_cpu_seconds() - cpu)

    def micro_batches(
        self,
        first_key: int,
        start_ts: int,
        pipeline: str = "steady",
        count: int = MICRO_BATCHES,
        maintained: bool = False,
    ) -> list[float]:
        """CPU seconds of each of ``count`` batches of ``MICRO_CHANGES`` changes, on held keys
        from ``first_key`` on (none changed before) and fresh ones; ``maintained``: maintenance
        runs whenever a batch leaves the mirror due (``maintain_when_due``)."""
        spent: list[float] = []
        quarter = MICRO_CHANGES // 4
        ts = start_ts
        for b in range(count):
            # Updates of held keys, deletes of others, inserts of fresh keys: none twice.
            base = first_key + b * MICRO_CHANGES
            lines = [change("u", base + k, 2, ts + k) for k in range(2 * quarter)]
            lines += [
                change("d", base + 2 * quarter + k, 2, ts + 2 * quarter + k) for k in range(quarter)
            ]
            lines += [
                change("c", 10 * self.rows + base + k, 1, ts + 3 * quarter + k)
                for k in range(quarter)
            ]
            ts += MICRO_CHANGES
            expect = {"inserted": quarter, "updated": 2 * quarter, "deleted": quarter}
            spent.append(self.run(lines, expect, pipeline))
            if maintained:
                self.maintain_when_due(pipeline)
        return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the rows and changes")
    parser.add_argument("--workdir", type=Path, default=Path("bench-data/steady"))
    parser.add_argument("--results", type=Path, help="append the scenarios to this file")
    parser.add_argument(
        "--only",
        choices=["history"],
        help="only the batch into the mirror and the history scenarios (no other references)",
    )
    add_route_argument(parser)
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    rows, total = 10_000_000 // scale, 1_000_000 // scale
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True)
    workdir = args.workdir.resolve()
    started = time.perf_counter()
    bench = Steady(workdir, rows, args.in_process)
    print(f"batches run {bench.batches.route}", flush=True)
    shapes: list[Shape] = []
    try:
        bench.seed_mirror(warm=total)
        hand = {}
        if args.only != "history":
            hand = seed_hand_tables(bench.spark, bench.mirror(), f"{CATALOG}.hand.{TABLE}")
        lines = steady_changes(rows, total, 1_000_000)
        quarter = total // 4
        expect = {"inserted": quarter, "updated": total // 2, "deleted": quarter}
        ours = bench.run(lines, expect)
        if args.only != "history":
            if bench.timings is not None:
                print("stages of the batch into a table:", *render_phases(bench.timings), sep="\n")
            landing = bench.landing() / f"batch-{bench.landed:03d}"
            # Each reference after an uncounted run of its own, as the batch after its warm-ups.
            parse_baseline(bench.spark, landing)
            parse = parse_baseline(bench.spark, landing)
            merges = {}
            for guarded in (False, True):
                hand_merge(bench.spark, landing, hand[guarded, True], guarded)
                merges[guarded] = hand_merge(bench.spark, landing, hand[guarded, False], guarded)
            merge, guarded_merge = merges[False], merges[True]
            tenth = steady_changes(rows // 10, total // 10, 1_000_000)
            upsert = pyiceberg_upsert(bench.catalog, f"py.{TABLE}", rows // 10, tenth) * 10
            label = f"{total:,} changes into {rows:,} rows"
            shapes.append(
                Shape(
                    "into a table",
                    f"{label}: {ours:.1f} s",
                    f"parse only: {parse:.1f} s",
                    ours / parse,
                    0.0,
                    ("reported", True),
                )
            )
            shapes.append(
                Shape(
                    "vs hand MERGE",
                    f"ours: {ours:.1f} s",
                    f"MERGE job: {merge:.1f} s",
                    ours / merge,
                    0.0,
                    ("reported", True),
                )
            )
            shapes.append(
                Shape(
                    "vs guarded hand",
                    f"ours: {ours:.1f} s",
                    f"MERGE if newer: {guarded_merge:.1f} s",
                    ours / guarded_merge,
                    1.5,
                )
            )
            shapes.append(
                Shape(
                    "vs upsert",
                    f"ours: {ours:.1f} s",
                    f"pyiceberg x10: {upsert:.1f} s",
                    ours / upsert,
                    1.0,
                )
            )
            spent = bench.micro_batches(total, 10_000_000, maintained=True)
            first, last = sum(spent[:10]), sum(spent[-10:])
            # What the reads' upkeep cost: maintenance each time the triggers called for it.
            shapes.append(
                Shape(
                    "maintain when due",
                    f"{len(bench.maintained)} runs: {sum(bench.maintained):.1f} s",
                    f"50 batches: {sum(spent):.1f} s",
                    sum(bench.maintained) / sum(spent),
                    0.0,
                    ("reported", True),
                )
            )
            shapes.append(
                Shape(
                    "50 batches",
                    f"last 10: {last:.1f} s",
                    f"first 10: {first:.1f} s",
                    last / first,
                    1.1,
                )
            )
            # One line into the same mirror: what a warm batch pays whatever its size (issue 52),
            # after warm-ups of its own, against the guarded hand MERGE of the same line.
            for n in range(3):
                bench.run([change("u", 5 + n, 4, 50_000_000 + n)], {"updated": 1})
            one = bench.run([change("u", 9, 4, 50_000_010)], {"updated": 1})
            if bench.timings is not None:
                print("stages of a 1-line batch into it:", *render_phases(bench.timings), sep="\n")
            one_landing = bench.landing() / f"batch-{bench.landed:03d}"
            hand_merge(bench.spark, one_landing, hand[True, True], True)
            one_hand = hand_merge(bench.spark, one_landing, hand[True, False], True)
            shapes.append(
                Shape(
                    "1 line into it",
                    f"into {rows:,} rows: {one:.1f} s",
                    f"guarded hand: {one_hand:.1f} s",
                    one / one_hand,
                    0.0,
                    ("reported", True),
                )
            )
            # The same changes and micro-batches into the same rows, partitioned by bucket(16, id).
            bench.seed_mirror(BUCKETED, warm=total)
            bucketed = bench.run(lines, expect, BUCKETED)
            bucketed_micro = sum(bench.micro_batches(total, 10_000_000, BUCKETED, 10))
            shapes.append(
                Shape(
                    BUCKET_SPEC,
                    f"into {rows:,} rows: {bucketed:.1f} s",
                    f"unpartitioned: {ours:.1f} s",
                    bucketed / ours,
                    0.0,
                    ("reported", True),
                )
            )
            shapes.append(
                Shape(
                    f"{BUCKET_SPEC} x10",
                    f"10 micro-batches: {bucketed_micro:.1f} s",
                    f"unpartitioned: {first:.1f} s",
                    bucketed_micro / first,
                    0.0,
                    ("reported", True),
                )
            )
        # The same changes and micro-batches into the same rows, keeping their history.
        shapes += history_shapes(bench, lines, expect, ours, total)
        from cdc_ingest.maintenance import maintain_pipeline

        if args.only != "history":
            # The mirror as the micro-batches left it, read in the bench's session once every
            # batch is measured, then again after maintain.
            piled = bench.reads()
            # The same micro-batches into mirrors of the same rows written otherwise.
            for name, _, label, _ in VARIANTS:
                bench.seed_mirror(name)
                variant = sum(bench.micro_batches(total, 10_000_000, name, maintained=True))
                costs = read_costs(
                    bench.spark,
                    bench.catalog,
                    bench.mirror(name),
                    "id",
                    "v",
                    bench.rows,
                    VARIANT_PYICEBERG_LOOKUPS,
                )
                shapes += variant_shapes(label, variant, sum(spent), costs, piled)
        maintain_pipeline(bench.spark, bench.config, "steady")
        if args.only != "history":
            shapes += read_shapes(piled, bench.reads())
        tables = namespace_metadata(bench.spark, f"{CATALOG}.{NAMESPACE}")
        shapes.append(after_maintain(tables, RETAIN_SNAPSHOTS))
    finally:
        bench.batches.close()
        bench.spark.stop()
    print(f"steady state ({'quick, ' if args.quick else ''}{time.perf_counter() - started:.0f} s):")
    for line in table(shapes):
        print(line)
    save(shapes, args.results)
    if bench.problems:
        print("summaries that do not add up:", *bench.problems, sep="\n", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
