"""The shapes real streams have, each a CPU ratio measured in the same run (``make bench``).

    .venv/bin/python -m scripts.benchmarks.bench_shapes [--quick] [--workdir DIR]

- **many tables**: the same changes (inserts, then updates of half the keys) in 300 tables
  against one table; target at most 1.5x.
- **many existing tables**: the next batch (updates of a third of the keys) into those tables,
  each now holding rows (a MERGE per table), against the same into the one table; the issue's
  target for many tables (1.5x) is printed against it too.
- **soft deletes**: the many-tables batch and a next one that also deletes keys, into tables with
  ``deletes: soft`` (their rows flagged, not removed), against the same in one such table; 1.5x.
- **own columns**: the many-tables batches again, each table with columns of its own (``v`` and
  ``note`` named after the table, as the tables of one database have), against one table; 1.5x.
- **small files**: the same lines in 3,000 files of 20 lines against 10 files (least of two
  rounds each, as the many-tables shapes); target 1.5x.
- **tiny batch**: a 10-line batch (the median of five, each into a fresh catalog: a batch of
  about a CPU second varies by half from one to the next) against a 100k-line batch; target 0.25x.
- **nothing new**: ``cdc-ingest run`` with nothing pending, as a process: its CPU against a
  10-line batch, and whether it started a JVM (target: it does not).

CPU is that of the whole process tree (this interpreter, Spark's JVM and its Python workers), so
other load on the machine matters less than for wall time. The many-tables shapes and their one
table are measured twice, alternating, and each side's least CPU is compared (``ROUNDS``).
``--quick`` runs a tenth of each size.
Every batch's summary must add up; the exit status is 1 only when one does not (never on a ratio:
machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "jobs") not in sys.path:
    sys.path.insert(0, str(REPO / "jobs"))


from scripts.benchmarks.bench_engine import add_route_argument, batches_for  # noqa: E402
from scripts.benchmarks.bench_table import Shape, save, table  # noqa: E402


def _change(table: str, op: str, key: int, version: int, ts: int) -> str:
    before = None if op == "c" else {"id": key, "v": version - 1, "note": f"n{key}"}
    after = None if op == "d" else {"id": key, "v": version, "note": f"n{key}"}
    source = {"db": "shop", "table": table, "ts_ms": ts}
    return json.dumps({"op": op, "ts_ms": ts, "before": before, "after": after, "source": source})


def changes(total: int, tables: int) -> list[str]:
    """``total`` Debezium JSON changes spread over ``tables`` tables: inserts, then updates of
    half the keys."""
    inserts = total * 2 // 3
    lines = [_change(f"t{k % tables}", "c", k, 1, 1000 + k) for k in range(inserts)]
    updated = range(0, 2 * (total - inserts), 2)
    lines += [_change(f"t{k % tables}", "u", k, 2, 10_000_000 + k) for k in updated]
    return lines


def updates(total: int, tables: int) -> list[str]:
    """The batch after ``changes(total, tables)``: updates of every third key it inserted."""
    inserts = total * 2 // 3
    return [_change(f"t{k % tables}", "u", k, 3, 20_000_000 + k) for k in range(0, inserts, 3)]


def updates_and_deletes(total: int, tables: int) -> list[str]:
    """``updates(total, tables)`` and deletes of every sixth key from the second (none updated)."""
    inserts = total * 2 // 3
    deleted = range(1, inserts, 6)
    return updates(total, tables) + [
        _change(f"t{k % tables}", "d", k, 4, 30_000_000 + k) for k in deleted
    ]


def with_own_columns(lines: list[str]) -> list[str]:
    """``lines`` with each table's ``v`` and ``note`` named after it (``v7``, ``note7`` in
    ``t7``): tables that share no column but their key, so that they fill groups by columns."""
    renamed = []
    for line in lines:
        change = json.loads(line)
        suffix = change["source"]["table"][1:]
        for image in ("before", "after"):
            if change[image] is not None:
                change[image] = {
                    (name if name == "id" else f"{name}{suffix}"): value
                    for name, value in change[image].items()
                }
        renamed.append(json.dumps(change))
    return renamed


def land(landing: Path, lines: list[str], files: int, first: int = 0) -> None:
    """Land ``lines`` in ``files`` files numbered from ``first`` (0: into an emptied landing)."""
    if first == 0 and landing.exists():
        shutil.rmtree(landing)
    landing.mkdir(parents=True, exist_ok=True)
    per = -(-len(lines) // files)
    for n in range(files):
        chunk = lines[n * per : (n + 1) * per]
        (landing / f"{first + n:05d}.json").write_text("".join(line + "\n" for line in chunk))


def write_config(
    root: Path, landing: Path, catalog: str, tables: int, deletes: str = "apply"
) -> Path:
    import yaml

    doc = {
        "catalog": {
            "name": catalog,
            "uri": f"sqlite:///{root / 'catalog.db'}",
            "warehouse": (root / "warehouse").as_uri(),
        },
        "pipelines": [
            {
                "name": "shop",
                "format": "debezium-json",
                "landing": landing.as_uri(),
                "namespace": "shop",
                "keys": {f"t{i}": ["id"] for i in range(tables)},
                "deletes": deletes,
            }
        ],
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "pipelines.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class Runner:
    """Batches on the warm engine (or one Spark session of the bench's own), each into a fresh
    catalog."""

    def __init__(self, workdir: Path, in_process: bool) -> None:
        from cdc_ingest.config import CatalogConfig
        from cdc_ingest.spark_session import build_session

        self.workdir = workdir
        self.runs = 0
        self.problems: list[str] = []
        self.last_config = workdir / "pipelines.yaml"  # the last batch's pipelines file
        spark = None
        if in_process:
            bootstrap = CatalogConfig(
                "shapes", f"sqlite:///{workdir / 'boot.db'}", workdir.as_uri()
            )
            spark = build_session(bootstrap, app_name="cdc-ingest-bench-shapes")
        self.batches = batches_for(in_process, spark, workdir / "engine")

    def cpu_of_batch(
        self, lines: list[str], files: int, tables: int, deletes: str = "apply"
    ) -> float:
        """CPU seconds of one batch of ``lines`` in ``files`` files, into a fresh catalog."""
        self.runs += 1
        root = self.workdir / f"run{self.runs}"
        land(root / "landing", lines, files)
        catalog = f"shapes{self.runs}"
        batch = self.batches.run(
            write_config(root, root / "landing", catalog, tables, deletes), "shop"
        )
        summary, spent = batch.summary, batch.cpu
        if summary.unaccounted() or summary.lines != len(lines) or summary.dead_lettered:
            self.problems.append(f"run {self.runs}: {summary.render()}")
        self.last_config = root / "pipelines.yaml"
        return spent

    def cpu_of_next_batch(self, lines: list[str], files: int) -> float:
        """CPU seconds of a batch of ``lines`` into the last batch's catalog (its tables exist)."""
        root = self.workdir / f"run{self.runs}"
        land(root / "landing", lines, files, first=len(list((root / "landing").iterdir())))
        batch = self.batches.run(root / "pipelines.yaml", "shop")
        summary, spent = batch.summary, batch.cpu
        if summary.unaccounted() or summary.lines != len(lines) or summary.dead_lettered:
            self.problems.append(f"run {self.runs}, next batch: {summary.render()}")
        return spent


def nothing_new(config: Path) -> tuple[float, bool]:
    """CPU seconds of ``cdc-ingest run`` with nothing pending, and whether a JVM ran."""
    cli = str(Path(sys.executable).parent / "cdc-ingest")
    usage_before = os.times()
    env = {**os.environ, "JAVA_HOME": "/nonexistent-jvm"}
    done = subprocess.run(
        [cli, "run", "--config", str(config), "--pipeline", "shop"],
        capture_output=True,
        text=True,
        env=env,
    )
    usage = os.times()
    cpu = (usage.children_user - usage_before.children_user) + (
        usage.children_system - usage_before.children_system
    )
    # With JAVA_HOME pointing nowhere, a run that needed Spark could not have succeeded.
    return cpu, done.returncode == 0 and "nothing new" in done.stdout


TINY_RUNS = 5
# Each many-tables shape is measured this many times, alternating with its one-table reference,
# and each side's least CPU taken: one run of a shape moved by up to a third from the next on the
# same machine (27 November 2026: 300 tables of columns of their own 1.22x to 1.89x their one
# table, run after run in one session).
ROUNDS = 2


def least_of_rounds(
    measure: Callable[[int], tuple[float, ...]], counts: tuple[int, ...], unit: str = "table(s)"
) -> dict[int, tuple[float, ...]]:
    """``measure(count)`` for each of ``counts`` in turn, ``ROUNDS`` times over; per count, the
    least of each of its values."""
    least: dict[int, tuple[float, ...]] = {}
    for _ in range(ROUNDS):
        for count in counts:
            spent = measure(count)
            print(f"  {count} {unit}: " + " + ".join(f"{s:.1f}" for s in spent) + " CPU-s")
            least[count] = tuple(map(min, zip(least.get(count, spent), spent, strict=True)))
    return least


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each size")
    parser.add_argument("--workdir", type=Path, default=Path("bench-data/shapes"))
    parser.add_argument("--results", type=Path, help="append the scenarios to this file")
    add_route_argument(parser)
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True)
    runner = Runner(args.workdir.resolve(), args.in_process)
    print(f"batches run {runner.batches.route}", flush=True)
    shapes: list[Shape] = []
    started = time.perf_counter()
    try:
        total, tables = 100_000 // scale, 300 // scale
        # Warm-up, not counted: every shape once, so that no measured batch pays the JIT's
        # compiling of its plans (a 1,000-change warm-up left the one-table batch at 25 CPU-s
        # against 10 warm; an unwarmed 10-line batch costs 2.8-2.9 CPU-s, 1.6-1.9 warm).
        for count in (1, tables):
            runner.cpu_of_batch(changes(total, count), 10, count)
            runner.cpu_of_next_batch(updates(total, count), 10)
            runner.cpu_of_batch(changes(total, count), 10, count, "soft")
            runner.cpu_of_next_batch(updates_and_deletes(total, count), 10)
            runner.cpu_of_batch(with_own_columns(changes(total, count)), 10, count)
            runner.cpu_of_next_batch(with_own_columns(updates(total, count)), 10)
        small_lines = changes(60_000 // scale, 1)
        for files in (10, 3000 // scale):
            runner.cpu_of_batch(small_lines, files, 1)
        runner.cpu_of_batch(changes(10, 1), 1, 1)
        plain = least_of_rounds(
            lambda count: (
                runner.cpu_of_batch(changes(total, count), 10, count),
                runner.cpu_of_next_batch(updates(total, count), 10),
            ),
            (1, tables),
        )
        (one, one_next), (many, many_next) = plain[1], plain[tables]
        shapes.append(
            Shape(
                "many tables",
                f"{total:,} changes, {tables} tables: {many:.1f} s",
                f"1 table: {one:.1f} s",
                many / one,
                1.5,
            )
        )
        shapes.append(
            Shape(
                "many existing",
                f"next {len(updates(total, 1)):,} changes, {tables} tables: {many_next:.1f} s",
                f"1 table: {one_next:.1f} s",
                many_next / one_next,
                1.5,
            )
        )
        soft = {
            count: sum(pair)
            for count, pair in least_of_rounds(
                lambda count: (
                    runner.cpu_of_batch(changes(total, count), 10, count, "soft")
                    + runner.cpu_of_next_batch(updates_and_deletes(total, count), 10),
                ),
                (1, tables),
            ).items()
        }
        shapes.append(
            Shape(
                "soft deletes",
                f"2 batches, {tables} tables: {soft[tables]:.1f} s",
                f"1 table: {soft[1]:.1f} s",
                soft[tables] / soft[1],
                1.5,
            )
        )
        own_lines = {
            count: (
                with_own_columns(changes(total, count)),
                with_own_columns(updates(total, count)),
            )
            for count in (1, tables)
        }
        own = {
            count: sum(pair)
            for count, pair in least_of_rounds(
                lambda count: (
                    runner.cpu_of_batch(own_lines[count][0], 10, count)
                    + runner.cpu_of_next_batch(own_lines[count][1], 10),
                ),
                (1, tables),
            ).items()
        }
        shapes.append(
            Shape(
                "own columns",
                f"2 batches, {tables} tables: {own[tables]:.1f} s",
                f"1 table: {own[1]:.1f} s",
                own[tables] / own[1],
                1.5,
            )
        )
        # Least of two rounds as well: one 3,000-file batch through the engine cost 5.1 CPU-s
        # against 4.0 to 4.7 for the same batch before and after (29 November 2026).
        by_files = least_of_rounds(
            lambda files: (runner.cpu_of_batch(small_lines, files, 1),),
            (10, 3000 // scale),
            "files",
        )
        (ten,), (small,) = by_files[10], by_files[3000 // scale]
        shapes.append(
            Shape(
                "small files",
                f"{len(small_lines):,} lines, {3000 // scale:,} files: {small:.1f} s",
                f"10 files: {ten:.1f} s",
                small / ten,
                1.5,
            )
        )
        tinies = [runner.cpu_of_batch(changes(10, 1), 1, 1) for _ in range(TINY_RUNS)]
        print("10-line batches:", " ".join(f"{c:.2f}" for c in tinies), "CPU-s")
        tiny = statistics.median(tinies)
        shapes.append(
            Shape(
                "tiny batch",
                f"10 lines: {tiny:.1f} s (median of {TINY_RUNS})",
                f"{total:,} lines: {one:.1f} s",
                tiny / one,
                0.25,
            )
        )
        idle_cpu, no_jvm = nothing_new(runner.last_config)
        print(f"nothing new: {idle_cpu:.1f} CPU-s, {'no JVM' if no_jvm else 'started a JVM'}")
        shapes.append(
            Shape(
                "nothing new",
                f"cdc-ingest run: {idle_cpu:.1f} s",
                f"10-line batch: {tiny:.1f} s",
                idle_cpu / tiny,
                0.0,
                ("no JVM", no_jvm),
            )
        )
    finally:
        runner.batches.close()
    print(f"shapes ({'quick, ' if args.quick else ''}{time.perf_counter() - started:.0f} s):")
    for line in table(shapes):
        print(line)
    save(shapes, args.results)
    if runner.problems:
        print("summaries that do not add up:", *runner.problems, sep="\n", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
