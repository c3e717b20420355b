"""The one table ``make bench`` ends with: every scenario, its ratio, its target, met or not.

Each bench script appends its scenarios to a results file (``--results``, JSON lines) as it
finishes; ``python -m scripts.benchmarks.bench_table FILE`` prints them together.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path


@dataclass
class Shape:
    """One scenario: its ratio (measured / reference CPU) and target."""

    name: str
    measured: str
    reference: str
    ratio: float
    target: float
    # A target that is not a ratio (e.g. "no JVM"), and whether it is met.
    other_target: tuple[str, bool] | None = None

    def cells(self) -> tuple[str, str, str, str, str, str]:
        target, met = f"<= {self.target:.2f}x", self.ratio <= self.target
        if self.other_target is not None:
            target, met = self.other_target[0], bool(self.other_target[1])
        # A scenario judged by counts, not a ratio, has no ratio to print.
        ratio = f"{self.ratio:.2f}x" if self.ratio or self.other_target is None else "-"
        return (
            self.name,
            self.measured,
            self.reference,
            ratio,
            target,
            "met" if met else "NOT met",
        )


HEADER = ("scenario", "measured (CPU)", "against (CPU)", "ratio", "target", "")


def table(shapes: list[Shape]) -> list[str]:
    """The rows, each column as wide as its widest cell (the ratio right-aligned)."""
    rows = [HEADER, *(shape.cells() for shape in shapes)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i == 3 else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(("  " + "  ".join(cells)).rstrip())
    return lines


def save(shapes: list[Shape], results: Path | None) -> None:
    """Append ``shapes`` to the results file, if one is given."""
    if results is None:
        return
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a") as out:
        for shape in shapes:
            out.write(json.dumps(asdict(shape)) + "\n")


def load(results: Path) -> list[Shape]:
    shapes = []
    for line in results.read_text().splitlines():
        fields = json.loads(line)
        other = fields.pop("other_target")
        shapes.append(Shape(**fields, other_target=tuple(other) if other else None))
    return shapes


def main(argv: list[str]) -> int:
    shapes = load(Path(argv[0]))
    print(
        f"make bench on pyspark {version('pyspark')}: {len(shapes)} scenarios, "
        "CPU seconds of the whole process tree"
    )
    for line in table(shapes):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
