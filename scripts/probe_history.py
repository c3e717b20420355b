"""One batch into the tables a ``bench_steady.py --only history`` run leaves, with its stages.

    .venv/bin/python scripts/probe_history.py ROUND CHANGES PIPELINE [PIPELINE ...]

Each PIPELINE (``steady``: no history; ``historied``: ``history: scd2``) gets a batch of CHANGES
changes shaped as the bench's (half updates, a quarter deletes, a quarter inserts) on keys that
ROUND (1 to 8) chooses: a new ROUND for every call on the same tables, so that no key is
changed twice. ``hand-scd2`` is the hand-written SCD type 2 MERGE (``bench_references``)
over the historied tables. Prints each batch's CPU (the process tree) and stages: where a
history batch's time goes, without rerunning the 40-minute bench. The first batch of a process
pays the JIT's warm-up.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench_history import HISTORIED
from bench_phases import render_phases
from bench_references import hand_scd2
from bench_steady import FILES, Steady
from bench_steady_data import change, land

WORKDIR = Path("bench-data/steady-history")
ROWS = 10_000_000


def main(argv: list[str]) -> int:
    round_, total, pipelines = int(argv[0]), int(argv[1]), argv[2:]
    bench = Steady(WORKDIR.resolve(), ROWS)
    bench.landed = 500 + round_ * 10  # landing folders of their own
    quarter = total // 4
    # Held keys no bench batch changed, the same in every pipeline; fresh keys to insert.
    base = 4_000_000 + round_ * 1_000_000 if round_ <= 5 else 1_100_000 + (round_ - 6) * 950_000
    ts = 60_000_000 + round_ * 2_000_000
    for pipeline in pipelines:
        lines = [change("u", base + k, 3, ts + k) for k in range(2 * quarter)]
        lines += [
            change("d", base + 2 * quarter + k, 3, ts + 2 * quarter + k) for k in range(quarter)
        ]
        fresh = 30 * ROWS + round_ * 1_000_000
        lines += [change("c", fresh + k, 1, ts + 3 * quarter + k) for k in range(quarter)]
        expect = {"inserted": quarter, "updated": 2 * quarter, "deleted": quarter}
        if pipeline in ("hand-scd2", "hand-split"):
            bench.landed += 1
            # Beside the pipeline's landing, not in it: the pipeline would read these lines too.
            landing = WORKDIR / "landing-hand" / f"batch-{bench.landed:03d}"
            land(landing, lines, FILES)
            history = bench.mirror(HISTORIED) + "_history"
            spent, merge = hand_scd2(bench.spark, landing, history, pipeline == "hand-split")
            print(f"{pipeline}: {spent:.1f} CPU-s, its writes {merge:.1f}")
            continue
        spent = bench.run(lines, expect, pipeline)
        assert bench.timings is not None  # in this process's session: its stages are timed
        print(f"{pipeline}: {spent:.1f} CPU-s", *render_phases(bench.timings), sep="\n")
    bench.spark.stop()
    print(*bench.problems, sep="\n")
    return 1 if bench.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
