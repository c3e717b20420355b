"""A wide table against a narrow one, each a CPU ratio measured in the same run (``make bench``).

    .venv/bin/python -m scripts.benchmarks.bench_wide [--quick] [--workdir DIR] [--in-process]

- **wide table**: a 1-line update into an existing table of 1,000 columns (half of them numbers,
  half text, as Debezium images carry every column) against the same into a table of 10 columns
  of the same kinds; the median of five batches each, alternating; target at most 2x.

Each table first receives 200 rows (not counted), then three warm-up updates each (a wide table's
first batches still compile its generated classes, as an engine does once). CPU is that of
the whole process tree, batches through the warm engine as a user's (``bench_engine``).
``--quick`` runs a table of 100 columns against the 10-column one. Every batch's summary must add
up; the exit status is 1 only when one does not.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "jobs") not in sys.path:
    sys.path.insert(0, str(REPO / "jobs"))

from scripts.benchmarks.bench_engine import EngineBatches, SessionBatches, add_route_argument  # noqa: E402
from scripts.benchmarks.bench_shapes import Runner, land, write_config  # noqa: E402
from scripts.benchmarks.bench_table import Shape, save, table  # noqa: E402

ROWS = 200
RUNS = 5
WARM_UPS = 3
NARROW = 10


def image(key: int, version: int, columns: int) -> dict[str, object]:
    """One row of ``columns`` columns besides ``id``: even ones numbers, odd ones text."""
    row: dict[str, object] = {"id": key}
    for c in range(columns):
        row[f"c{c}"] = key * 1000 + version if c % 2 == 0 else f"r{key}-v{version}-c{c}"
    return row


def change(op: str, key: int, version: int, columns: int) -> str:
    before = None if op == "c" else image(key, version - 1, columns)
    ts = 1_000_000 + version * 10_000 + key
    source = {"db": "shop", "table": "t0", "ts_ms": ts}
    after = image(key, version, columns)
    return json.dumps({"op": op, "ts_ms": ts, "before": before, "after": after, "source": source})


class Table:
    """One table of ``columns`` columns in a catalog of its own, updated a line at a time."""

    def __init__(self, root: Path, columns: int, batches: EngineBatches | SessionBatches) -> None:
        self.root, self.columns, self.batches = root, columns, batches
        self.version, self.files = 1, 0
        self.problems: list[str] = []
        self.config = write_config(root, root / "landing", f"wide{columns}", 1)
        self._batch([change("c", k, 1, columns) for k in range(ROWS)])

    def _batch(self, lines: list[str]) -> float:
        land(self.root / "landing", lines, 1, first=self.files)
        self.files += 1
        batch = self.batches.run(self.config, "shop")
        summary = batch.summary
        if summary.unaccounted() or summary.lines != len(lines) or summary.dead_lettered:
            self.problems.append(f"{self.columns} columns: {summary.render()}")
        return batch.cpu

    def update_one(self) -> float:
        """CPU seconds of a batch of one update of one row."""
        self.version += 1
        return self._batch([change("u", self.version % ROWS, self.version, self.columns)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 columns instead of 1,000")
    parser.add_argument("--workdir", type=Path, default=Path("bench-data/wide"))
    parser.add_argument("--results", type=Path, help="append the scenario to this file")
    add_route_argument(parser)
    args = parser.parse_args(argv)
    wide_columns = 100 if args.quick else 1000
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True)
    batches = Runner(workdir, args.in_process).batches
    print(f"batches run {batches.route}", flush=True)
    started = time.perf_counter()
    try:
        narrow = Table(workdir / "narrow", NARROW, batches)
        wide = Table(workdir / "wide", wide_columns, batches)
        for _ in range(WARM_UPS):  # not counted
            narrow.update_one(), wide.update_one()
        spent: dict[int, list[float]] = {NARROW: [], wide_columns: []}
        for _ in range(RUNS):
            for side in (narrow, wide):
                spent[side.columns].append(side.update_one())
        for columns, cpus in spent.items():
            print(f"  {columns} columns: " + " ".join(f"{c:.2f}" for c in cpus) + " CPU-s")
        narrow_cpu, wide_cpu = (statistics.median(spent[c]) for c in (NARROW, wide_columns))
        shapes = [
            Shape(
                "wide table",
                f"1 update into {wide_columns:,} columns: {wide_cpu:.1f} s (median of {RUNS})",
                f"{NARROW} columns: {narrow_cpu:.1f} s",
                wide_cpu / narrow_cpu,
                2.0,
            )
        ]
    finally:
        batches.close()
    print(f"wide ({'quick, ' if args.quick else ''}{time.perf_counter() - started:.0f} s):")
    for line in table(shapes):
        print(line)
    save(shapes, args.results)
    problems = narrow.problems + wide.problems
    if problems:
        print("summaries that do not add up:", *problems, sep="\n", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
