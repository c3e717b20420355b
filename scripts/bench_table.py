"""The one table ``make bench`` ends with: every scenario, its ratio, its target, met or not.

Each bench script appends its scenarios to a results file (``--results``, JSON lines) as it
finishes; ``python scripts/bench_table.py FILE`` prints them together.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
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

    def row(self) -> str:
        target, met = f"<= {self.target:.2f}x", self.ratio <= self.target
        if self.other_target is not None:
            target, met = self.other_target[0], bool(self.other_target[1])
        return (
            f"  {self.name:<15} {self.measured:<44} {self.reference:<30} "
            f"{self.ratio:>6.2f}x  {target:<9} {'met' if met else 'NOT met'}"
        )


HEADER = f"  {'scenario':<15} {'measured (CPU)':<44} {'against (CPU)':<30} {'ratio':>7}  target"


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
    print(f"make bench: {len(shapes)} scenarios, CPU seconds of the whole process tree")
    print(HEADER)
    for shape in shapes:
        print(shape.row())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
